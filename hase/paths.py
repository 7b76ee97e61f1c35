"""Hase's default paths and default device configuration, in one place (the Makefile uses the same ones).

Paths are relative to the working directory, as the CLI takes them, except two that are absolute:
`SHIPPED_PREDICTORS`, the predictors shipped as package data inside `hase/` (found the same way from a
source checkout, an editable install and a wheel), and `user_predictors_dir()`, where `hase train` writes
by default. Lookup order of a device's predictor: `--predictors DIR`, else the user directory, else the
shipped ones (`hase.predict.bundle.find_predictor`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

STORE = "data/hase.sqlite"  # measurement store (SQLite), written by `hase collect` (Makefile STORE)
PREDICTORS = "data/predictors"  # where `make train` writes in a checkout (git-ignored; Makefile PREDICTORS)
SHIPPED_PREDICTORS = Path(__file__).resolve().parent / "predictors"  # package data: read, never written
PREDICTORS_ENV = "HASE_PREDICTORS_DIR"  # overrides the user directory of predictors
USER_PREDICTORS_HELP = f"${PREDICTORS_ENV}, else the platform's user data directory + hase/predictors"
REPORTS = "reports"  # evaluation report of `hase evaluate` (git-ignored; Makefile REPORT)
REFERENCE_REPORT = "docs/reference-report"  # the committed report of the shipped predictor (README figures)
ZOO_CONFIG = "configs/zoo_small.toml"  # model zoo description (Makefile ZOO)
ZOO_DIR = "model_zoo"  # where zoo models are built, one folder per zoo config
# The zoo config as package data (hase/configs/ links to configs/ in a checkout; a wheel holds copies): `hase adapt`
# and `hase host survey` build their transfer set from it anywhere, into the user cache directory.
PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"
PACKAGED_ZOO_CONFIG = PACKAGED_CONFIGS / "zoo_small.toml"
DEVICES_CONFIG = "configs/devices.toml"  # device configurations and timing settings (Makefile DEVICE)
PREDICTOR_CONFIG = "configs/predictor.toml"  # forest hyper-parameters and training settings
PIPELINE_EXAMPLE = "configs/pipeline_example.toml"  # the documented example pipeline config
SURVEYS = "benchmarks/hosts"  # where a checkout keeps one committed survey per host (`hase host survey`)
SURVEY_REAL = ("tests/data/models", "../shared/models/exported")  # a checkout's real models for a survey
DEFAULT_DEVICE = "cpu-1t"  # the device configuration whose predictor ships in SHIPPED_PREDICTORS (Makefile report)


def user_data_dir() -> Path:
    """The platform's per-user data directory for Hase: `$XDG_DATA_HOME/hase` (default `~/.local/share/hase`)
    on Linux, `~/Library/Application Support/hase` on macOS, `%LOCALAPPDATA%\\hase` on Windows."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Application Support")
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = xdg if os.path.isabs(xdg) else str(Path.home() / ".local" / "share")  # XDG: relative is ignored
    return Path(base) / "hase"


def user_cache_dir() -> Path:
    """The platform's per-user cache directory for Hase (what can be built again, e.g. the transfer zoo):
    `$XDG_CACHE_HOME/hase` (default `~/.cache/hase`) on Linux, `~/Library/Caches/hase` on macOS,
    `%LOCALAPPDATA%\\hase\\cache` on Windows."""
    if sys.platform == "win32":
        return user_data_dir() / "cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "hase"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg if os.path.isabs(xdg) else str(Path.home() / ".cache")) / "hase"


def user_predictors_dir() -> Path:
    """Where user-trained predictors live (one folder per device configuration): `$HASE_PREDICTORS_DIR` if
    set, else `user_data_dir() / "predictors"`. Read when called, never at import."""
    env = os.environ.get(PREDICTORS_ENV, "")
    return Path(env).expanduser() if env else user_data_dir() / "predictors"


def config_file(path: str | Path, default: str) -> Path:
    """`path` as given; where it is the `default` config (`configs/<name>`) and this folder has no `configs/` (an
    installed wheel run anywhere), the copy shipped in the package (`PACKAGED_CONFIGS`), which a checkout links to."""
    p = Path(path)
    if str(path) == default and not p.is_file() and (PACKAGED_CONFIGS / p.name).is_file():
        return PACKAGED_CONFIGS / p.name
    return p
