"""The staged collect pipeline: zoo -> split -> measure kernels and full models -> store, resumably.

Work is cut into jobs ("kernel K on device D", "model M on device D"); each job's rows and its
done-marker commit in one transaction, so a killed run resumes where it stopped with nothing lost
and nothing measured twice. A job that fails for a reason of its own is recorded as a skip.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from hase import paths
from hase.errors import HaseError
from hase.files import load_toml
from hase.kernels import graph, split
from hase.kernels.types import KernelNode
from hase.measure import kernel as measure
from hase.measure import runtime
from hase.measure.kernel import KernelJob
from hase.measure.model import measure_model
from hase.measure.store import Store
from hase.measure.types import EPConfig, MeasureSettings, ModelSource, TimingPolicy

__all__ = ["CollectConfig", "CollectReport", "ModelSource", "collect", "collect_model", "dir_sources",
           "load_collect_config", "zoo_sources"]

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class CollectConfig:
    """Device configurations to measure on and how hard to measure."""

    devices: tuple[EPConfig, ...]
    settings: MeasureSettings


@dataclass
class CollectReport:
    """What a collect run did, for the CLI summary and the benchmark."""

    models_done: int = 0
    models_skipped: int = 0
    kernels_measured: int = 0
    kernels_reused: int = 0
    node_occurrences: int = 0
    skips: list[tuple[str, str]] = field(default_factory=list)
    timed_s: float = 0.0
    wall_s: float = 0.0


def load_collect_config(path: str | Path, device_names: list[str] | None = None) -> CollectConfig:
    """Parse `configs/devices.toml`; `device_names` restricts to some of its devices."""
    raw = load_toml(path, "device config")
    try:
        devices = tuple(EPConfig(**d) for d in raw.get("device", []))
        settings = MeasureSettings(
            kernel=TimingPolicy.from_dict(raw.get("kernel_timing", {})),
            model=TimingPolicy.from_dict(raw.get("model_timing", {})),
            profile_warmup=int(raw.get("profile", {}).get("warmup", 3)),
            profile_runs=int(raw.get("profile", {}).get("runs", 10)),
            cold_sessions=int(raw.get("cold", {}).get("sessions", 8)),
            cold_max_bytes=int(raw.get("cold", {}).get("max_mb", 256)) << 20,
        )
    except TypeError as exc:
        raise HaseError(f"{path}: bad device entry ({exc}); see configs/devices.toml for the keys") from exc
    if not devices:
        raise HaseError(f"{path} defines no [[device]]: add one (see configs/devices.toml)")
    if device_names:
        known = {d.name: d for d in devices}
        missing = [n for n in device_names if n not in known]
        if missing:
            raise HaseError(f"unknown device {missing}: {path} defines {sorted(known)}")
        devices = tuple(known[n] for n in device_names)
    return CollectConfig(devices, settings)


def zoo_sources(zoo_config: str | Path, out_dir: str | Path = paths.ZOO_DIR) -> Iterator[ModelSource]:
    """Build (where missing) and yield the zoo's models one at a time."""
    from hase.zoo import ensure_zoo

    for entry in ensure_zoo(zoo_config, out_dir):
        yield ModelSource(entry.spec.name, entry.spec.family, Path(entry.path))


def dir_sources(directory: str | Path, family: str = "exported") -> list[ModelSource]:
    """Every .onnx file of a directory, as models of one family."""
    d = Path(directory)
    if not d.is_dir():
        raise HaseError(f"models directory not found: {d}")
    return [ModelSource(p.stem, family, p) for p in sorted(d.glob("*.onnx"))]


def collect(sources: Iterable[ModelSource], cfg: CollectConfig, store: Store,
            progress: ProgressFn | None = None) -> CollectReport:
    """Measure every source on every device config into the store; resumable and idempotent."""
    report = CollectReport()
    start = time.perf_counter()
    sources = list(sources) if len(cfg.devices) > 1 else sources
    for ep in cfg.devices:
        runtime.check_provider(ep)
        _collect_fixed_cost(ep, cfg.settings, store, report)
        for src in sources:
            _notify(progress, "model", {"model": src.model_id, "device": ep.name})
            collect_model(src, ep, cfg.settings, store, report, progress)
    report.wall_s = time.perf_counter() - start
    return report


def _notify(progress: ProgressFn | None, event: str, info: dict[str, Any]) -> None:
    if progress:
        progress(event, info)


def _collect_fixed_cost(ep: EPConfig, settings: MeasureSettings, store: Store, report: CollectReport) -> None:
    job = "fixed:empty_kernel"
    if store.is_done(job, ep.name):
        return
    row = measure.measure_fixed_cost(ep, settings)
    report.timed_s += row["n_runs"] * row["mean_ms"] / 1e3
    with store.transaction():
        store.insert("fixed_costs", [row])
        store.mark_done(job, ep.name)


