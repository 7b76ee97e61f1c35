"""Unit of work "full model M on device D": session.run wall time, ORT profile decomposition, node spans."""
from __future__ import annotations

import tempfile
import time
from typing import Any

import onnx

from hase.errors import HaseError
from hase.kernels.inputs import make_model_feeds
from hase.kernels.split import KernelNode
from hase.measure import runtime
from hase.measure.kernel import MeasureSettings, timing_row
from hase.measure.runtime import BoundRunner, EPConfig, time_loop
from hase.measure.store import DECOMP_COLS
from hase.profiling import decompose as profile
from hase.profiling.run import profile_model

MEMCPY_OPS = ("MemcpyToHost", "MemcpyFromHost")


def time_model(model: onnx.ModelProto, ep: EPConfig, settings: MeasureSettings) -> tuple[runtime.Timing, str]:
    """Wall time of one inference: `session.run` with numpy feeds on the CPU EP; on CUDA, IOBinding with
    device-resident inputs/outputs and a synchronize before the clock stops (no host copies timed)."""
    sess = runtime.make_session(model.SerializeToString(), ep)
    feeds = make_model_feeds(model)
    if ep.ep == "cpu":
        fn = lambda: sess.run(None, feeds)  # noqa: E731 - the timed callable
        api = "session.run"
    else:
        fn = BoundRunner(sess, feeds, ep).run
        api = "iobinding"
    try:
        fn()
    except Exception as exc:
        raise HaseError(f"the model fails to run: {runtime.first_line(exc)}") from exc
    return time_loop([fn], settings.model), api


def measure_model(model: onnx.ModelProto, src, nodes: list[KernelNode], ep: EPConfig,
                  settings: MeasureSettings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Rows for `model_measurements` (one) and `node_spans` (one per profiled node)."""
    timing, api = time_model(model, ep, settings)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hase_prof_") as tmp:
        events = profile_model(src.path, ep, runs=settings.profile_runs, warmup=settings.profile_warmup,
                               workdir=tmp).events
    profiled_s = time.perf_counter() - t0
    dec = profile.summarize(profile.decompose(events, skip_runs=settings.profile_warmup))
    summary = profile.node_summary(events, skip_runs=settings.profile_warmup)
    meta = runtime.device_metadata(ep)
    kernel_of = {n.node_name: n.spec.kernel_id for n in nodes}
    source = profile.node_spans(events).groupby(profile.NODE_NAME)[profile.SPAN_SOURCE].first().to_dict()
    spans = [{
        "model_id": src.model_id, "node_name": r.node_name, "kernel_id": kernel_of.get(r.node_name),
        "op_type": r.op_type, "provider": r.provider, "span_ms": r.span_us / 1e3,
        "kernel_time_ms": r.kernel_time_us / 1e3, "span_source": source.get(r.node_name), "n_runs": int(r.n_runs), **meta,
    } for r in summary.itertuples()]
    providers = summary["provider"].value_counts().to_dict()
    row = {
        "model_id": src.model_id, "family": src.family, "n_kernel_nodes": len(nodes),
        "n_memcpy_nodes": int(summary["op_type"].isin(MEMCPY_OPS).sum()),
        "n_cpu_fallback_nodes": int(providers.get("CPUExecutionProvider", 0)) if ep.ep != "cpu" else 0,
        "timing_api": api, **timing_row(timing), **{k: float(dec[k]) for k in DECOMP_COLS},
        "n_profiled_runs": settings.profile_runs, **meta, "measured_at": time.time(), "profiled_s": profiled_s,
    }
    return row, spans
