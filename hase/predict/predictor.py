"""Per-op RandomForest kernel predictors, scikit-learn style, and their persistence with a verified manifest.

One forest per predictor key (op type, or op type + variant such as ``Conv/dw``), fitted with
scikit-learn and stored packed (`hase.predict.forest`), so prediction needs numpy only. Keys with too
few training kernels get no forest: their kernels fall back to the forest of their feature family,
or to the generic forest that describes any op. Nothing is ever predicted as 0 ms, and every
prediction says which forest made it (`source`: op, family or generic).

Persistence: one joblib file per target plus `manifest.json` (device, library versions, feature
schema, training data, metrics, calibration, sha256 of every file). A joblib file is a pickle and
can run arbitrary code when loaded, so `load_bundle` checks every hash against the manifest first
and refuses a mismatch; only load predictor directories you trust.
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

from hase.errors import HaseError
from hase.kernels.split import KernelSpec
from hase.predict import features as F
from hase.predict.forest import Member, fit_base, pack_forest

log = logging.getLogger(__name__)

SOURCE_OP, SOURCE_FAMILY, SOURCE_GENERIC = "op", "family", "generic"
KEY, SOURCE, PRED_MS = "key", "source", "pred_ms"
MANIFEST = "manifest.json"
FORMAT = "hase-predictor/1"
PICKLE_NOTE = ("joblib files are pickles and can run code when loaded: Hase loads them only when their "
               "sha256 matches the manifest; only use predictor directories you trust")


@dataclass(frozen=True)
class ForestParams:
    """Hyper-parameters of one RandomForestRegressor (read from configs/predictor.toml)."""

    n_estimators: int = 200
    max_depth: int | None = 40
    max_features: int | float | str = 1.0
    min_samples_leaf: int = 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "forest") -> ForestParams:
        """Parameters from a config table; unknown keys are a HaseError naming the table."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise HaseError(f"{where}: unknown forest keys {sorted(unknown)}: use {sorted(known)}")
        return cls(**d)


def params_for(params: Mapping[str, Mapping[str, Any]] | None, key: str, family: str) -> ForestParams:
    """Forest parameters for a key: its own table, else its op type's, its family's, or `default`.

    Fallback forests (key `family:<name>` or `generic`) read `[forest.fallback]`, else `default`.
    """
    params = params or {}
    names = ("fallback",) if key.startswith("family:") or key == F.GENERIC else (key, key.split("/", maxsplit=1)[0], family)
    for name in (*names, "default"):
        if name in params:
            return ForestParams.from_dict(params[name], f"[forest.{name}]")
    return ForestParams()


def _family_key(family: str) -> str:
    return f"family:{family}"


