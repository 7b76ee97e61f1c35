"""Whole-model prediction: split the model, predict every kernel (batched per forest), sum, calibrate.

    latency = alpha * sum(kernel) + gamma * n_kernels + beta     (see `hase.predict.calibration`)

The interval is the calibrated spread of the per-tree sums: draw d of every kernel comes from tree d
of its forest, so a draw summed over the model's nodes is one sample of the model total.

Nothing here imports pandas: `hase predict` starts in a fraction of the time (`ModelEstimate.frame()`
gives a DataFrame to whoever wants one).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hase import paths
from hase.errors import HaseError
from hase.kernels import cuda_map, graph, split
from hase.kernels.types import KernelSpec
from hase.predict import residency
from hase.predict.bundle import PredictorBundle, load_bundle, predictor_dir
from hase.predict.calibration import Calibration
from hase.predict.predictor import KEY, SOURCE, SOURCE_OP, KernelPredictor
from hase.profiling.names import kernel_signature
from hase.runtime import sessions

if TYPE_CHECKING:  # pragma: no cover - pandas loads only for `ModelEstimate.frame`
    import pandas as pd

    from hase.kernels.graph import KernelGraph
    from hase.runtime.types import EPConfig

NODE_NAME, OP_TYPE, KERNEL_ID, LOW_MS, HIGH_MS = "node_name", "op_type", "kernel_id", "low_ms", "high_ms"
log = logging.getLogger(__name__)
INTERVAL = (10.0, 90.0)  # percentiles of the trees' spread reported as the interval


@dataclass(frozen=True)
class KernelPrediction:
    """One node of ORT's kernel graph: its kernel, the forest that predicted it (`key`, from its own op's
    forest, its family's or the generic one: `source`) and the predicted time; with the host's peaks, the
    kernel's roofline time and whether the prediction was clamped to its band ("low", "high"; "" when not)."""

    node_name: str
    kernel_id: str
    op_type: str
    key: str
    source: str
    pred_ms: float
    roofline_ms: float = float("nan")
    clamped: str = ""
    out_shape: tuple[int, ...] | None = None  # first output's shape: which profiled node it is (hase.profiling.names)


@dataclass(frozen=True)
class OpTotal:
    """Predicted time of one op type: kernels, sum and share of the model's kernel sum."""

    op_type: str
    n: int
    pred_ms: float
    share: float