def collect_model(src: ModelSource, ep: EPConfig, settings: MeasureSettings, store: Store,
                  report: CollectReport, progress: ProgressFn | None = None) -> None:
    """Split one model, measure its not-yet-measured kernels, then the full model; skip with a reason on failure."""
    job = f"model:{src.model_id}"
    if store.is_done(job, ep.name) or store.has_skip(job, ep.name):
        return
    log.info("model %s on %s: splitting", src.model_id, ep.name)
    try:
        model = graph.load_model(src.path)
        kg = graph.kernel_graph(model, ep)
        nodes = split.split(kg)
    except HaseError as exc:
        _skip(store, report, job, ep, src.model_id, "split", str(exc))
        return
    _register_model(src, model, kg, nodes, store)
    report.node_occurrences += len(nodes)
    uniq = split.unique_kernels(nodes)
    for i, kn in enumerate(uniq.values()):
        _notify(progress, "kernel", {"model": src.model_id, "op_type": kn.spec.op_type, "i": i, "n": len(uniq)})
        _collect_kernel(kg, kn, ep, settings, store, report)
    log.info("model %s on %s: full-model runs", src.model_id, ep.name)
    try:
        model_row, span_rows = measure_model(model, src, nodes, ep, settings)
    except HaseError as exc:
        _skip(store, report, job, ep, src.model_id, "model", str(exc))
        return
    report.timed_s += model_row["n_runs"] * model_row["mean_ms"] / 1e3 + model_row.get("profiled_s", 0.0)
    model_row.pop("profiled_s", None)
    with store.transaction():
        store.insert("model_measurements", [model_row])
        store.insert("node_spans", span_rows)
        store.mark_done(job, ep.name)
    report.models_done += 1


def _register_model(src: ModelSource, model: onnx.ModelProto, kg: graph.KernelGraph, nodes: list[KernelNode],
                    store: Store) -> None:
    """Kernels, the model and its node->kernel map: written once, shared by every device config."""
    uniq = split.unique_kernels(nodes)
    with store.transaction():
        store.insert("kernels", [{"kernel_id": k, "op_type": kn.spec.op_type, "domain": kn.spec.domain,
                                  "signature_json": kn.spec.to_json()} for k, kn in uniq.items()],
                     ignore_existing=True)
        inputs = {n: list(a.shape) for n, a in kg.feeds.items()}
        store.insert("models", [{
            "model_id": src.model_id, "family": src.family, "source": str(src.path),
            "sha256": hashlib.sha256(src.path.read_bytes()).hexdigest(), "n_onnx_nodes": len(model.graph.node),
            "n_kernel_nodes": len(nodes), "n_unique_kernels": len(uniq), "inputs_json": json.dumps(inputs),
            "opt_level": kg.opt_level}], ignore_existing=True)
        store.insert("model_nodes", [{"model_id": src.model_id, "opt_level": kg.opt_level, "node_idx": n.node_idx,
                                      "node_name": n.node_name, "kernel_id": n.spec.kernel_id,
                                      "op_type": n.spec.op_type} for n in nodes], ignore_existing=True)


def _collect_kernel(kg: graph.KernelGraph, kn: KernelNode, ep: EPConfig, settings: MeasureSettings,
                    store: Store, report: CollectReport) -> None:
    job = f"kernel:{kn.spec.kernel_id}"
    if store.is_done(job, ep.name) or store.has_skip(job, ep.name):
        report.kernels_reused += 1
        return
    node = kg.nodes[kn.node_idx]
    log.debug("kernel %s (%s) on %s", kn.spec.kernel_id, kn.spec.op_type, ep.name)
    try:
        kjob = KernelJob(kn.spec, split.kernel_model(kg, node).SerializeToString())
        rows = measure.measure_kernel(kjob, ep, settings)
    except HaseError as exc:
        _skip(store, report, job, ep, f"{kn.spec.op_type}:{kn.spec.kernel_id}", "kernel", str(exc))
        return
    report.timed_s += sum(r["n_runs"] * r["mean_ms"] for r in rows) / 1e3
    with store.transaction():
        store.insert("kernel_measurements", rows)
        store.mark_done(job, ep.name)
    report.kernels_measured += 1


def _skip(store: Store, report: CollectReport, job: str, ep: EPConfig, target: str, stage: str, reason: str) -> None:
    log.warning("skipped %s on %s (%s): %s", target, ep.name, stage, reason)
    store.record_skip(job, ep.name, target, stage, reason)
    report.skips.append((target, reason))
    if job.startswith("model:"):
        report.models_skipped += 1