class KernelPredictor:
    """Kernel latency (ms) from the kernel signature: a forest per key, family and generic fallbacks.

    Args:
        params: forest tables keyed by predictor key, op type, family name, `generic`, `default`.
        log_target: trees fit log(latency / base) (else latency / base); kernels span four decades.
        min_samples: fewest training kernels a key (or family) needs for a forest of its own.
        tree_scale: multiply every n_estimators (e.g. smaller forests inside cross-validation).
        aliases: op types that share a predictor, e.g. {"FusedConv": "Conv"} (same family required).
        base: correct a linear FLOPs/bytes cost model (True) or predict latency directly (False).
        weight_power: weight each training kernel by latency**p (0: all equal; 1: in proportion to
            its time, so the trees spend their splits where a model's sum is decided).
    """

    def __init__(self, params: Mapping[str, Mapping[str, Any]] | None = None, log_target: bool = True,
                 min_samples: int = 8, tree_scale: float = 1.0, random_state: int = 0, n_jobs: int = 1,
                 aliases: Mapping[str, str] | None = None, base: bool = True, weight_power: float = 0.0) -> None:
        self.params = params
        self.log_target = log_target
        self.min_samples = min_samples
        self.tree_scale = tree_scale
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.aliases = aliases
        self.base = base
        self.weight_power = weight_power

    def key_of(self, spec: KernelSpec) -> str:
        """The predictor key of a kernel: `features.kernel_key`, with op-type aliases applied."""
        op, sep, variant = F.kernel_key(spec).partition("/")
        return (self.aliases or {}).get(op, op) + sep + variant

    # ------------------------------------------------------------------ fit
    def fit(self, specs: Sequence[KernelSpec], y: Sequence[float] | np.ndarray) -> KernelPredictor:
        """Fit one forest per key with enough kernels, one per family, and the generic fallback."""
        y = np.asarray(y, dtype=float)
        if len(specs) != len(y) or not len(y):
            raise HaseError(f"training needs kernels with measured latencies (got {len(specs)} kernels, {len(y)} targets)")
        if not np.all(np.isfinite(y) & (y > 0)):
            raise ValueError("kernel latencies must be finite and positive")
        self._check_aliases()
        keys = np.array([self.key_of(s) for s in specs])
        fams = np.array([F.family_of(s.op_type).name for s in specs])
        self.forests_, self.family_forests_, self.skipped_, self.n_samples_ = {}, {}, {}, {}
        for key in sorted(set(keys)):
            idx = np.flatnonzero(keys == key)
            fam = fams[idx[0]]
            self.n_samples_[key] = len(idx)
            if fam == F.GENERIC:
                self.skipped_[key] = "no feature family describes this op type: generic forest"
            elif len(idx) < self.min_samples:
                self.skipped_[key] = f"{len(idx)} training kernels < min_samples {self.min_samples}: fallback forest"
            else:
                self.forests_[key] = self._fit_one(specs, y, idx, F.get_family(fam), key)
        for fam in sorted(set(fams) - {F.GENERIC}):
            idx = np.flatnonzero(fams == fam)
            own = {k for k in keys[idx]}
            if len(own) == 1 and next(iter(own)) in self.forests_:  # one key: its forest is the family's
                self.family_forests_[fam] = self.forests_[next(iter(own))]
            elif len(idx) >= self.min_samples:
                self.family_forests_[fam] = self._fit_one(specs, y, idx, F.get_family(fam), _family_key(fam))
        self.generic_ = self._fit_one(specs, y, np.arange(len(y)), F.get_family(F.GENERIC), F.GENERIC)
        self.n_kernels_ = len(y)
        return self

    def _check_aliases(self) -> None:
        for op, to in (self.aliases or {}).items():
            if F.family_of(op).name != F.family_of(to).name:
                raise HaseError(f"alias {op} -> {to}: both op types must belong to one feature family "
                                f"({F.family_of(op).name} != {F.family_of(to).name}); fix [keys] in the config")

    def _fit_one(self, specs: Sequence[KernelSpec], y: np.ndarray, idx: np.ndarray, family: F.FeatureFamily,
                 key: str) -> Member:
        from sklearn.ensemble import RandomForestRegressor

        p = params_for(self.params, key, family.name)
        X = _matrix([specs[i] for i in idx], family)
        yy = y[idx]
        base = fit_base(X, yy, family) if self.base else (0.0, 0.0, 0.0)
        member = Member(family.name, None, base, float(yy.min()) / 10)
        ratio = yy / member.base_ms(X, family)
        max_features = min(p.max_features, X.shape[1]) if isinstance(p.max_features, int) else p.max_features
        forest = RandomForestRegressor(
            n_estimators=max(1, int(round(p.n_estimators * self.tree_scale))), max_depth=p.max_depth,
            max_features=max_features, min_samples_leaf=p.min_samples_leaf, random_state=self.random_state,
            n_jobs=self.n_jobs)
        weight = yy**self.weight_power
        forest.fit(X, np.log(ratio) if self.log_target else ratio, sample_weight=weight / weight.mean())
        return dataclasses.replace(member, forest=pack_forest(forest))

    # ------------------------------------------------------------------ predict
    def route(self, spec: KernelSpec) -> tuple[str, str, Member]:
        """(predictor key, source, forest) for a kernel: its own forest, its family's, or the generic one."""
        key = self.key_of(spec)
        if key in self.forests_:
            return key, SOURCE_OP, self.forests_[key]
        fam = F.family_of(spec.op_type).name
        if fam in self.family_forests_:
            return key, SOURCE_FAMILY, self.family_forests_[fam]
        return key, SOURCE_GENERIC, self.generic_

    def predict(self, specs: Sequence[KernelSpec]) -> np.ndarray:
        """Predicted latency (ms) of each kernel."""
        return self.predict_detail(specs)[0][PRED_MS].to_numpy()

    def predict_detail(self, specs: Sequence[KernelSpec], n_draws: int = 64) -> tuple[pd.DataFrame, np.ndarray]:
        """Per kernel: key, source and mean prediction (ms); plus `n_draws` tree predictions per kernel.

        Kernels are batched by the forest that predicts them (one call per tree per forest, never
        one per kernel). Draw d of every kernel comes from tree d of its forest (cycled), so summing
        a draw over kernels gives one sample of the model total.
        """
        routes = [self.route(s) for s in specs]
        pred = np.zeros(len(specs))
        draws = np.zeros((len(specs), max(n_draws, 1)))
        groups: dict[int, list[int]] = {}
        for i, (_, _, member) in enumerate(routes):
            groups.setdefault(id(member), []).append(i)
        for idx in groups.values():
            member = routes[idx[0]][2]
            family = F.get_family(member.family)
            X = _matrix([specs[i] for i in idx], family)
            trees = self._tree_predictions(member, X) * member.base_ms(X, family)[None, :]
            pred[idx] = trees.mean(axis=0)
            draws[idx] = trees[np.arange(draws.shape[1]) % len(trees)].T
        frame = pd.DataFrame({KEY: [r[0] for r in routes], SOURCE: [r[1] for r in routes], PRED_MS: pred})
        return frame, draws

    def _tree_predictions(self, member: Member, X: np.ndarray) -> np.ndarray:
        out = member.forest.predict_trees(X)
        return np.exp(out) if self.log_target else np.maximum(out, 0.0)

    def summary(self) -> dict[str, Any]:
        """Keys with forests and their training sizes, family forests, and skipped keys with reasons."""
        return {"forests": {k: self.n_samples_[k] for k in self.forests_}, "family_forests": sorted(self.family_forests_),
                "skipped": dict(self.skipped_), "skipped_n": {k: self.n_samples_[k] for k in self.skipped_},
                "n_kernels": self.n_kernels_,
                "bases": {k: m.base for k, m in self.forests_.items()}}