@dataclass(frozen=True)
class ModelEstimate:
    """A model's predicted latency with its interval, the raw kernel sum and what it is made of."""

    model: str
    device: str
    target: str
    latency_ms: float
    low_ms: float
    high_ms: float
    sum_ms: float
    n_kernels: int
    calibration: Calibration
    kernels: tuple[KernelPrediction, ...] = field(repr=False)
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def fallback(self) -> list[KernelPrediction]:
        """Kernels not predicted by their own op's forest (family or generic forest instead)."""
        return [k for k in self.kernels if k.source != SOURCE_OP]

    @property
    def clamped(self) -> list[KernelPrediction]:
        """Kernels whose forest's prediction lay outside their family's band around the roofline, clamped to it."""
        return [k for k in self.kernels if k.clamped]

    def clamp_counts(self) -> list[tuple[str, str, int]]:
        """(op type, "low" or "high", kernels) of the clamped kernels, sorted by op type and side."""
        counts: dict[tuple[str, str], int] = {}
        for k in self.clamped:
            counts[k.op_type, k.clamped] = counts.get((k.op_type, k.clamped), 0) + 1
        return [(op, side, n) for (op, side), n in sorted(counts.items())]

    def fallback_counts(self) -> list[tuple[str, str, int]]:
        """(op type, source, kernels) of the fallbacks, sorted by op type and source."""
        counts: dict[tuple[str, str], int] = {}
        for k in self.fallback:
            counts[k.op_type, k.source] = counts.get((k.op_type, k.source), 0) + 1
        return [(op, source, n) for (op, source), n in sorted(counts.items())]

    def by_op(self) -> list[OpTotal]:
        """Per op type: kernels, predicted ms and share of the sum, largest first."""
        groups: dict[str, list[float]] = {}
        for k in self.kernels:
            groups.setdefault(k.op_type, []).append(k.pred_ms)
        totals = [OpTotal(op, len(v), float(np.sum(v)), float(np.sum(v)) / max(self.sum_ms, 1e-12))
                  for op, v in sorted(groups.items())]
        return sorted(totals, key=lambda t: -t.pred_ms)

    def top(self, n: int = 10) -> list[KernelPrediction]:
        """The n nodes with the largest predicted time (the earlier node first among equals)."""
        return sorted(self.kernels, key=lambda k: -k.pred_ms)[:max(n, 0)]

    def frame(self) -> pd.DataFrame:
        """The kernels as a DataFrame: node_name, kernel_id, op_type, key, source, pred_ms."""
        import pandas as pd  # noqa: PLC0415 - pandas (120 ms) loads only here: `hase predict` runs without it

        columns = [f.name for f in dataclasses.fields(KernelPrediction) if f.name != "out_shape"]
        return pd.DataFrame([dataclasses.astuple(k)[:len(columns)] for k in self.kernels], columns=columns)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """Everything `hase predict --json` prints for one model."""
        fb, cl = self.fallback, self.clamped
        return {
            "model": self.model, "device": self.device, "target": self.target, "latency_ms": self.latency_ms,
            "interval_ms": [self.low_ms, self.high_ms], "interval": f"p{INTERVAL[0]:g}-p{INTERVAL[1]:g} of the trees",
            "sum_kernel_ms": self.sum_ms, "n_kernels": self.n_kernels, "calibration": self.calibration.to_dict(),
            "by_op": [dataclasses.asdict(t) for t in self.by_op()],
            "top_kernels": [dataclasses.asdict(k) for k in self.top(top)],
            "fallback": [{NODE_NAME: k.node_name, OP_TYPE: k.op_type, KEY: k.key, SOURCE: k.source} for k in fb],
            "n_fallback": len(fb),
            "clamped": [{NODE_NAME: k.node_name, OP_TYPE: k.op_type, KEY: k.key, "side": k.clamped,
                         "pred_ms": k.pred_ms, "roofline_ms": k.roofline_ms} for k in cl],
            "n_clamped": len(cl), "timings_s": self.timings_s,
        }


@dataclass(frozen=True)
class Composition:
    """Per-node predictions of a kernel sequence (`keys`, `sources`, `pred_ms`, `roofline_ms`, `clamped` in node
    order) and the calibrated total with its interval."""

    keys: list[str]
    sources: list[str]
    pred_ms: NDArray[np.float64]
    sum_ms: float
    latency_ms: float
    low_ms: float
    high_ms: float
    roofline_ms: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    clamped: list[str] = field(default_factory=list)


def compose(specs: Sequence[KernelSpec], predictor: KernelPredictor, calibration: Calibration,
            n_draws: int = 64, move: Callable[[NDArray[np.float64]], NDArray[np.float64]] | None = None
            ) -> Composition:
    """Predict every node's kernel once per unique kernel and sum over nodes; the interval is the calibrated
    spread of the per-tree sums. With the calibration's kappa, each node pays for streaming its weights where the
    model outgrows the caches (`hase.predict.residency`); `move` then maps the nodes' times to another thread count
    (a threaded device, `hase.predict.threaded`), each node's draws scaled alike."""
    unique: dict[str, KernelSpec] = {}
    for s in specs:
        unique.setdefault(s.kernel_id, s)  # one kernel_id is one signature: any occurrence will do
    r = predictor.predict_bounded(list(unique.values()), n_draws)
    keys, sources, pred, draws = r.keys, r.sources, r.pred_ms, r.draws
    position = {kernel_id: i for i, kernel_id in enumerate(unique)}
    rows = np.array([position[s.kernel_id] for s in specs], dtype=int)
    per_node, node_draws = pred[rows], draws[rows]
    peaks = predictor.host_peaks()
    if calibration.kappa and peaks is not None:
        stream = residency.stream_ms(specs, peaks)
        per_node = calibration.streaming.apply(per_node, stream)
        node_draws = calibration.streaming.apply(node_draws, stream[:, None])
    if move is not None:
        moved = move(per_node)
        node_draws = node_draws * np.divide(moved, per_node, out=np.ones_like(moved), where=per_node > 0)[:, None]
        per_node = moved
    total = float(per_node.sum())
    sums = node_draws.sum(axis=0)
    n = len(specs)
    latency = float(calibration.apply(total, n))
    low, high = (float(v) for v in calibration.apply(np.percentile(sums, INTERVAL), n))
    return Composition([keys[i] for i in rows], [sources[i] for i in rows], per_node, total, latency,
                       min(low, latency), max(high, latency), r.roofline_ms[rows], [r.clamped[i] for i in rows])


