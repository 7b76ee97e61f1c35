"""Unit of work "full model M on device D": session.run wall time, ORT profile decomposition, node spans.

The wall time is measured the robust way (`hase.runtime.robust`): a warm-up, then `settings.model_blocks`
blocks under the `settings.model` stop rule; the model's latency is the minimum of the block medians.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import onnx

from hase.errors import HaseError, first_line
from hase.kernels import lean
from hase.kernels.graph import load_model
from hase.kernels.inputs import make_model_feeds
from hase.kernels.types import KernelNode
from hase.measure.store import DECOMP_COLS, robust_row
from hase.measure.types import MeasureSettings, ModelSource
from hase.profiling import decompose as profile
from hase.profiling.gpu.attribute import GPU_BUSY_US, attribute
from hase.profiling.gpu.cpu_preferred import split_cpu_nodes
from hase.profiling.names import align_names, kernel_signature, profiled_signatures
from hase.profiling.run import ProfileResult, profile_model
from hase.runtime import sessions
from hase.runtime.gate import Gate
from hase.runtime.profile import CPU_PROVIDER, MEMCPY_OPS
from hase.runtime.robust import BlockPolicy, RobustTiming, time_blocks
from hase.runtime.sessions import BoundRunner
from hase.runtime.types import EPConfig

CUPTI_SOURCE = "cupti"  # span_source of a node span that is CUPTI's GPU busy time


def block_policy(settings: MeasureSettings) -> BlockPolicy:
    """The robust timing of a full model under these settings (`model.warmup` runs once, before the blocks)."""
    return BlockPolicy(warmup=settings.model.warmup, blocks=settings.model_blocks, block=settings.model,
                       noise_bound=settings.noise_bound)


def time_model(model: onnx.ModelProto, ep: EPConfig, settings: MeasureSettings) -> tuple[RobustTiming, str]:
    """Wall time of one inference: `session.run` with numpy feeds on the CPU EP; on CUDA, IOBinding with
    device-resident inputs (copied and synchronized once) and outputs, synchronized before the clock stops
    (no host copies timed); the profiled runs of `measure_model` use the same binding.

    Returns the timing and the API that was timed (`session.run` or `iobinding`).
    """
    sess = sessions.make_session(model.SerializeToString(), ep)
    feeds = make_model_feeds(model)
    fn: Callable[[], object]
    if ep.ep == "cpu":
        fn = lambda: sess.run(None, feeds)  # noqa: E731 - the timed callable
        api = "session.run"
    else:
        fn = BoundRunner(sess, feeds, ep).run
        api = "iobinding"
    try:
        fn()
    except Exception as exc:
        raise HaseError(f"the model fails to run: {first_line(exc)}") from exc
    return time_blocks(fn, block_policy(settings)), api


def measure_model(model: onnx.ModelProto, src: ModelSource, nodes: list[KernelNode], ep: EPConfig,
                  settings: MeasureSettings, *, model_id: str | None = None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Rows for `model_measurements` (one, plus `profiled_s`: seconds spent profiling, not a store column)
    and `node_spans` (one per profiled node), under `model_id` (the store's id; `src.name` by default)."""
    model_id = src.name if model_id is None else model_id
    timing, api = time_model(model, ep, settings)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hase_prof_") as tmp:
        optimized = Path(tmp) / "optimized.onnx" if ep.ep != "cpu" else None
        res = profile_model(src.path, ep, runs=settings.profile_runs, warmup=settings.profile_warmup,
                            workdir=tmp, optimized_model_path=optimized, min_runs=settings.profile_min_runs,
                            rel_ci=settings.profile_rel_ci)
        graph = onnx.load(optimized, load_external_data=False).graph if optimized is not None else None
    events = res.events
    profiled_s = time.perf_counter() - t0
    node_spans = profile.node_spans(events)  # once: the decomposition and the summary both start from them
    dec = profile.summarize(profile.decompose(events, skip_runs=res.skip_runs, spans=node_spans))
    summary = profile.node_summary(events, skip_runs=res.skip_runs, spans=node_spans)
    gpu_busy = _gpu_busy_us(res, res.skip_runs)
    meta = sessions.row_metadata(ep)
    kernel_of = {n.node_name: n.spec.kernel_id for n in nodes}
    source = node_spans.groupby(profile.NODE_NAME)[profile.SPAN_SOURCE].first().to_dict()
    # the profiled session names some nodes (ReorderOutput) unlike the session that split the model
    names = align_names(profiled_signatures(events), {n.node_name: kernel_signature(n.spec) for n in nodes})
    spans = [{"model_id": model_id, **_span_columns(r, kernel_of, source, gpu_busy, names), **meta}
             for r in summary.to_dict("records") if str(r[profile.NODE_NAME]) in names]
    row = {
        "model_id": model_id, "family": src.family, "n_kernel_nodes": len(nodes),
        "n_memcpy_nodes": int(summary[profile.OP_TYPE].isin(MEMCPY_OPS).sum()),
        "n_cpu_fallback_nodes": cpu_fallback_count(summary, graph),
        "timing_api": api, **robust_row(timing), **{k: float(dec[k]) for k in DECOMP_COLS},
        "n_profiled_runs": res.runs, **meta, "measured_at": time.time(), "profiled_s": profiled_s,
    }
    return row, spans


