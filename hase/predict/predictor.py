"""Per-op RandomForest kernel predictors, scikit-learn style.

One forest per predictor key (op type, or op type + variant such as ``Conv/dw``), fitted with
scikit-learn and stored packed (`hase.predict.forest`), so prediction needs numpy only. Keys with too
few training kernels get no forest: their kernels fall back to the forest of their feature family,
or to the generic forest that describes any op. Nothing is ever predicted as 0 ms, and every
prediction says which forest made it (`source`: op, family or generic). A fitted predictor is plain
data (`KernelPredictor.to_arrays`: a JSON-able structure plus named arrays); writing and verifying
those files is `hase.predict.bundle`'s job.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hase.errors import HaseError
from hase.kernels.types import KernelSpec
from hase.measure.types import HostPeaks
from hase.predict import features
from hase.predict import roofline as roofline_model  # `roofline` is also a KernelPredictor parameter
from hase.predict.forest import ARRAY_DTYPES, FittedForest, PackedForest, fit_base, linear_base_ms, pack_forest
from hase.predict.host_map import HostMap, forest_label
from hase.predict.manifest import RETRAIN, PredictorSummary

if TYPE_CHECKING:  # pragma: no cover - pandas loads only where a DataFrame is asked for
    import pandas as pd

SOURCE_OP, SOURCE_FAMILY, SOURCE_GENERIC = "op", "family", "generic"
KEY, SOURCE, PRED_MS = "key", "source", "pred_ms"
ROOFLINE_MS, CLAMPED = "roofline_ms", "clamped"
# the constructor parameters a saved predictor keeps, with the JSON types each may have
PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "params": (dict, type(None)), "log_target": (bool,), "min_samples": (int,), "tree_scale": (int, float),
    "random_state": (int,), "n_jobs": (int,), "aliases": (dict, type(None)), "base": (bool,),
    "weight_power": (int, float), "tree_mean": (str,), "peaks": (dict, type(None)), "roofline": (bool,),
    "band_margin": (int, float), "clamp": (bool,), "overhead": (str,)}
# parameters added since the first saved predictors: their value when a saved predictor has none (no peaks: no
# roofline, no band, predictions exactly as before)
PARAM_DEFAULTS: dict[str, Any] = {"tree_mean": "arithmetic", "peaks": None, "roofline": False, "band_margin": 2.0,
                                  "clamp": True, "overhead": roofline_model.OVERHEAD_CALL}
TREE_MEANS = ("arithmetic", "geometric")


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
    fallback = key.startswith("family:") or key == features.GENERIC
    names = ("fallback",) if fallback else (key, key.split("/", maxsplit=1)[0], family)
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
        family_exclude: keys whose kernels the family fallback forests leave out (they keep their own forest):
            ops whose time per element is far from their family's, e.g. Resize, whose cubic interpolation made a
            Slice that fell back to the movement forest 6 ms (measured ~0.1 ms).
        tree_mean: how a kernel's tree predictions (latencies) combine: "arithmetic" (the mean) or "geometric"
            (exp of the mean log, the forest's own mean where the trees fit log latency: one tree whose leaf holds
            a kernel 20x larger cannot multiply the prediction, as it did EfficientNet's reorders 8x).
        peaks: the host's peaks (`HostPeaks.to_dict`) where the training store has them: each kernel then has a
            roofline time (`hase.predict.roofline`) and, with `clamp`, every prediction is clamped to its family's
            band [lo, hi] x roofline learned from the training kernels' measured/roofline ratios, widened by
            `band_margin` each way; None: no roofline, no band (what predictors trained before peaks do).
        roofline: with peaks, the trees correct the roofline time (log(latency / roofline)) instead of the linear
            FLOPs/bytes base.
        overhead: what the roofline adds to the compute or memory time: a session.run's overhead ("call": standalone
            kernels) or a node's ("node": spans inside a model).
    """

    forests_: dict[str, FittedForest]
    family_forests_: dict[str, FittedForest]
    generic_: FittedForest
    skipped_: dict[str, str]
    n_samples_: dict[str, int]
    n_kernels_: int
    bands_: dict[str, tuple[float, float]]
    host_maps_: tuple[HostMap, ...]

    def __init__(self, params: Mapping[str, Mapping[str, Any]] | None = None, log_target: bool = True,
                 min_samples: int = 8, tree_scale: float = 1.0, random_state: int = 0, n_jobs: int = 1,
                 aliases: Mapping[str, str] | None = None, base: bool = True, weight_power: float = 0.0,
                 family_exclude: Sequence[str] = (), tree_mean: str = "arithmetic",
                 peaks: Mapping[str, Any] | None = None, roofline: bool = False, band_margin: float = 2.0,
                 clamp: bool = True, overhead: str = roofline_model.OVERHEAD_CALL) -> None:
        if tree_mean not in TREE_MEANS:
            raise HaseError(f"tree_mean {tree_mean!r} is not one of {list(TREE_MEANS)}")
        self.params = params
        self.log_target = log_target
        self.min_samples = min_samples
        self.tree_scale = tree_scale
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.aliases = aliases
        self.base = base
        self.weight_power = weight_power
        self.family_exclude = tuple(family_exclude)
        self.tree_mean = tree_mean
        self.peaks = dict(peaks) if peaks is not None else None
        self.roofline = roofline
        self.band_margin = band_margin
        self.clamp = clamp
        if overhead not in (roofline_model.OVERHEAD_CALL, roofline_model.OVERHEAD_NODE):
            raise HaseError(f"overhead {overhead!r} is not {roofline_model.OVERHEAD_CALL!r} or "
                            f"{roofline_model.OVERHEAD_NODE!r}")
        self.overhead = overhead
        self.bands_ = {}
        self.host_maps_ = ()

    def host_peaks(self) -> HostPeaks | None:
        """The peaks the predictor was trained with (None: no roofline)."""
        return HostPeaks.from_dict(self.peaks) if self.peaks is not None else None

    def roofline_of(self, specs: Sequence[KernelSpec]) -> NDArray[np.float64]:
        """Each kernel's roofline time (ms) from its own family's FLOPs and bytes; NaN without peaks."""
        peaks = self.host_peaks()
        if peaks is None:
            return np.full(len(specs), np.nan)
        costs = [features.extract(s) for s in specs]
        return roofline_model.roofline_ms(peaks, [c["flops"] for c in costs], [c["bytes"] for c in costs],
                                          self.overhead)

    def key_of(self, spec: KernelSpec) -> str:
        """The predictor key of a kernel: `features.kernel_key`, with op-type aliases applied."""
        op, sep, variant = features.kernel_key(spec).partition("/")
        return (self.aliases or {}).get(op, op) + sep + variant

    # ------------------------------------------------------------------ fit
    def fit(self, specs: Sequence[KernelSpec], latency_ms: ArrayLike,
            sample_weight: ArrayLike | None = None) -> KernelPredictor:
        """Fit one forest per key with enough kernels, one per family, and the generic fallback.

        A key of an op type no feature family describes still gets its own forest, on the generic table: the
        generic fallback mixes every op type by element count, so it is only for keys too rare for a forest.

        `sample_weight` (one per kernel, > 0; all 1 when None) multiplies each kernel's weight in the forests and
        their cost bases: training gives kernels measured on a busy host less (`hase.predict.trust`).
        """
        y = np.asarray(latency_ms, dtype=np.float64)
        if len(specs) != len(y) or not len(y):
            raise HaseError(f"training needs kernels with measured latencies "
                            f"(got {len(specs)} kernels, {len(y)} targets)")
        if not np.all(np.isfinite(y) & (y > 0)):
            raise ValueError("kernel latencies must be finite and positive")
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != y.shape or not np.all(np.isfinite(w) & (w > 0)):
            raise ValueError("sample weights must be one finite positive number per kernel")
        self._check_aliases()
        keys = np.array([self.key_of(s) for s in specs])
        fams = np.array([features.family_of(s.op_type).name for s in specs])
        self.forests_, self.family_forests_, self.skipped_, self.n_samples_ = {}, {}, {}, {}
        for key in sorted(set(keys)):
            idx = np.flatnonzero(keys == key)
            fam = fams[idx[0]]
            self.n_samples_[key] = len(idx)
            if len(idx) < self.min_samples:
                self.skipped_[key] = f"{len(idx)} training kernels < min_samples {self.min_samples}: fallback forest"
            else:
                self.forests_[key] = self._fit_one(specs, y, w, idx, features.get_family(fam), key)
        for fam in sorted(set(fams) - {features.GENERIC}):
            idx = np.flatnonzero((fams == fam) & ~np.isin(keys, self.family_exclude))
            if not len(idx):
                continue
            own = set(keys[idx])
            if len(own) == 1 and next(iter(own)) in self.forests_:  # one key: its forest is the family's
                self.family_forests_[fam] = self.forests_[next(iter(own))]
            elif len(idx) >= self.min_samples:
                self.family_forests_[fam] = self._fit_one(specs, y, w, idx, features.get_family(fam), _family_key(fam))
        self.generic_ = self._fit_one(specs, y, w, np.arange(len(y)), features.get_family(features.GENERIC),
                                      features.GENERIC)
        self.n_kernels_ = len(y)
        if self.peaks is not None and self.clamp:
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero roofline: no ratio, no band (band_ms)
                self.bands_ = roofline_model.fit_bands(fams.tolist(), y / self.roofline_of(specs), self.band_margin)
        else:
            self.bands_ = {}
        return self

    def _check_aliases(self) -> None:
        for op, to in (self.aliases or {}).items():
            if features.family_of(op).name != features.family_of(to).name:
                raise HaseError(f"alias {op} -> {to}: both op types must belong to one feature family "
                                f"({features.family_of(op).name} != {features.family_of(to).name}); "
                                f"fix [keys] in the config")

    def _fit_one(self, specs: Sequence[KernelSpec], y: NDArray[np.float64], w: NDArray[np.float64],
                 idx: NDArray[np.intp], family: features.FeatureFamily, key: str) -> FittedForest:
        from sklearn.ensemble import RandomForestRegressor

        p = params_for(self.params, key, family.name)
        X = _matrix([specs[i] for i in idx], family)
        yy = y[idx]
        use_roofline = self.roofline and self.peaks is not None
        base = fit_base(X, yy, family, w[idx]) if self.base and not use_roofline else (0.0, 0.0, 0.0)
        floor_ms = float(yy.min()) / 10
        ratio = yy / (self._roofline_ms(X, family) if use_roofline else linear_base_ms(X, family, base, floor_ms))
        max_features = min(p.max_features, X.shape[1]) if isinstance(p.max_features, int) else p.max_features
        forest = RandomForestRegressor(
            n_estimators=max(1, round(p.n_estimators * self.tree_scale)), max_depth=p.max_depth,
            max_features=max_features, min_samples_leaf=p.min_samples_leaf, random_state=self.random_state,
            n_jobs=self.n_jobs)
        weight = yy**self.weight_power * w[idx]
        forest.fit(X, np.log(ratio) if self.log_target else ratio, sample_weight=weight / weight.mean())
        return FittedForest(family.name, pack_forest(forest), base, floor_ms, use_roofline)

    def _roofline_ms(self, X: NDArray[np.float32], family: features.FeatureFamily) -> NDArray[np.float64]:
        """The roofline time of each row of a family's feature matrix (from its flops and bytes columns)."""
        peaks = self.host_peaks()
        if peaks is None:
            raise HaseError("a roofline forest needs the host's peaks, and this predictor has none: retrain")
        cols = family.column_names
        return roofline_model.roofline_ms(peaks, X[:, cols.index("flops")], X[:, cols.index("bytes")], self.overhead)

    def _base_ms(self, member: FittedForest, X: NDArray[np.float32],
                 family: features.FeatureFamily) -> NDArray[np.float64]:
        """What the member's trees correct: the roofline time, or its linear base."""
        return self._roofline_ms(X, family) if member.roofline else member.base_ms(X, family)

    # ------------------------------------------------------------------ predict
    def route(self, spec: KernelSpec) -> tuple[str, str, FittedForest]:
        """(predictor key, source, forest) for a kernel: its own forest, its family's, or the generic one."""
        key = self.key_of(spec)
        if key in self.forests_:
            return key, SOURCE_OP, self.forests_[key]
        fam = features.family_of(spec.op_type).name
        if fam in self.family_forests_:
            return key, SOURCE_FAMILY, self.family_forests_[fam]
        return key, SOURCE_GENERIC, self.generic_

    def predict(self, specs: Sequence[KernelSpec]) -> NDArray[np.float64]:
        """Predicted latency (ms) of each kernel."""
        return self.predict_routes(specs)[2]

    def predict_detail(self, specs: Sequence[KernelSpec],
                       n_draws: int = 64) -> tuple[pd.DataFrame, NDArray[np.float64]]:
        """Per kernel: key, source and mean prediction (ms); plus `n_draws` tree predictions per kernel.

        Kernels are batched by the forest that predicts them (one call per tree per forest, never
        one per kernel). Draw d of every kernel comes from tree d of its forest (cycled), so summing
        a draw over kernels gives one sample of the model total.
        """
        import pandas as pd  # noqa: PLC0415 - not at import time: `hase predict` runs without it (`predict_routes`)

        r = self.predict_bounded(specs, n_draws)
        return pd.DataFrame({KEY: r.keys, SOURCE: r.sources, PRED_MS: r.pred_ms, ROOFLINE_MS: r.roofline_ms,
                             CLAMPED: r.clamped}), r.draws

    def predict_routes(self, specs: Sequence[KernelSpec], n_draws: int = 64
                       ) -> tuple[list[str], list[str], NDArray[np.float64], NDArray[np.float64]]:
        """`predict_detail` as plain columns: (keys, sources, mean predictions in ms, draws)."""
        r = self.predict_bounded(specs, n_draws)
        return r.keys, r.sources, r.pred_ms, r.draws

    def predict_bounded(self, specs: Sequence[KernelSpec], n_draws: int = 64) -> Routes:
        """Every kernel's key, source, prediction (clamped to its band where the predictor has one), draws,
        roofline time and clamp ("low", "high" or "")."""
        routes = [self.route(s) for s in specs]
        pred = np.zeros(len(specs))
        draws = np.zeros((len(specs), max(n_draws, 1)))
        groups: dict[int, list[int]] = {}
        for i, (_, _, member) in enumerate(routes):
            groups.setdefault(id(member), []).append(i)
        for idx in groups.values():
            member = routes[idx[0]][2]
            family = features.get_family(member.family)
            X = _matrix([specs[i] for i in idx], family)
            trees = self._tree_predictions(member, X) * self._base_ms(member, X, family)[None, :]
            pred[idx] = _tree_mean(trees, self.tree_mean)
            draws[idx] = trees[np.arange(draws.shape[1]) % len(trees)].T
        roof = self.roofline_of(specs)
        clamped = [""] * len(specs)
        if self.bands_:
            low, high = roofline_model.band_ms(roof, [features.family_of(s.op_type).name for s in specs], self.bands_)
            pred, clamped = roofline_model.clamp(pred, low, high)
            draws = np.clip(draws, low[:, None], high[:, None])
        if self.host_maps_:  # after the clamp: the bands are the source host's (`hase.predict.host_map`)
            labels = [forest_label(r[0], r[1], r[2].family) for r in routes]
            ai = intensity(specs) if any(m.ai_knots for m in self.host_maps_) else None
            for m in self.host_maps_:
                f = np.exp(m.log_factor(pred, labels, ai))
                pred, draws = pred * f, draws * f[:, None]
        return Routes([r[0] for r in routes], [r[1] for r in routes], pred, draws, roof, clamped)

    def _tree_predictions(self, member: FittedForest, X: NDArray[np.float32]) -> NDArray[np.float64]:
        out = member.forest.predict_trees(X)
        return np.exp(out) if self.log_target else np.maximum(out, 0.0)

    def summary(self) -> PredictorSummary:
        """Keys with forests and their training sizes, family forests, and skipped keys with reasons."""
        return PredictorSummary(forests={k: self.n_samples_[k] for k in self.forests_},
                                family_forests=tuple(sorted(self.family_forests_)), skipped=dict(self.skipped_),
                                skipped_n={k: self.n_samples_[k] for k in self.skipped_},
                                n_kernels=self.n_kernels_, bases={k: m.base for k, m in self.forests_.items()},
                                bands=dict(self.bands_))

    # ------------------------------------------------------------------ plain data
    def to_arrays(self) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
        """The fitted predictor as plain data: a JSON-able structure and named arrays (member i's forest is
        `m<i>.left`, `m<i>.threshold`, ...). A forest shared by a key and its family is stored once.

            >>> meta, arrays = fitted.to_arrays()
            >>> KernelPredictor.from_arrays(meta, arrays).predict(specs)  # == fitted.predict(specs), bit for bit
        """
        members: dict[int, tuple[int, FittedForest]] = {}
        for m in (*self.forests_.values(), *self.family_forests_.values(), self.generic_):
            members.setdefault(id(m), (len(members), m))
        index = {key: i for key, (i, _) in members.items()}
        arrays = {f"m{i}.{name}": a for i, m in members.values() for name, a in m.forest.to_arrays().items()}
        meta = {"params": {name: getattr(self, name) for name in PARAM_TYPES},
                "members": [_member_json(m) for _, m in members.values()],
                "forests": {k: index[id(m)] for k, m in self.forests_.items()},
                "family_forests": {k: index[id(m)] for k, m in self.family_forests_.items()},
                "generic": index[id(self.generic_)], "skipped": dict(self.skipped_),
                "n_samples": dict(self.n_samples_), "n_kernels": self.n_kernels_}
        if self.bands_:
            meta["bands"] = {k: list(v) for k, v in self.bands_.items()}
        if self.host_maps_:
            meta["host_maps"] = [m.to_dict() for m in self.host_maps_]
        return meta, arrays

    @classmethod
    def from_arrays(cls, meta: Mapping[str, Any], arrays: Mapping[str, NDArray[Any]]) -> KernelPredictor:
        """The fitted predictor `to_arrays` described; nothing in it is code.

        Raises:
            ValueError: a missing, mistyped or inconsistent part (named), or arrays nothing refers to.
            HaseError: a forest of a feature family or columns this Hase version does not compute.
        """
        params = _get(meta, "params", (dict,), "")
        pred = cls(**{name: _get(params, name, kinds, "params.") for name, kinds in PARAM_TYPES.items()
                      if name in params or name not in PARAM_DEFAULTS})
        members = _members(_get(meta, "members", (list,), ""), arrays)

        def pick(where: str, i: Any) -> FittedForest:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(members):
                raise ValueError(f"{where} refers to member {i!r}, not one of 0..{len(members) - 1}")
            return members[i]

        pred.forests_ = {k: pick(f"forests.{k}", i) for k, i in _get(meta, "forests", (dict,), "").items()}
        pred.family_forests_ = {k: pick(f"family_forests.{k}", i)
                                for k, i in _get(meta, "family_forests", (dict,), "").items()}
        pred.generic_ = pick("generic", _get(meta, "generic", (int,), ""))
        pred.skipped_ = _typed_map(meta, "skipped", str)
        pred.n_samples_ = _typed_map(meta, "n_samples", int)
        pred.n_kernels_ = _get(meta, "n_kernels", (int,), "")
        pred.bands_ = _bands(meta)
        maps = meta.get("host_maps", [])
        if not isinstance(maps, list) or not all(isinstance(m, dict) for m in maps):
            raise ValueError("host_maps is not a list of objects")
        pred.host_maps_ = tuple(HostMap.from_dict(m) for m in maps)
        if pred.peaks is not None:
            try:
                pred.host_peaks()
            except ValueError as exc:
                raise ValueError(f"params.peaks: {exc}") from None
        if pred.peaks is None and any(m.roofline for m in members):
            raise ValueError("forests correct a roofline, and params.peaks is missing")
        if pred.bands_ and (pred.peaks is None or roofline_model.ALL not in pred.bands_):
            raise ValueError("bands need the host's peaks and a band of every kernel ('*')")
        if set(pred.forests_) - set(pred.n_samples_):
            raise ValueError(f"keys {sorted(set(pred.forests_) - set(pred.n_samples_))} have no training size")
        return pred