def estimate_model(path: str | Path, bundle: PredictorBundle, target: str | None = None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                   free_dims: Mapping[str, int] | None = None) -> ModelEstimate:
    """A model file's latency on the bundle's device: ORT kernel graph -> kernels -> forests -> alpha*sum+beta.
    `input_shapes` (by input) and `free_dims` (by symbolic dimension) fix symbolic input shapes."""
    target = bundle.target(target)
    kg, graph_s = build_kernel_graph(path, bundle.ep_config(), input_shapes, free_dims)
    return estimate_graph(path, kg, bundle, target, graph_s)


def build_kernel_graph(path: str | Path, ep: EPConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                       free_dims: Mapping[str, int] | None = None) -> tuple[KernelGraph, float]:
    """The kernel graph `hase predict` needs (ORT's optimized graph and every tensor's shape, never the weights)
    and the seconds it took. For a CUDA configuration on a host whose onnxruntime has no CUDA EP: the CPU EP's
    graph mapped to the CUDA EP's kernels (`hase.kernels.cuda_map`), so a GPU predictor predicts anywhere."""

    t0 = time.perf_counter()
    if ep.ep == "cuda" and not sessions.provider_available(ep):
        log.debug("no CUDA EP here: %s's kernel graph is the CPU EP's `%s` graph mapped to CUDA kernels "
                  "(hase.kernels.cuda_map)", ep.name, cuda_map.CPU_LEVEL)
        kg = graph.file_kernel_graph(path, cuda_map.cpu_config(ep), input_shapes, with_weights=False,
                                     free_dims=free_dims)
        kg = cuda_map.to_cuda(kg, ep.opt_level)
    else:
        kg = graph.file_kernel_graph(path, ep, input_shapes, with_weights=False, free_dims=free_dims)
    return kg, time.perf_counter() - t0


def estimate_graph(path: str | Path, kg: KernelGraph, bundle: PredictorBundle, target: str | None = None,
                   graph_s: float = 0.0) -> ModelEstimate:
    """`estimate_model` of a kernel graph already built (`build_kernel_graph`) with the bundle's configuration."""

    t0 = time.perf_counter()
    target = bundle.target(target)
    nodes = split.split(kg)
    if not nodes:
        raise HaseError(f"{path}: ONNX Runtime's optimized graph has no nodes to predict")
    t1 = time.perf_counter()
    cal = bundle.calibration(target)
    specs = [n.spec for n in nodes]
    c = compose(specs, bundle.predictors[target], cal, move=_thread_move(bundle, specs))
    kernels = tuple(KernelPrediction(n.node_name, n.spec.kernel_id, n.spec.op_type, key, source, float(ms),
                                     float(roof), side, kernel_signature(n.spec)[1])
                    for n, key, source, ms, roof, side in zip(nodes, c.keys, c.sources, c.pred_ms, c.roofline_ms,
                                                               c.clamped, strict=True))
    t2 = time.perf_counter()
    return ModelEstimate(str(path), bundle.device, target, c.latency_ms, c.low_ms, c.high_ms, c.sum_ms, len(nodes),
                         cal, kernels, {"graph_s": graph_s + t1 - t0, "predict_s": t2 - t1})


def _thread_move(bundle: PredictorBundle, specs: Sequence[KernelSpec]
                 ) -> Callable[[NDArray[np.float64]], NDArray[np.float64]] | None:
    """A threaded device's move of one-thread node times to its thread count (`hase.predict.threaded`) by the
    thread model of this host (`hase.predict.threaded.device_thread_model`), else None."""
    threads = bundle.moved_threads()
    if threads is None:
        return None
    from hase.predict.threaded import device_thread_model  # noqa: PLC0415 - a thread model pulls pandas

    model, which = device_thread_model(bundle)
    log.debug("%s: %s", bundle.device, which)
    return lambda one: model.predict(specs, one, threads)


