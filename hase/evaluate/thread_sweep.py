"""Thread sweeps: each kernel's in-model span at several intra-op thread counts, the data of a thread model.

One model at a time: ORT's kernel graph at one thread gives every node's signature; then the model is profiled at
each thread count in turn (`kernel_times_ms`), so the counts see the host in the same minute, and timed unprofiled
at that count right after (`measure_latency`, LATENCY_POLICY): what the profiler adds at each count. The rows are a
long table (`SWEEP_COLUMNS`) that `hase.predict.threads.paired_spans` pairs and `fit_thread_model` fits, and one row
per model and count (`hase.predict.threads.LATENCY_COLUMNS`) that `node_excess` reads; `hase host threads` fits this
host's thread model from them, `benchmarks/thread_scaling.py --sweep` records them for study.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hase.evaluate.measured import kernel_times_ms
from hase.kernels import graph, split
from hase.kernels.types import KernelSpec
from hase.measure.model import measure_latency
from hase.predict.threads import LATENCY_COLUMNS
from hase.runtime.gate import Gate, gate_for
from hase.runtime.robust import BlockPolicy
from hase.runtime.types import EPConfig, TimingPolicy

SWEEP_COLUMNS = ("model", "node", "op_type", "threads", "pass", "span_ms")
Specs = dict[tuple[str, str], KernelSpec]  # (model, node name) -> the kernel's signature
#: the unprofiled timing beside each profile: short, its quickest block kept, and only for a sweep's first
#: LATENCY_MODELS models (one median per host is all `node_excess` gives; timing every model cut a 300-s sweep from
#: 1,047 models to 174 on `bd14ee861c62`)
LATENCY_MODELS = 40
LATENCY_POLICY = BlockPolicy(warmup=3, blocks=3, block=TimingPolicy(warmup=0, min_runs=5, max_runs=200,
                                                                   min_time_s=0.05, max_time_s=0.5))


@dataclass(frozen=True)
class ModelSweep:
    """One model's spans at every thread count of one pass, its unprofiled latency at each (`LATENCY_COLUMNS`),
    and its kernels' signatures by node name."""

    spans: pd.DataFrame
    specs: dict[str, KernelSpec]
    latency: pd.DataFrame


@dataclass(frozen=True)
class Sweep:
    """A sweep of several models: the long span table, every (model, node)'s signature, the latency table."""

    spans: pd.DataFrame
    specs: Specs
    latency: pd.DataFrame


def gated_spans(path: str | Path, threads: int, runs: int, gates: Mapping[int, Gate] | None = None
                ) -> dict[str, float]:
    """`kernel_times_ms` at `threads`; with a core gate for that count, profiled once the host gives the threads
    their cores."""
    gate = (gates or {}).get(threads)
    if gate is not None:
        gate.wait()
    return kernel_times_ms(path, EPConfig(name=f"t{threads}", intra_op_threads=threads), runs=runs)


def sweep_model(name: str, path: str | Path, threads: Sequence[int], runs: int = 10, pass_no: int = 0,
                gates: Mapping[int, Gate] | None = None, timed: bool = True) -> ModelSweep:
    """`name`'s spans (ms, median of `runs` profiled runs) at each of `threads` (through `gates`' core gate of that
    count, if any), nodes named as ORT's profile names them, the signatures of the nodes the one-thread kernel
    graph has, and (`timed`) its unprofiled latency at each count."""
    kg = graph.file_kernel_graph(path, EPConfig(name="1t", intra_op_threads=1))
    specs = {n.node_name: n.spec for n in split.split(kg)}
    rows, lat = [], []
    for t in threads:
        spans = gated_spans(path, t, runs, gates)
        rows += [{"model": name, "node": node, "op_type": specs[node].op_type if node in specs else
                  node.split("_token")[0], "threads": int(t), "pass": pass_no, "span_ms": ms}
                 for node, ms in spans.items()]
        if not timed:
            continue
        timing = measure_latency(path, EPConfig(name=f"t{t}", intra_op_threads=t), policy=LATENCY_POLICY,
                                 gate=(gates or {}).get(t))
        lat.append({"model": name, "threads": int(t), "pass": pass_no, "latency_ms": timing.latency_ms,
                    "span_sum_ms": float(sum(spans.values())), "n_nodes": len(spans)})
    return ModelSweep(pd.DataFrame(rows, columns=list(SWEEP_COLUMNS)), specs,
                      pd.DataFrame(lat, columns=list(LATENCY_COLUMNS)))


def sweep_models(models: Sequence[tuple[str, Path]], threads: Sequence[int], budget_s: float, runs: int = 10,
                 progress: Callable[[str], None] | None = None, passes: int = 1, gated: bool = True
                 ) -> Sweep:
    """Every model in turn until `budget_s` is spent (a model started is finished), `passes` times back to back
    (the pairing keeps each kernel's quickest): the long span table, each (model, node)'s signature and the
    latency table (the first LATENCY_MODELS models). A model ORT cannot profile is skipped and said. Counts above
    one are profiled and timed through a core gate each (`hase.runtime.gate`) unless `gated` is False."""
    gates = {t: g for t in threads if gated and (g := gate_for(EPConfig(intra_op_threads=t))) is not None}
    t0 = time.monotonic()
    frames: list[pd.DataFrame] = []
    latency: list[pd.DataFrame] = []
    specs: Specs = {}
    for i, (name, path) in enumerate(models):
        if time.monotonic() - t0 > budget_s:
            if progress:
                progress(f"budget of {budget_s:g} s spent after {i} of {len(models)} models")
            break
        try:
            done = [sweep_model(name, path, threads, runs, pass_no=p, gates=gates, timed=i < LATENCY_MODELS)
                    for p in range(passes)]
        except Exception as e:
            if progress:
                progress(f"{name}: skipped ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            continue
        one = done[0]
        frames += [d.spans for d in done]
        latency += [d.latency for d in done if len(d.latency)]
        specs.update({(name, node): s for node, s in one.specs.items()})
        if progress:
            progress(f"{name}: {len(one.specs)} kernels at {', '.join(map(str, threads))} threads "
                     f"({time.monotonic() - t0:.0f} s)")
    spans = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(SWEEP_COLUMNS))
    lat = pd.concat(latency, ignore_index=True) if latency else pd.DataFrame(columns=list(LATENCY_COLUMNS))
    return Sweep(spans, specs, lat)