def cpu_fallback_count(summary: Any, graph: onnx.GraphProto | None) -> int:
    """Nodes of an accelerator session that run on the CPU for want of a kernel: the profile's CPU nodes less
    the shape computations ORT places on the CPU on purpose (`hase.profiling.gpu.cpu_preferred`). 0 on the CPU EP
    (`graph` None)."""
    if graph is None:
        return 0
    on_cpu = summary.loc[summary[profile.PROVIDER] == CPU_PROVIDER, profile.NODE_NAME].astype(str)
    return len(split_cpu_nodes(graph, on_cpu).fallback)


def _gpu_busy_us(res: ProfileResult, skip_runs: int) -> dict[str, float]:
    """Each node's GPU busy time (µs, median over runs) from CUPTI, where it was recorded (CUDA with cupti-python)."""
    if res.gpu is None:
        return {}
    nodes = attribute(res.events, res.gpu.records, res.gpu.clock, skip_runs).nodes
    return dict(zip(nodes[profile.NODE_NAME].astype(str), nodes[GPU_BUSY_US].astype(float), strict=True))


def _span_columns(r: dict[Any, Any], kernel_of: dict[str, str], source: dict[Any, Any],
                  gpu_busy: dict[str, float], names: Mapping[str, str]) -> dict[str, Any]:
    """One `node_summary` record as `node_spans` columns (times in ms, the node's kernel id and span source), under
    the name of its node in the kernel graph (`names`: profiled name -> that name). On CUDA with CUPTI, a node's
    span is its GPU busy time (`span_source` "cupti"), not its launch time."""
    name = str(r[profile.NODE_NAME])
    on_gpu = name in gpu_busy
    span_us = gpu_busy[name] if on_gpu else r[profile.SPAN_US]
    span_source = CUPTI_SOURCE if on_gpu else source.get(name)
    name = names.get(name, name)
    return {"node_name": name, "kernel_id": kernel_of.get(name), "op_type": r[profile.OP_TYPE],
            "provider": r[profile.PROVIDER], "span_ms": float(span_us) / 1e3,
            "kernel_time_ms": float(r[profile.KERNEL_TIME_US]) / 1e3, "span_source": span_source,
            "n_runs": int(r[profile.N_RUNS])}


def measure_latency(path: str | Path, ep: EPConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                    policy: BlockPolicy | None = None, seed: int = 0, gate: Gate | None = None) -> RobustTiming:
    """A model file's latency on `ep` (its EP, threads and optimization level, ORT's defaults otherwise, weight
    pre-packing included), timed the robust way with inputs and outputs pre-bound (IOBinding); with a core `gate`
    (`hase.runtime.gate.gate_for(ep)`), only while the host gives the threads their cores.

    The model is read without its weights (`hase.kernels.lean`): ORT maps them from the file itself.
    """
    model = load_model(path, input_shapes, weights=False)
    feeds = make_model_feeds(model, seed)
    session = sessions.make_session(model.SerializeToString(), ep,
                                    config={lean.EXTERNAL_FOLDER_CONFIG: str(Path(path).parent)})
    del model
    runner = sessions.BoundRunner(session, feeds, ep)
    try:
        runner.run()
    except Exception as exc:  # ORT raises several exception types; all mean "this model does not run here"
        raise HaseError(f"ONNX Runtime failed to run the model: {first_line(exc)}") from exc
    return time_blocks(runner.run, policy or BlockPolicy(), gate=gate)