def _matrix(specs: Sequence[KernelSpec], family: F.FeatureFamily) -> np.ndarray:
    """Feature matrix (float32, C-contiguous: what the trees read without copying)."""
    rows = [list(family.extract(s).values()) for s in specs]
    return np.ascontiguousarray(np.asarray(rows, dtype=np.float32).reshape(len(specs), len(family.columns)))


# ====================================================================== persistence


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

    manifest: dict[str, Any]
    predictors: dict[str, KernelPredictor]
    path: Path | None = None

    @property
    def device(self) -> str:
        """The device configuration the predictor was trained on."""
        return self.manifest["device"]

    @property
    def default_target(self) -> str:
        """The target with the best held-out RMSPE at training time."""
        return self.manifest["default_target"]

    def target(self, target: str | None) -> str:
        """The target to use: the given one if this bundle has it, else the default."""
        target = target or self.default_target
        if target not in self.predictors:
            raise HaseError(f"predictor for {self.device!r} has no {target!r} target: it has {sorted(self.predictors)}")
        return target

    def calibration(self, target: str) -> dict[str, Any]:
        """The manifest entry of a target's calibration (coefficients and fit data)."""
        return self.manifest["targets"][target]["calibration"]

    def ep_config(self):
        """The device configuration the predictor was trained for (ORT's kernel graph is built with it)."""
        from hase.measure.runtime import EPConfig

        meta = self.manifest["device_meta"]
        ep = "cuda" if "CUDA" in str(meta.get("execution_provider", "")) else "cpu"
        return EPConfig(name=self.device, ep=ep, intra_op_threads=int(meta.get("intra_op_threads") or 1),
                        inter_op_threads=int(meta.get("inter_op_threads") or 1),
                        opt_level=str(meta.get("opt_level") or "extended"))


