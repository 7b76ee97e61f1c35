"""Hase's default paths and default device configuration, in one place (the Makefile uses the same ones).

Paths are relative to the working directory, as the CLI takes them; `SHIPPED_PREDICTORS` is absolute: the
predictors shipped in this checkout, used when no predictors directory is given.
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]  # the Hase checkout this package runs from

STORE = "data/hase.sqlite"  # measurement store (SQLite), written by `hase collect` (Makefile STORE)
PREDICTORS = "data/predictors"  # trained predictors, one folder per device config (Makefile PREDICTORS)
SHIPPED_PREDICTORS = REPO_ROOT / PREDICTORS  # the predictors that come with the checkout
REPORTS = "reports"  # evaluation report of `hase evaluate` (Makefile REPORT)
ZOO_CONFIG = "configs/zoo_small.toml"  # model zoo description (Makefile ZOO)
ZOO_DIR = "model_zoo"  # where zoo models are built, one folder per zoo config
DEVICES_CONFIG = "configs/devices.toml"  # device configurations and timing settings (Makefile DEVICE)
PREDICTOR_CONFIG = "configs/predictor.toml"  # forest hyper-parameters and training settings
PIPELINE_EXAMPLE = "configs/pipeline_example.toml"  # the documented example pipeline config
PROFILES = "hase_profiles"  # where `hase profile` lets ONNX Runtime write its profiles
DEFAULT_DEVICE = "cpu-1t"  # the device configuration whose predictor ships in SHIPPED_PREDICTORS (Makefile report)
