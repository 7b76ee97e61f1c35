"""Check a prediction against a measurement: `hase predict MODEL --measure`.

The model is predicted, then run on this host with the predictor's own session configuration (execution
provider, intra/inter-op threads, optimization level from its manifest) and timed the robust way
(`hase.runtime.robust`: warm-up, blocks of IOBinding runs, minimum of the block medians, spread kept,
noisy blocks flagged). The slowest predicted kernels are set beside their in-model time: the node's ORT
`kernel_time` in a profiled run of the same configuration (`hase.profiling.run.profile_model`), which is
the span target the default predictors learn on CPU builds.

    >>> check = check_prediction("resnet50.onnx", bundle)
    >>> check.estimate.latency_ms, check.measured.latency_ms, check.error_pct
    (84.9, 79.3, 7.1)
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError
from hase.kernels.graph import resolve_input_shapes
from hase.measure.model import measure_latency
from hase.predict.bundle import PredictorBundle
from hase.predict.estimate import ModelEstimate, ModelResult, PredictFailure, estimate_model
from hase.profiling import decompose
from hase.profiling.names import align_names, profiled_signatures
from hase.profiling.run import profile_model
from hase.runtime import sessions
from hase.runtime.gate import Gate
from hase.runtime.robust import BlockPolicy, RobustTiming
from hase.runtime.types import EPConfig

PROFILE_WARMUP = 3  # untimed runs of the profiled session before the run whose kernel times are read


@dataclass(frozen=True)
class KernelCheck:
    """One node: predicted time and its in-model time (ORT kernel_time, median over the profiled runs);
    `measured_ms` is None when the profile has no such node (names ORT makes up can differ between sessions)."""

    node_name: str
    op_type: str
    kernel_id: str
    pred_ms: float
    measured_ms: float | None

    @property
    def error_pct(self) -> float | None:
        """(predicted - measured) / measured, in %."""
        if self.measured_ms is None or self.measured_ms <= 0:
            return None
        return (self.pred_ms - self.measured_ms) / self.measured_ms * 100

    def to_dict(self) -> dict[str, Any]:
        """Every field, plus `error_pct`."""
        return {**dataclasses.asdict(self), "error_pct": self.error_pct}


@dataclass(frozen=True)
class PredictionCheck:
    """A prediction, the robust measurement of the same model in the same configuration, and the top kernels
    predicted vs measured in-model (`kernel_time_sum_ms`: every profiled node's kernel_time, summed)."""

    estimate: ModelEstimate
    measured: RobustTiming
    ep: EPConfig
    device_meta: dict[str, Any]
    kernels: tuple[KernelCheck, ...]
    kernel_time_sum_ms: float
    n_profiled_nodes: int
    n_unmatched: int
    profile_runs: int
    measure_s: float = 0.0

    @property
    def error_pct(self) -> float:
        """(predicted - measured) / measured latency, in %."""
        return (self.estimate.latency_ms - self.measured.latency_ms) / self.measured.latency_ms * 100

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """What `hase predict --measure --json` prints for one model: the prediction, and `measured`."""
        return {**self.estimate.to_dict(top), "measured": self.measured_dict()}

    def measured_dict(self) -> dict[str, Any]:
        """The measurement, its configuration and host, the error, and the kernels predicted vs in-model."""
        return {**self.measured.to_dict(), "error_pct": self.error_pct,
                "config": {**dataclasses.asdict(self.ep), "provider": self.ep.provider},
                "host": self.device_meta, "api": "iobinding", "measure_s": self.measure_s,
                "kernels": {"measured": "ORT kernel_time in the model (profiled run)",
                            "profile_runs": self.profile_runs, "profile_warmup": PROFILE_WARMUP,
                            "kernel_time_sum_ms": self.kernel_time_sum_ms,
                            "sum_kernel_pred_ms": self.estimate.sum_ms, "n_profiled_nodes": self.n_profiled_nodes,
                            "n_predicted_not_profiled": self.n_unmatched,
                            "top": [k.to_dict() for k in self.kernels]}}


def check_prediction(path: str | Path, bundle: PredictorBundle, target: str | None = None,
                     input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                     free_dims: Mapping[str, int] | None = None, *, policy: BlockPolicy | None = None,
                     top: int = 10, profile_runs: int = 1, estimate: ModelEstimate | None = None,
                     gate: Gate | None = None) -> PredictionCheck:
    """Predict `path` (unless `estimate` is given), measure it in the predictor's configuration (with a core
    `gate`, only while the host gives its threads their cores), and compare its `top` slowest predicted kernels
    with their in-model time from `profile_runs` profiled runs (0: no profiled run, so no in-model kernel times:
    every `KernelCheck.measured_ms` is None)."""

    shapes = resolve_input_shapes(path, input_shapes or {}, free_dims or {})
    est = estimate if estimate is not None else estimate_model(path, bundle, target, shapes)
    ep = bundle.ep_config()
    t0 = time.perf_counter()
    measured = measure_latency(path, ep, shapes, policy, gate=gate)
    in_model = kernel_times_ms(path, ep, shapes, profile_runs, est) if profile_runs > 0 else {}
    checks = tuple(KernelCheck(k.node_name, k.op_type, k.kernel_id, k.pred_ms, in_model.get(k.node_name))
                   for k in est.top(top))
    unmatched = sum(1 for k in est.kernels if k.node_name not in in_model)
    return PredictionCheck(est, measured, ep, sessions.device_metadata(ep), checks, sum(in_model.values()),
                           len(in_model), unmatched, profile_runs, time.perf_counter() - t0)


CheckResult = PredictionCheck | PredictFailure


def check_models(results: Sequence[ModelResult], bundle: PredictorBundle,
                 input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                 free_dims: Mapping[str, int] | None = None, *, policy: BlockPolicy | None = None, top: int = 10,
                 profile_runs: int = 1, gate: Gate | None = None) -> list[CheckResult]:
    """`check_prediction` of every estimate in `results`, in order (one core `gate` for all): a model that could
    not be predicted stays a PredictFailure, and one that cannot be measured (a HaseError) becomes one; the others
    go on."""
    out: list[CheckResult] = []
    for r in results:
        if isinstance(r, PredictFailure):
            out.append(r)
            continue
        try:
            out.append(check_prediction(r.model, bundle, r.target, input_shapes, free_dims, policy=policy, top=top,
                                        profile_runs=profile_runs, estimate=r, gate=gate))
        except HaseError as exc:
            out.append(PredictFailure(r.model, f"predicted {r.latency_ms:.3f} ms, not measured: {exc}"))
    return out


def kernel_times_ms(path: str | Path, ep: EPConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                    runs: int = 1, est: ModelEstimate | None = None) -> dict[str, float]:
    """Node name -> in-model ORT kernel_time (ms, median over `runs` profiled runs after PROFILE_WARMUP) of the
    model run in `ep`'s configuration; nodes nested in another node's span (subgraphs) are left out. With `est`,
    under the names of `est`'s kernels (`hase.profiling.names`: ORT names ReorderOutputs anew in each session)."""

    with tempfile.TemporaryDirectory(prefix="hase_check_") as tmp:
        result = profile_model(path, ep, runs=runs, warmup=PROFILE_WARMUP, input_shapes=input_shapes, workdir=tmp)
    summary = decompose.node_summary(result.events, skip_runs=result.skip_runs)
    summary = summary[~summary[decompose.NESTED]]
    times = {str(name): float(us) / 1e3 for name, us in zip(summary[decompose.NODE_NAME],
                                                           summary[decompose.KERNEL_TIME_US], strict=True)}
    if est is None:
        return times
    names = align_names(profiled_signatures(result.events), {k.node_name: (k.op_type, k.out_shape)
                                                              for k in est.kernels})
    return {names[n]: ms for n, ms in times.items() if n in names}
