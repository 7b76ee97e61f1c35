"""A device's trained predictors on disk: one joblib file per target plus a verified `manifest.json`.

The manifest (`hase.predict.manifest`) records the device, library versions, feature schema, training
data, scores, calibration and the sha256 of every file. A joblib file is a pickle and can run arbitrary
code when loaded, so `load_bundle` checks every hash against the manifest first and refuses a mismatch;
only load predictor directories you trust.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase import paths
from hase.errors import HaseError
from hase.measure.types import EPConfig
from hase.predict import features as F
from hase.predict.calibration import Calibration
from hase.predict.manifest import FORMAT, MANIFEST, PICKLE_NOTE, RETRAIN, Manifest
from hase.predict.predictor import KernelPredictor

log = logging.getLogger(__name__)

# tables `hase train` stores beside the forests (cross-validation rows, baselines), read by `hase evaluate`
CV_MODELS_CSV, CV_KERNELS_CSV, BASELINES_CSV = "cv_models.csv", "cv_kernels.csv", "baselines.csv"


def feature_schema() -> dict[str, Any]:
    """Every family's op types and columns: a predictor trained on another schema must be retrained."""
    return {f.name: {"ops": list(f.ops), "columns": list(f.column_names)} for f in F.families()}


def schema_sha(schema: Mapping[str, Any]) -> str:
    """sha256 of a feature schema (stored in the manifest, compared on load)."""
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


def library_versions() -> dict[str, str]:
    """Versions of the libraries a predictor file depends on (from package metadata: importing
    scikit-learn alone costs ~1 s, which `hase predict` does not need)."""
    from importlib.metadata import version

    from hase import __version__
    return {"hase": __version__, "scikit-learn": version("scikit-learn"), "joblib": version("joblib"),
            "numpy": np.__version__, "pandas": pd.__version__, "python": sys.version.split()[0]}


def sha256_file(path: Path) -> str:
    """sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class PredictorBundle:
    """A device's trained predictors (one per target) with the manifest that describes and verifies them."""

    manifest: Manifest
    predictors: dict[str, KernelPredictor]
    path: Path | None = None

    @property
    def device(self) -> str:
        """The device configuration the predictor was trained on."""
        return self.manifest.device

    @property
    def default_target(self) -> str:
        """The target with the best held-out RMSPE at training time."""
        return self.manifest.default_target

    def target(self, target: str | None) -> str:
        """The target to use: the given one if this bundle has it, else the default."""
        target = target or self.default_target
        if target not in self.predictors:
            raise HaseError(f"predictor for {self.device!r} has no {target!r} target: it has {sorted(self.predictors)}")
        return target

    def calibration(self, target: str) -> Calibration:
        """A target's calibration from kernel sum to model latency."""
        return self.manifest.target(target).calibration.calibration

    def ep_config(self) -> EPConfig:
        """The device configuration the predictor was trained for (ORT's kernel graph is built with it)."""
        meta = self.manifest.device_meta
        ep = "cuda" if "CUDA" in meta.execution_provider else "cpu"
        return EPConfig(name=self.device, ep=ep, intra_op_threads=meta.intra_op_threads or 1,
                        inter_op_threads=meta.inter_op_threads or 1, opt_level=meta.opt_level or "extended")