class KernelGraphs:
    """The kernel graphs of model files (`build_kernel_graph`), built ahead of the caller by `workers` background
    threads and yielded in the files' order: ONNX Runtime releases the GIL while it optimizes a model, so the next
    models' graphs are built while this one's kernels are predicted (and the first while the predictor loads).
    At most `workers` ORT sessions exist at once (two by default, each with its peak memory; one for a single
    model). Use as a context manager; iterating yields (path, graph and seconds, or the HaseError that building it
    raised); any other exception is raised where its model is reached.

        >>> with KernelGraphs(files, bundle.ep_config()) as graphs:
        ...     results = estimate_models(files, bundle, graphs=graphs)
    """

    def __init__(self, paths: Sequence[str | Path], ep: EPConfig,
                 input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                 free_dims: Mapping[str, int] | None = None, workers: int = 2) -> None:
        self.paths = list(paths)
        self.ep = ep
        self.input_shapes, self.free_dims = dict(input_shapes or {}), dict(free_dims or {})
        self._ahead = max(workers, 1) + 1  # graphs submitted at once: those being built and the next
        self._pool = ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="hase-kernel-graph")
        self._pending: deque[Future[tuple[KernelGraph, float] | HaseError]] = deque()
        self._submitted = self._yielded = 0
        self._fill()

    def _fill(self) -> None:
        while self._submitted < len(self.paths) and len(self._pending) < self._ahead:
            self._pending.append(self._pool.submit(self._build, self.paths[self._submitted]))
            self._submitted += 1

    def _build(self, path: str | Path) -> tuple[KernelGraph, float] | HaseError:
        try:
            return build_kernel_graph(path, self.ep, self.input_shapes, self.free_dims)
        except HaseError as exc:
            return exc

    def __iter__(self) -> Iterator[tuple[str | Path, tuple[KernelGraph, float] | HaseError]]:
        while self._pending:
            path, future = self.paths[self._yielded], self._pending.popleft()
            self._yielded += 1
            self._fill()
            yield path, future.result()

    def close(self) -> None:
        """Drop the graphs not started and wait for the one being built (ORT cannot be stopped mid-session)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()

    def __enter__(self) -> KernelGraphs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclass(frozen=True)
class PredictFailure:
    """A model that could not be predicted, with the one-line reason (batch prediction reports it and goes on)."""

    model: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        """What `hase predict --json` prints for the model."""
        return {"model": self.model, "error": self.error}


ModelResult = ModelEstimate | PredictFailure


def estimate_models(paths: Sequence[str | Path], bundle: PredictorBundle, target: str | None = None,
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                    free_dims: Mapping[str, int] | None = None, *,
                    graphs: KernelGraphs | None = None) -> list[ModelResult]:
    """`estimate_model` for each file, in order; a file that fails with a HaseError becomes a PredictFailure.
    Graphs are built ahead in a background thread (`KernelGraphs`; pass `graphs`, of these paths in the bundle's
    configuration, to have it started earlier, e.g. while the predictor loads)."""
    if graphs is None:
        with KernelGraphs(paths, bundle.ep_config(), input_shapes, free_dims) as own:
            return estimate_models(paths, bundle, target, input_shapes, free_dims, graphs=own)
    if ([str(p) for p in graphs.paths] != [str(p) for p in paths] or graphs.ep != bundle.ep_config()
            or (graphs.input_shapes, graphs.free_dims) != (dict(input_shapes or {}), dict(free_dims or {}))):
        raise ValueError("the kernel graphs were built for other models, shapes or another configuration than the "
                         "bundle's")
    results: list[ModelResult] = []
    for path, built in graphs:
        try:
            if isinstance(built, HaseError):
                raise built
            results.append(estimate_graph(path, built[0], bundle, target, built[1]))
        except HaseError as exc:
            results.append(PredictFailure(str(path), str(exc)))
    return results


def predict_model_latency(path: Path, device: str = paths.DEFAULT_DEVICE,
                          predictors_dir: str | Path | None = None) -> float:
    """Calibrated predicted latency (ms) of an ONNX model on `device`, with its default target."""
    bundle = load_bundle(predictor_dir(device, predictors_dir), ["default"])
    return estimate_model(path, bundle).latency_ms
