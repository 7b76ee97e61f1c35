"""Plain-language findings about a profile's decomposition: the CUDA launch-vs-wait pattern, CPU
fallbacks and Memcpy nodes, executor overhead, slow first runs. Pure functions, no printing."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hase.profiling.decompose import (
    AFTER_EXECUTE_US,
    BEFORE_EXECUTE_US,
    EXECUTE_OUTSIDE_NODES_US,
    EXECUTE_US,
    KERNEL_TIME_SUM_US,
    METRICS,
    MODEL_RUN_US,
    N_FENCED_NODES,
    N_MEMCPY_NODES,
    N_NESTED_NODES,
    N_NODES,
    NODE_GAP_US,
    NODE_NON_KERNEL_US,
    NODE_OVERLAP_US,
    PROVIDER,
)
from hase.profiling.gpu.attribute import (
    GPU_BUSY_US,
    N_ACTIVITIES,
    N_UNATTRIBUTED,
    NODE_GPU_BUSY_US,
    UNATTRIBUTED_BUSY_US,
    GpuAttribution,
)
from hase.runtime.profile import CPU_PROVIDER
from hase.runtime.robust import RobustTiming
from hase.tables import require_columns

GPU_WAIT_SHARE = 0.3  # after-Execute share of model_run above which a GPU run is "waiting for the GPU"
OVERHEAD_SHARE = 0.25  # non-kernel share of model_run above which a CPU run is overhead-heavy
NOISY_SPREAD = 1.5  # p90 / p10 of model_run over the counted runs above which the machine was too busy to trust


def diagnose(summary: pd.Series, providers: pd.DataFrame) -> list[str]:
    """Plain-language findings from a summarized decomposition and `provider_counts`.

    Flags the CUDA launch-vs-wait pattern (kernel_time is CPU launch time; the GPU work shows up as
    waiting after Execute), CPU fallback nodes, inserted Memcpy nodes and heavy framework overhead.
    """
    require_columns(providers, (PROVIDER, N_NODES), "providers",
                    "build it with hase.profiling.decompose.provider_counts")
    run = float(summary[MODEL_RUN_US])
    counts = dict(zip(providers[PROVIDER], providers[N_NODES], strict=True))
    accel = [p for p in counts if p and p != CPU_PROVIDER]
    found = _gpu_findings(summary, accel, run) if accel else _cpu_findings(summary, run)
    if not np.isfinite(summary[EXECUTE_US]):
        found.append("no executor Execute event inside the runs: before/after Execute are unknown "
                     "(an ORT build that names it differently?)")
    if accel and counts.get(CPU_PROVIDER, 0):
        found.append(f"{counts[CPU_PROVIDER]} nodes fell back to {CPU_PROVIDER} (no {accel[0]} kernel, or "
                     f"shape computations ORT keeps on the CPU); each provider boundary costs a copy")
    n_memcpy = int(summary.get(N_MEMCPY_NODES, 0))
    if n_memcpy:
        found.append(f"{n_memcpy} Memcpy nodes inserted per run (MemcpyToHost/MemcpyFromHost copies "
                     f"between host and device at provider boundaries)")
    if float(summary.get(NODE_OVERLAP_US, 0.0)) > 0:
        found.append("nodes ran concurrently (parallel executor): node gaps are measured on the union of "
                     "node intervals and node overlap is subtracted")
    if int(summary.get(N_NESTED_NODES, 0)):
        found.append(f"{int(summary[N_NESTED_NODES])} nodes ran inside subgraphs (If/Loop/Scan); their time is "
                     f"counted once, in the parent node")
    return found


def _gpu_findings(summary: pd.Series, accel: list[str], run: float) -> list[str]:
    ep = accel[0].removesuffix("ExecutionProvider") + " EP"
    after, kernel = float(summary[AFTER_EXECUTE_US]), float(summary[KERNEL_TIME_SUM_US])
    head = f"{ep}: kernel_time is CPU launch time, not GPU execution"
    if run > 0 and after / run >= GPU_WAIT_SHARE:
        return [f"{head}; {after / run:.0%} of model_run is after Execute, i.e. waiting for the GPU "
                f"(kernel_time covers {kernel / run:.0%}); GPU time per node: `hase profile --ep cuda` with "
                f"cupti-python (`pip install hase[gpu]`), or Nsight Systems"]
    return [f"{head}; the GPU's work shows up after Execute ({after / 1e3:.3f} ms here) or inside the "
            f"nodes that synchronize, not in kernel_time"]


def gpu_findings(gpu: GpuAttribution) -> list[str]:
    """CUPTI's verdict (CPU-bound or GPU-bound, with its numbers) and how much of the GPU's busy time the
    nodes account for (the rest was launched outside every node's window: input copies, the output copy)."""
    found = [f"CUPTI: {gpu.verdict.text()}"]
    med = gpu.runs.median(numeric_only=True)
    busy, nodes = float(med[GPU_BUSY_US]), float(med[NODE_GPU_BUSY_US])
    if busy > 0:
        found.append(f"CUPTI: the nodes' GPU busy time adds up to {nodes / busy:.0%} of the run's GPU busy time "
                     f"({nodes / 1e3:.3f} of {busy / 1e3:.3f} ms); {float(med[UNATTRIBUTED_BUSY_US]) / 1e3:.3f} ms "
                     f"from {int(med[N_UNATTRIBUTED])} of {int(med[N_ACTIVITIES])} GPU activities was launched "
                     f"outside every node's window (input copies before Execute, output copies after it)")
    return found


def _cpu_findings(summary: pd.Series, run: float) -> list[str]:
    found = []
    kernel = float(summary[KERNEL_TIME_SUM_US])
    if run > 0 and (run - kernel) / run >= OVERHEAD_SHARE:
        parts = {METRICS[k][0].strip(): float(summary[k]) for k in
                 (BEFORE_EXECUTE_US, AFTER_EXECUTE_US, NODE_GAP_US, NODE_NON_KERNEL_US, EXECUTE_OUTSIDE_NODES_US)
                 if np.isfinite(summary[k])}
        label, value = max(parts.items(), key=lambda kv: kv[1], default=("", 0.0))
        if value > 0:
            found.append(f"kernel_time covers only {kernel / run:.0%} of model_run; the largest remainder is "
                         f"{label} ({value / 1e3:.3f} ms)")
    if int(summary.get(N_NODES, 0)) and int(summary.get(N_FENCED_NODES, 0)) == 0:
        found.append("no fence events (current CPU builds record only kernel_time): node spans equal kernel "
                     "times and node non-kernel is 0 by construction")
    return found


def warmup_finding(all_runs: pd.DataFrame, skip_runs: int) -> list[str]:
    """A finding when run 0 is counted although it is much slower than the others (one-time work)."""
    if skip_runs > 0 or len(all_runs) < 2:
        return []
    first = float(all_runs[MODEL_RUN_US].iloc[0])
    rest = float(all_runs[MODEL_RUN_US].iloc[1:].median())
    if rest > 0 and first > 2 * rest:
        return [f"run 0 took {first / 1e3:.3f} ms vs a median {rest / 1e3:.3f} ms for the others: it includes "
                f"one-time work (allocation, algorithm search); skip it (--skip-runs 1)"]
    return []


def noise_finding(per_run: pd.DataFrame, bound: float = NOISY_SPREAD, blocks: int = 3) -> list[str]:
    """A finding when the counted runs' model_run varies so much (p90 / p10 >= `bound`) that the machine was
    busy: medians per run and per node then disagree, and neither is the model's own time. It gives the
    robust figure beside it (`hase.runtime.robust`): the counted runs cut into `blocks` blocks of consecutive
    runs, the minimum of the block medians (interference only adds time, so the quietest block is the best
    estimate of the model's own time)."""

    runs = per_run[MODEL_RUN_US]
    if len(runs) < 3:
        return []
    p10, p90 = float(runs.quantile(0.1)), float(runs.quantile(0.9))
    if p10 > 0 and p90 / p10 >= bound:
        parts = [list(b / 1e6) for b in np.array_split(runs.to_numpy(dtype=float), min(blocks, len(runs)))]
        robust = RobustTiming.from_blocks(parts, warmup=0, noise_bound=bound - 1)
        return [f"model_run varied from {float(runs.min()) / 1e3:.3f} to {float(runs.max()) / 1e3:.3f} ms over the "
                f"{len(runs)} runs (p90 / p10 = {p90 / p10:.1f}, bound {bound:g}): the machine was busy, so these "
                f"figures carry its load (the per-op rows, medians per node, much less than the per-run "
                f"decomposition); the quietest of {len(parts)} blocks of consecutive runs had a median of "
                f"{robust.latency_ms:.3f} ms (block medians {robust.spread:.0%} apart), the best estimate of the "
                f"model's own time; rerun on an idle machine"]
    return []