def save_bundle(out_dir: str | Path, manifest: Manifest, predictors: Mapping[str, KernelPredictor],
                extra: Mapping[str, pd.DataFrame] | None = None) -> Path:
    """Write `<target>.joblib` files, extra CSV tables and manifest.json (with their sha256) to `out_dir`.

    Files are written to a temporary directory next to `out_dir`, which then replaces it whole, so
    a reader never sees a half-written predictor.
    """
    import joblib

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; a predictor directory is shared data
    files: dict[str, str] = {}
    try:
        for target, pred in predictors.items():
            joblib.dump(pred, tmp / f"{target}.joblib", compress=3)
            files[f"{target}.joblib"] = sha256_file(tmp / f"{target}.joblib")
        for name, frame in (extra or {}).items():
            frame.to_csv(tmp / name, index=False)
            files[name] = sha256_file(tmp / name)
        full = dataclasses.replace(manifest, files=files).to_dict()
        (tmp / MANIFEST).write_text(json.dumps(full, indent=1, sort_keys=True, default=_json_default) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, Path):
        return str(v)
    raise TypeError(f"not JSON serializable: {type(v).__name__}")


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of a predictor directory, checked for presence, format, every file's sha256 and every key."""
    d = Path(path)
    if not d.is_dir():
        raise HaseError(f"predictor directory not found: {d} (train one with `make train`)")
    mf = d / MANIFEST
    if not mf.is_file():
        raise HaseError(f"{d} has no {MANIFEST}: it is not a complete predictor; {RETRAIN}")
    try:
        raw = json.loads(mf.read_text())
    except json.JSONDecodeError as exc:
        raise HaseError(f"{mf} is not valid JSON ({exc.msg}): {RETRAIN}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("files"), dict):
        raise HaseError(f"{mf} is not a {FORMAT} manifest: {RETRAIN}")
    _verify_files(d, raw["files"])
    if raw.get("feature_schema_sha") != schema_sha(feature_schema()):
        raise HaseError(f"{d} was trained on another feature schema than this Hase version computes: {RETRAIN}")
    try:
        return Manifest.from_dict(raw)
    except HaseError as exc:
        raise HaseError(f"{mf}: {exc}") from None


def _verify_files(d: Path, files: Mapping[str, str]) -> None:
    """Every file the manifest lists exists and has its recorded sha256 (checked before any unpickling)."""
    for name, digest in files.items():
        f = d / name
        if not f.is_file():
            raise HaseError(f"{d} is incomplete: {name} listed in the manifest is missing; {RETRAIN}")
        if sha256_file(f) != digest:
            raise HaseError(f"sha256 of {f} does not match the manifest; refusing to load it ({PICKLE_NOTE})")


def load_bundle(path: str | Path, targets: Sequence[str] | None = None) -> PredictorBundle:
    """Load a predictor directory after verifying it (see `read_manifest`); only the targets asked for
    (all saved ones when None; "default" names the manifest's default target)."""
    d = Path(path)
    manifest = read_manifest(d)
    saved = [t for t in manifest.targets if f"{t}.joblib" in manifest.files]
    wanted = [manifest.default_target if t == "default" else t for t in targets] if targets else saved
    missing = [t for t in wanted if t not in saved]
    if missing:
        raise HaseError(f"{d} has no predictor for target(s) {missing}: it has {saved}")
    _warn_versions(manifest.library_versions, d)
    preds = {t: _load_predictor(d / f"{t}.joblib") for t in wanted}
    return PredictorBundle(manifest, preds, d)


def _load_predictor(path: Path) -> KernelPredictor:
    """Unpickle one verified joblib file; anything but a KernelPredictor is refused."""
    import joblib

    pred = joblib.load(path)
    if not isinstance(pred, KernelPredictor):
        raise HaseError(f"{path} holds a {type(pred).__name__}, not a KernelPredictor: {RETRAIN}")
    return pred


def _warn_versions(trained: Mapping[str, str], d: Path) -> None:
    now = library_versions()
    for lib in ("scikit-learn", "numpy"):
        if trained.get(lib) and trained[lib] != now[lib]:
            log.warning("%s was trained with %s %s, this is %s: retrain with `make train` if predictions look off",
                        d, lib, trained[lib], now[lib])


def predictor_dir(device: str, predictors_dir: str | Path | None = None) -> Path:
    """The directory of `device`'s predictor (under the shipped data/predictors by default); a device
    without one is a HaseError naming those that exist."""
    root = Path(predictors_dir) if predictors_dir else paths.SHIPPED_PREDICTORS
    d = root / device
    if not d.is_dir():
        have = sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file()) if root.is_dir() else []
        raise HaseError(f"no trained predictor for device {device!r} in {root} (have: {have or 'none'}): "
                        f"pick one with --device or train it with `make collect train`")
    return d