@dataclass(frozen=True)
class Routes:
    """Per kernel, in order: predictor key, source (op, family, generic), prediction (ms), `n_draws` tree draws,
    roofline time (ms; NaN without peaks) and clamp ("low", "high", or "" where the prediction was in its band)."""

    keys: list[str]
    sources: list[str]
    pred_ms: NDArray[np.float64]
    draws: NDArray[np.float64]
    roofline_ms: NDArray[np.float64]
    clamped: list[str]


def intensity(specs: Sequence[KernelSpec]) -> NDArray[np.float64]:
    """Each kernel's arithmetic intensity (FLOPs per byte, from its own family's features; 0 without bytes)."""
    costs = [features.extract(s) for s in specs]
    return np.array([c["flops"] / c["bytes"] if c["bytes"] > 0 else 0.0 for c in costs], dtype=np.float64)


def _bands(meta: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The saved bands (none in predictors trained without peaks), each two positive numbers, low <= high."""
    raw = meta.get("bands", {})
    if not isinstance(raw, dict):
        raise ValueError(f"bands is a {type(raw).__name__}, not an object")
    out = {}
    for k, v in raw.items():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in v) and 0 < v[0] <= v[1]):
            raise ValueError(f"bands.{k} is {v!r}, not [low, high] with 0 < low <= high")
        out[str(k)] = (float(v[0]), float(v[1]))
    return out


def _tree_mean(trees: NDArray[np.float64], how: str) -> NDArray[np.float64]:
    """Each column's mean over the trees (rows): arithmetic, or geometric (exp of the mean log)."""
    if how == "arithmetic":
        return np.asarray(trees.mean(axis=0), dtype=np.float64)
    return np.asarray(np.exp(np.log(np.maximum(trees, 1e-12)).mean(axis=0)), dtype=np.float64)


def _member_json(m: FittedForest) -> dict[str, Any]:
    """A member's numbers and names (its arrays are saved beside them); the family's columns let a load
    notice a feature schema that changed since training."""
    out = {"family": m.family, "columns": list(features.get_family(m.family).column_names), "base": list(m.base),
           "floor_ms": m.floor_ms, "depth": m.forest.depth, "n_features": m.forest.n_features}
    return {**out, "roofline": True} if m.roofline else out


def _members(records: list[Any], arrays: Mapping[str, NDArray[Any]]) -> list[FittedForest]:
    """Every member from its JSON record and its arrays; an array no member uses is a ValueError too."""
    members = []
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"members[{i}] is a {type(record).__name__}, not an object")
        members.append(_member(record, i, arrays))
    used = {f"m{i}.{name}" for i in range(len(members)) for name in ARRAY_DTYPES}
    if set(arrays) != used:
        raise ValueError(f"arrays {sorted(set(arrays) ^ used)[:5]} do not match the {len(members)} members")
    return members


