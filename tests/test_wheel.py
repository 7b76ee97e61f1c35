"""The wheel: built from the sources, installed into a fresh virtual environment, it predicts with the predictor it
ships, from a directory outside the checkout (no source tree, no editable install, no user-trained predictor).

Offline: the wheel is built with this environment's setuptools (`--no-build-isolation`, the `dev` extra), from a
copy of the sources so the checkout gets no build/ or egg-info; the fresh environment gets only the wheel, and
sees this environment's numpy, onnx and onnxruntime through a .pth file (never this environment's `hase`).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, SHIPPED_DEVICES, exported_model

from hase import paths
from hase.predict.manifest import MANIFEST

pytestmark = pytest.mark.slow


def run(cmd: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; a failure shows its output."""
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=240,
                          check=False)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (what `pip wheel .` would build from a clean clone)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "hase", src / "hase", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", dist, "-q"], cwd=src)
    (whl,) = dist.glob("hase-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel; returns its bin directory."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=env_dir)
                .stdout.strip())
    (site / "_hase_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy, onnx, ORT, ...
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
        cwd=env_dir)
    return bindir


def clean_env(tmp: Path) -> dict[str, str]:
    """The environment of a user with nothing of Hase's checkout: no PYTHONPATH, an empty user directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env[paths.PREDICTORS_ENV] = str(tmp / "no-user-predictors")
    return env


def test_the_wheel_holds_the_shipped_predictors(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert paths.DEFAULT_DEVICE in SHIPPED_DEVICES
    for device in SHIPPED_DEVICES:  # every predictor of the checkout, each with every file its manifest lists
        shipped = json.loads((REPO / "hase" / "predictors" / device / MANIFEST).read_text())
        for name in [MANIFEST, *shipped["files"]]:
            assert f"hase/predictors/{device}/{name}" in names, (device, name)
    in_wheel = {n.split("/")[2] for n in names if n.startswith("hase/predictors/") and n.endswith(f"/{MANIFEST}")}
    assert sorted(in_wheel) == SHIPPED_DEVICES
    assert not any(n.startswith(("tests/", "data/", "docs/")) for n in names)
    assert {"hase/configs/zoo_small.toml", "hase/configs/kernel_ranges.csv"} <= names  # the transfer set's zoo


def test_the_installed_wheel_predicts_with_its_shipped_predictor(installed: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"  # not the checkout: no `hase/` folder to import from the working directory
    elsewhere.mkdir()
    env = clean_env(tmp_path)
    hase = installed / ("hase.exe" if os.name == "nt" else "hase")
    where = run([installed / "python", "-c", "import hase, hase.paths; print(hase.__file__); "
                 "print(hase.paths.SHIPPED_PREDICTORS)"], cwd=elsewhere, env=env).stdout.split()
    package = Path(where[0]).parent
    assert REPO not in package.parents and installed.parent in package.parents, where
    assert Path(where[1]) == package / "predictors"
    model = exported_model("hf_bert_tiny_s64_b2")
    done = run([hase, "predict", model, "--json"], cwd=elsewhere, env=env)
    out = json.loads(done.stdout)
    assert out["latency_ms"] > 0 and out["n_kernels"] > 0
    pred = out["predictor"]
    assert pred["source"] == "shipped" and pred["device"] == paths.DEFAULT_DEVICE
    assert Path(pred["path"]) == package / "predictors" / paths.DEFAULT_DEVICE
    text = run([hase, "predict", model], cwd=elsewhere, env=env).stdout
    assert text.startswith(f"predictor {paths.DEFAULT_DEVICE}: ") and f"shipped: {pred['path']}" in text
    listed = json.loads(run([hase, "predictors", "--json"], cwd=elsewhere, env=env).stdout)
    assert [(e["device"], e["source"], Path(e["path"])) for e in listed] == [
        (d, "shipped", package / "predictors" / d) for d in SHIPPED_DEVICES]  # every one the checkout ships
    assert all(e["error"] is None and e["acc10"] > 0 for e in listed)
    assert list(elsewhere.iterdir()) == []  # predicting wrote nothing into the working directory


def test_the_installed_wheel_adapts_in_an_empty_folder_within_its_budget(installed: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**clean_env(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}  # the transfer zoo is built there
    hase = installed / ("hase.exe" if os.name == "nt" else "hase")
    out = tmp_path / "adapted"
    done = run([hase, "adapt", "--device", paths.DEFAULT_DEVICE, "--budget-s", "90", "--out", out, "--json"],
               cwd=elsewhere, env=env)
    result = json.loads(done.stdout)
    assert result["name"].startswith(f"{paths.DEFAULT_DEVICE}@") and result["n_models"] >= 1
    assert result["spent_s"] <= 90 + 10  # the budget, building the transfer set included, and the fit
    assert (out / result["name"] / MANIFEST).is_file()
    assert any((tmp_path / "cache" / "hase" / "zoo" / "zoo_small").glob("*.onnx"))
    assert list(elsewhere.iterdir()) == []  # nothing written into the working directory
