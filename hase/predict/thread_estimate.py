"""A model's latency at several intra-op thread counts, from a one-thread predictor and a thread model.

Every kernel is predicted once at one thread (the bundle's forests, as `hase predict` does), each node's time is
moved to T threads by `hase.predict.threads`, and the bundle's calibration turns each sum into a latency. Thread
models are named by the digest of the host they were measured on (`hase host show`): this host's own, fitted by
`hase host threads` into the user directory's `threads/`, comes first; then the one shipped for it in
`hase/predictors/threads/`; else the shipped one of the nearest core count, and that is said.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase import paths
from hase.errors import HaseError
from hase.kernels import split
from hase.predict.bundle import PredictorBundle
from hase.predict.estimate import build_kernel_graph, compose
from hase.predict.threads import ThreadModel, load_thread_model
from hase.runtime.host import HostFingerprint

SHIPPED_THREAD_MODELS = paths.SHIPPED_PREDICTORS / "threads"


@dataclass(frozen=True)
class ThreadEstimate:
    """Predicted latency (and kernel sum) per thread count of one model."""

    model: str
    device: str
    thread_model: str
    threads: tuple[int, ...]
    latency_ms: tuple[float, ...]
    sum_ms: tuple[float, ...]
    n_kernels: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: one row per thread count."""
        return {"model": self.model, "device": self.device, "thread_model": self.thread_model,
                "n_kernels": self.n_kernels,
                "by_threads": [{"threads": t, "latency_ms": lat, "sum_ms": s}
                               for t, lat, s in zip(self.threads, self.latency_ms, self.sum_ms, strict=True)]}


def user_thread_model(host: HostFingerprint) -> Path:
    """Where `hase host threads` writes this host's thread model (the user predictors directory's `threads/`)."""
    return paths.user_predictors_dir() / "threads" / f"{host.digest}.npz"


def pick_thread_model(host: HostFingerprint, path: str | Path | None = None,
                      shipped: Path = SHIPPED_THREAD_MODELS,
                      bundle: PredictorBundle | None = None, user: bool = True) -> tuple[ThreadModel, str]:
    """The thread model to use and a line saying which: `path` if given, else this host's own (user directory,
    `hase host threads`: asked for by name; skipped when `user` is False), else the one trained with `bundle` when
    it was fitted on this host (`hase train` from a store with the host's spans at more threads), else the shipped
    one of this host, else the shipped one whose host had the nearest core count."""
    if path is not None:
        return load_thread_model(path), f"thread model {path}"
    mine = user_thread_model(host)
    if user and mine.is_file():
        return load_thread_model(mine), f"thread model of this host ({host.digest}), fitted here: {mine}"
    trained = bundle.thread_model() if bundle is not None else None
    if bundle is not None and trained is not None and trained.host == host.digest:
        return trained, f"thread model of this host ({host.digest}), trained with predictor {bundle.device!r}"
    files = sorted(shipped.glob("*.npz")) if shipped.is_dir() else []
    if not files:
        raise HaseError(f"no thread model shipped in {shipped}: give one with --thread-model")
    own = shipped / f"{host.digest}.npz"
    if own.is_file():
        return load_thread_model(own), f"thread model of this host ({host.digest})"
    models = [load_thread_model(f) for f in files]
    best = min(models, key=lambda m: (abs(int(m.meta.get("cores", 0)) - host.cores), -int(m.meta.get("cores", 0))))
    return best, (f"no thread model of this host ({host.digest}, {host.cores} cores): using host {best.host}'s "
                  f"({best.meta.get('cores', '?')} cores); fit this host's own with `hase host threads`")


def estimate_threads(path: str | Path, bundle: PredictorBundle, model: ThreadModel, threads: Sequence[int],
                     thread_model_name: str = "", target: str | None = None,
                     input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                     free_dims: Mapping[str, int] | None = None) -> ThreadEstimate:
    """`path`'s predicted latency at each of `threads` intra-op threads from `bundle` (a one-thread predictor)."""
    ep = bundle.ep_config()
    if ep.ep != "cpu":
        raise HaseError(f"--threads is about the CPU execution provider's intra-op threads; {bundle.device!r} runs "
                        f"on {ep.ep}: use --device cpu-1t")
    if ep.intra_op_threads != 1:
        raise HaseError(f"predicting thread counts needs a one-thread predictor; {bundle.device!r} runs "
                        f"{ep.intra_op_threads or 'the default'} threads: use --device cpu-1t")
    if not threads or min(threads) < 1:
        raise HaseError(f"--threads takes thread counts of at least 1, got {list(threads)}")
    target = bundle.target(target)
    kg, _ = build_kernel_graph(path, ep, input_shapes, free_dims)
    nodes = split.split(kg)
    if not nodes:
        raise HaseError(f"{path}: ONNX Runtime's optimized graph has no nodes to predict")
    specs = [n.spec for n in nodes]
    cal = bundle.calibration(target)
    one = compose(specs, bundle.predictors[target], cal)
    sums = [float(model.predict(specs, one.pred_ms, t).sum()) for t in threads]
    latency = [float(cal.apply(s, len(specs))) for s in sums]
    return ThreadEstimate(str(path), bundle.device, thread_model_name, tuple(threads), tuple(latency), tuple(sums),
                          len(specs))