def save_bundle(out_dir: str | Path, manifest: Mapping[str, Any], predictors: Mapping[str, KernelPredictor],
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
        full = {**manifest, "format": FORMAT, "files": files, "security": PICKLE_NOTE}
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


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of a predictor directory, checked for presence, format and every file's sha256."""
    d = Path(path)
    if not d.is_dir():
        raise HaseError(f"predictor directory not found: {d} (train one with `make train`)")
    mf = d / MANIFEST
    if not mf.is_file():
        raise HaseError(f"{d} has no {MANIFEST}: it is not a complete predictor; retrain with `make train`")
    try:
        manifest = json.loads(mf.read_text())
    except json.JSONDecodeError as exc:
        raise HaseError(f"{mf} is not valid JSON ({exc.msg}): retrain with `make train`") from exc
    if manifest.get("format") != FORMAT or "files" not in manifest:
        raise HaseError(f"{mf} is not a {FORMAT} manifest: retrain with `make train`")
    for name, digest in manifest["files"].items():
        f = d / name
        if not f.is_file():
            raise HaseError(f"{d} is incomplete: {name} listed in the manifest is missing; retrain with `make train`")
        if sha256_file(f) != digest:
            raise HaseError(f"sha256 of {f} does not match the manifest; refusing to load it ({PICKLE_NOTE})")
    if manifest.get("feature_schema_sha") != schema_sha(feature_schema()):
        raise HaseError(f"{d} was trained on another feature schema than this Hase version computes: "
                        f"retrain with `make train`")
    return manifest


def load_bundle(path: str | Path, targets: Sequence[str] | None = None) -> PredictorBundle:
    """Load a predictor directory after verifying it (see `read_manifest`); only the targets asked for
    (all saved ones when None; "default" names the manifest's default target)."""
    import joblib

    d = Path(path)
    manifest = read_manifest(d)
    saved = [t for t in manifest["targets"] if f"{t}.joblib" in manifest["files"]]
    wanted = [manifest["default_target"] if t == "default" else t for t in targets] if targets else saved
    missing = [t for t in wanted if t not in saved]
    if missing:
        raise HaseError(f"{d} has no predictor for target(s) {missing}: it has {saved}")
    _warn_versions(manifest.get("library_versions", {}), d)
    preds = {t: joblib.load(d / f"{t}.joblib") for t in wanted}
    return PredictorBundle(manifest, preds, d)


def _warn_versions(trained: Mapping[str, str], d: Path) -> None:
    now = library_versions()
    for lib in ("scikit-learn", "numpy"):
        if trained.get(lib) and trained[lib] != now[lib]:
            log.warning("%s was trained with %s %s, this is %s: retrain with `make train` if predictions look off",
                        d, lib, trained[lib], now[lib])


def default_predictors_dir() -> Path:
    """`data/predictors` of the Hase checkout (where the shipped default predictor lives)."""
    return Path(__file__).resolve().parents[2] / "data" / "predictors"


def predictor_dir(device: str, predictors_dir: str | Path | None = None) -> Path:
    """The directory of `device`'s predictor; a device without one is a HaseError naming those that exist."""
    root = Path(predictors_dir) if predictors_dir else default_predictors_dir()
    d = root / device
    if not d.is_dir():
        have = sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file()) if root.is_dir() else []
        raise HaseError(f"no trained predictor for device {device!r} in {root} (have: {have or 'none'}): "
                        f"pick one with --device or train it with `make collect train`")
    return d
