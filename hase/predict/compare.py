"""Which configuration runs a model fastest: the model predicted with every installed predictor.

What a configuration gains depends on the model (a CNN's convolutions run much faster at ORT's `all`
optimization level than at `extended`, a transformer's hardly at all; threads differ again), so
`compare_models` predicts each model once per predictor, each in its own configuration: the kernel graph
is built with that predictor's execution provider, threads and optimization level, so a CNN's kernels at
`all` (NCHWc convolutions, reorders) are not those at `extended`. The rows are ranked fastest first, each
with its ratio to the fastest, its held-out accuracy and how this host differs from the predictor's machine.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError
from hase.predict.bundle import PredictorBundle, load_bundle
from hase.predict.estimate import ModelEstimate, estimate_model
from hase.predict.identity import HostInfo, InstalledPredictor, PredictorIdentity, installed, predictor_identity


@dataclass(frozen=True)
class ConfigPrediction:
    """One configuration's prediction of a model: the predictor that made it (`config` names it: its device, with
    `(shipped)` when a user-trained one of the same name hides it), how this host differs from that predictor's
    machine, and the estimate, or the one-line reason it could not be made (`estimate` None)."""

    config: str
    identity: PredictorIdentity
    mismatches: tuple[str, ...]
    estimate: ModelEstimate | None
    error: str = ""

    @property
    def latency_ms(self) -> float:
        """The predicted latency (ms); a configuration that failed is a HaseError."""
        if self.estimate is None:
            raise HaseError(f"{self.config} has no prediction: {self.error}")
        return self.estimate.latency_ms

    def to_dict(self, fastest_ms: float | None) -> dict[str, Any]:
        """JSON-ready: the configuration, its settings and accuracy, the prediction and its ratio to the fastest."""
        ident, est = self.identity, self.estimate
        row: dict[str, Any] = {
            "config": self.config, "device": ident.device, "source": ident.source, "path": ident.path,
            "execution_provider": ident.execution_provider, "opt_level": ident.opt_level,
            "intra_op_threads": ident.intra_op_threads, "inter_op_threads": ident.inter_op_threads,
            "target": ident.target, "held_out_acc10": ident.acc10, "held_out_rmspe": ident.rmspe,
            "host_mismatches": list(self.mismatches), "error": self.error or None,
        }
        if est is not None:
            row |= {"latency_ms": est.latency_ms, "interval_ms": [est.low_ms, est.high_ms], "n_kernels": est.n_kernels,
                    "sum_kernel_ms": est.sum_ms, "n_fallback": len(est.fallback), "n_clamped": len(est.clamped),
                    "ratio_to_fastest": est.latency_ms / fastest_ms if fastest_ms else None}
        return row


@dataclass(frozen=True)
class Comparison:
    """A model predicted in every configuration: `rows` fastest first (those that failed last, with the reason),
    and the predictors that could not be loaded at all (`unusable`: path and reason)."""

    model: str
    rows: tuple[ConfigPrediction, ...]
    unusable: tuple[tuple[str, str], ...] = ()

    @property
    def predicted(self) -> list[ConfigPrediction]:
        """The configurations that predicted the model, fastest first."""
        return [r for r in self.rows if r.estimate is not None]

    @property
    def failed(self) -> list[ConfigPrediction]:
        """The configurations that could not predict the model."""
        return [r for r in self.rows if r.estimate is None]

    @property
    def fastest(self) -> ConfigPrediction:
        """The configuration with the lowest predicted latency; none predicted is a HaseError."""
        done = self.predicted
        if not done:
            reasons = "; ".join(f"{r.config}: {r.error}" for r in self.rows) or "no predictor"
            raise HaseError(f"{self.model}: no configuration could predict it ({reasons})")
        return done[0]

    @property
    def slowest(self) -> ConfigPrediction:
        """The configuration with the highest predicted latency (the fastest when only one predicted)."""
        return self.predicted[-1] if self.predicted else self.fastest

    def ratio(self, row: ConfigPrediction) -> float:
        """How many times longer `row` is predicted to take than the fastest configuration (1.0 for it)."""
        return row.latency_ms / self.fastest.latency_ms

    def verdict(self) -> str:
        """One sentence: the fastest configuration, its latency, and how much faster than the slowest."""
        fast, slow = self.fastest, self.slowest
        if len(self.predicted) == 1:
            return (f"fastest: {fast.config} ({fast.latency_ms:.3f} ms), the only configuration that predicted it: "
                    f"install or train another predictor to compare (see `hase predictors`)")
        return (f"fastest: {fast.config} ({fast.latency_ms:.3f} ms), {self.ratio(slow):.2f}× faster than "
                f"{slow.config} ({slow.latency_ms:.3f} ms)")

    def to_dict(self) -> dict[str, Any]:
        """What `hase predict --compare --json` prints for one model."""
        fastest = self.fastest.latency_ms if self.predicted else None
        return {"model": self.model, "configs": [r.to_dict(fastest) for r in self.rows],
                "fastest": self.fastest.config if self.predicted else None,
                "slowest": self.slowest.config if self.predicted else None,
                "speedup": self.ratio(self.slowest) if self.predicted else None,
                "verdict": self.verdict() if self.predicted else None,
                "unusable": [{"path": p, "error": e} for p, e in self.unusable]}


@dataclass(frozen=True)
class LoadedConfig:
    """An installed predictor loaded for the comparison, with its label and identity for the target used."""

    config: str
    bundle: PredictorBundle
    identity: PredictorIdentity
    mismatches: tuple[str, ...]


def select(found: Sequence[InstalledPredictor], devices: Sequence[str] | None) -> list[InstalledPredictor]:
    """The installed predictors of `devices` (every one when None), in lookup order.

    Raises:
        HaseError: a device asked for is not installed (the message lists those that are).
    """
    if not devices:
        return list(found)
    have = sorted({p.found.device for p in found})
    missing = [d for d in devices if d not in have]
    if missing:
        raise HaseError(f"no installed predictor for device(s) {missing} to compare: installed are {have} "
                        f"(see `hase predictors`)")
    return [p for p in found if p.found.device in devices]


def load_configs(found: Sequence[InstalledPredictor], target: str | None
                 ) -> tuple[list[LoadedConfig], list[tuple[str, str]]]:
    """Load each predictor's target (default: its own default); one that cannot be read or lacks the target is
    returned with its path and reason instead."""
    loaded: list[LoadedConfig] = []
    unusable: list[tuple[str, str]] = []
    for p in found:
        if p.identity is None:
            unusable.append((str(p.found.path), p.error))
            continue
        try:
            bundle = load_bundle(p.found.path, [target or "default"])
        except HaseError as exc:
            unusable.append((str(p.found.path), str(exc)))
            continue
        ident = predictor_identity(bundle.manifest, p.found, bundle.target(target))
        config = f"{p.found.device} ({p.found.source})" if p.found.shadowed else p.found.device
        loaded.append(LoadedConfig(config, bundle, ident, p.mismatches))
    return loaded, unusable


def compare_model(path: str | Path, configs: Sequence[LoadedConfig], unusable: Sequence[tuple[str, str]] = (),
                  input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                  free_dims: Mapping[str, int] | None = None) -> Comparison:
    """One model predicted with each loaded predictor, each building its own kernel graph; ranked fastest first."""
    rows: list[ConfigPrediction] = []
    for c in configs:
        try:
            est = estimate_model(path, c.bundle, c.identity.target, input_shapes, free_dims)
            rows.append(ConfigPrediction(c.config, c.identity, c.mismatches, est))
        except HaseError as exc:
            rows.append(ConfigPrediction(c.config, c.identity, c.mismatches, None, str(exc)))
    rows.sort(key=lambda r: (r.estimate is None, r.estimate.latency_ms if r.estimate else 0.0))
    return Comparison(str(path), tuple(rows), tuple(unusable))


def compare_models(paths: Sequence[str | Path], devices: Sequence[str] | None = None,
                   predictors_dir: str | Path | None = None, target: str | None = None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                   free_dims: Mapping[str, int] | None = None, host: HostInfo | None = None) -> list[Comparison]:
    """Each model predicted with every installed predictor (user-trained and shipped, as `hase predictors` lists
    them; only those of `devices` when given), each predictor loaded once.

    Raises:
        HaseError: no predictor is installed, a device asked for is not, or none of them can be loaded.
    """
    found = select(installed(predictors_dir, host), devices)
    if not found:
        raise HaseError("no predictors installed to compare: train one with `make collect train` "
                        "(see `hase predictors`)")
    configs, unusable = load_configs(found, target)
    if not configs:
        raise HaseError("no installed predictor could be loaded: "
                        + "; ".join(f"{p}: {e}" for p, e in unusable))
    return [compare_model(p, configs, unusable, input_shapes, free_dims) for p in paths]