def _member(d: Mapping[str, Any], i: int, arrays: Mapping[str, NDArray[Any]]) -> FittedForest:
    """FittedForest i from its JSON record and its arrays, checked against the feature family this Hase computes."""
    where = f"members[{i}]."
    family = features.get_family(_get(d, "family", (str,), where))
    columns = _get(d, "columns", (list,), where)
    if columns != list(family.column_names):
        raise HaseError(f"a forest of feature family {family.name!r} was trained on columns {columns}, this Hase "
                        f"computes {list(family.column_names)}: {RETRAIN}")
    base = _get(d, "base", (list,), where)
    if len(base) != 3 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in base):
        raise ValueError(f"{where}base is {base!r}, not three numbers")
    n_features = _get(d, "n_features", (int,), where)
    if n_features != len(family.columns):
        raise ValueError(f"{where}n_features is {n_features}, family {family.name!r} has {len(family.columns)}")
    forest = PackedForest.from_arrays({name: arrays[f"m{i}.{name}"] for name in ARRAY_DTYPES
                                       if f"m{i}.{name}" in arrays}, _get(d, "depth", (int,), where), n_features)
    use_roofline = d.get("roofline", False)
    if not isinstance(use_roofline, bool):
        raise ValueError(f"{where}roofline is a {type(use_roofline).__name__}, not true or false")
    return FittedForest(family.name, forest, (float(base[0]), float(base[1]), float(base[2])),
                        float(_get(d, "floor_ms", (int, float), where)), use_roofline)


def _get(d: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    """d[key], one of `kinds` (a bool is no number); else a ValueError naming `where` + key."""
    if key not in d:
        raise ValueError(f"{where}{key} is missing")
    value = d[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValueError(f"{where}{key} is a {type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


def _typed_map(d: Mapping[str, Any], key: str, kind: type) -> dict[str, Any]:
    """d[key]: an object whose every value is a `kind` (a bool is no integer)."""
    table: dict[str, Any] = _get(d, key, (dict,), "")
    if not all(isinstance(v, kind) and not isinstance(v, bool) for v in table.values()):
        raise ValueError(f"{key} has values that are not {kind.__name__}")
    return table


def _matrix(specs: Sequence[KernelSpec], family: features.FeatureFamily) -> NDArray[np.float32]:
    """Feature matrix (float32, C-contiguous: what the trees read without copying)."""
    rows = [list(family.extract(s).values()) for s in specs]
    return np.ascontiguousarray(np.asarray(rows, dtype=np.float32).reshape(len(specs), len(family.columns)))
