"""A machine's speed signature: a fixed set of single-kernel probes spanning the op families, timed robustly.

Two machines that run the same ONNX Runtime build can still differ per op family (AVX-512 speeds up GEMM and
convolutions, not reductions; a smaller L2 slows the depthwise convolutions and the reorders first). The
probes — convolutions 1x1, 3x3 and depthwise; GEMM/MatMul of several shapes; the attention MatMul and
Softmax; element-wise Add and Mul; ReduceMean and LayerNormalization; an NCHWc reorder; MaxPool and
AveragePool — are each a one-node model built here, run in the device configuration's threads, and timed
in blocks (`hase.runtime.robust`: the minimum of the block medians, with the blocks' spread as its noise)
in about `budget_s` seconds together. `compare` puts two signatures side by side, family by family: the
time ratio, the noise both saw, and a verdict (the same machine within ±10 %, different, too noisy to tell).

    >>> here = measure_signature(EPConfig(name="cpu-1t"), budget_s=20)
    >>> [(v.family, round(v.time_ratio, 2), v.verdict) for v in compare(here, predictor_signature)]
    [('conv', 1.31, 'different'), ('gemm', 1.02, 'same'), ...]
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hase.errors import HaseError, first_line
from hase.runtime import sessions
from hase.runtime.robust import BlockPolicy, time_blocks
from hase.runtime.types import EPConfig, TimingPolicy

FAMILIES = ("conv", "gemm", "attention", "elementwise", "reduce", "reorder", "pool")
SAME, DIFFERENT, NOISY = "same", "different", "too noisy"
VERDICT_TEXT = {SAME: "same machine within ±10 %", DIFFERENT: "different", NOISY: "too noisy to tell"}
TOLERANCE = 0.10  # a family within this of the other machine is "the same machine"
DEFAULT_BUDGET_S = 20.0
NCHWC = "com.microsoft.nchwc"


def _model(nodes: list[onnx.NodeProto], inputs: Mapping[str, list[int]], out: str,
           weights: Mapping[str, np.ndarray] | None = None, opsets: Mapping[str, int] | None = None) -> onnx.ModelProto:
    """A model of `nodes` with float inputs of the given shapes, one output (shape left to ORT) and weights."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(a.shape) * 0.1).astype(np.float32), n)
             for n, a in (weights or {}).items()]
    g = helper.make_graph(nodes, "probe", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in inputs.items()],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], initializer=inits)
    ops = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, v) for d, v in (opsets or {}).items()]
    m = helper.make_model(g, opset_imports=ops, producer_name="hase-signature")
    m.ir_version = 8
    return m


def _w(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


def _conv(c_in: int, c_out: int, hw: int, k: int, group: int = 1) -> onnx.ModelProto:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k, k], pads=[k // 2] * 4, group=group)
    return _model([node], {"x": [1, c_in, hw, hw]}, "y", {"w": _w(c_out, c_in // group, k, k)})


def _gemm(m: int, k: int, n: int) -> onnx.ModelProto:
    node = helper.make_node("Gemm", ["a", "w", "b"], ["y"])
    return _model([node], {"a": [m, k]}, "y", {"w": _w(k, n), "b": _w(n)})


def _binary(op: str, a: list[int], b: list[int]) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, "y")


def _unary(op: str, shape: list[int], **attrs: Any) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": shape}, "y")


def _layernorm(shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)
    return _model([node], {"x": shape}, "y", {"s": _w(shape[-1]), "b": _w(shape[-1])})


def _reorder(c: int, hw: int) -> onnx.ModelProto:
    nodes = [helper.make_node("ReorderInput", ["x"], ["r"], domain=NCHWC),
             helper.make_node("ReorderOutput", ["r"], ["y"], channels=c, domain=NCHWC)]
    return _model(nodes, {"x": [1, c, hw, hw]}, "y", opsets={NCHWC: 1})


@dataclass(frozen=True)
class Probe:
    """One probe kernel: its name, op family and the function building its one-node model."""

    name: str
    family: str
    build: Callable[[], onnx.ModelProto]


PROBES: tuple[Probe, ...] = (
    Probe("conv1x1_64c_28", "conv", lambda: _conv(64, 64, 28, 1)),
    Probe("conv3x3_32c_28", "conv", lambda: _conv(32, 32, 28, 3)),
    Probe("conv_dw3x3_128c_28", "conv", lambda: _conv(128, 128, 28, 3, group=128)),
    Probe("gemm_64x256x256", "gemm", lambda: _gemm(64, 256, 256)),
    Probe("gemm_1x1024x1000", "gemm", lambda: _gemm(1, 1024, 1000)),
    Probe("gemm_512x64x256", "gemm", lambda: _gemm(512, 64, 256)),
    Probe("attn_matmul_4h_64x32", "attention", lambda: _binary("MatMul", [1, 4, 64, 32], [1, 4, 32, 64])),
    Probe("attn_softmax_4h_64", "attention", lambda: _unary("Softmax", [1, 4, 64, 64], axis=-1)),
    Probe("add_64c_56", "elementwise", lambda: _binary("Add", [1, 64, 56, 56], [1, 64, 56, 56])),
    Probe("mul_64c_56", "elementwise", lambda: _binary("Mul", [1, 64, 56, 56], [1, 64, 1, 1])),
    Probe("reducemean_64c_56", "reduce", lambda: _unary("ReduceMean", [1, 64, 56, 56], axes=[2, 3])),
    Probe("layernorm_128x256", "reduce", lambda: _layernorm([1, 128, 256])),
    Probe("nchwc_reorder_64c_56", "reorder", lambda: _reorder(64, 56)),
    Probe("maxpool3x3s2_64c_56", "pool", lambda: _unary("MaxPool", [1, 64, 56, 56], kernel_shape=[3, 3],
                                                        strides=[2, 2])),
    Probe("avgpool3x3s2_64c_56", "pool", lambda: _unary("AveragePool", [1, 64, 56, 56], kernel_shape=[3, 3],
                                                        strides=[2, 2])),
)


@dataclass(frozen=True)
class ProbeTiming:
    """One probe's time (ms, the minimum of its block medians), the blocks' spread and the runs timed; `error`
    says why a probe could not run here (an NCHWc reorder needs AVX2 or better), with ms 0."""

    name: str
    family: str
    ms: float
    spread: float
    n_runs: int
    error: str = ""


@dataclass(frozen=True)
class Signature:
    """A device configuration's speed signature on one host (its fingerprint digest), with what it cost."""

    device: str
    host_fp: str
    probes: tuple[ProbeTiming, ...]
    budget_s: float
    wall_s: float
    measured_at: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (what the store's `signatures` table and a predictor's manifest keep)."""
        return {"device": self.device, "host_fp": self.host_fp, "budget_s": self.budget_s, "wall_s": self.wall_s,
                "measured_at": self.measured_at,
                "probes": [{"name": p.name, "family": p.family, "ms": p.ms, "spread": p.spread, "n_runs": p.n_runs,
                            "error": p.error} for p in self.probes]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "speed signature") -> Signature:
        """The signature `to_dict` wrote; anything missing or mistyped is a HaseError naming `where`."""
        try:
            probes = tuple(ProbeTiming(str(p["name"]), str(p["family"]), float(p["ms"]), float(p["spread"]),
                                       int(p["n_runs"]), str(p.get("error", ""))) for p in d["probes"])
            return cls(str(d["device"]), str(d["host_fp"]), probes, float(d["budget_s"]), float(d["wall_s"]),
                       float(d["measured_at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise HaseError(f"{where} is incomplete or mistyped ({exc!r}): measure it again") from None


def probe_policy(budget_s: float, n_probes: int) -> BlockPolicy:
    """Blocks that fit `n_probes` probes in about `budget_s` seconds: 5 blocks each, warm-up runs apart."""
    per = max(budget_s, 0.1) / max(n_probes, 1) * 0.8  # a fifth for building the sessions and the warm-up
    block = TimingPolicy(warmup=0, min_runs=3, max_runs=100_000, min_time_s=per / 5, max_time_s=per / 5)
    return BlockPolicy(warmup=3, blocks=5, block=block, noise_bound=TOLERANCE)


def measure_probe(probe: Probe, ep: EPConfig, policy: BlockPolicy) -> ProbeTiming:
    """Time one probe on `ep` (its threads; graph optimizations off: the model is the kernel); a probe ONNX
    Runtime cannot run here comes back with its reason."""
    model = probe.build()
    rng = np.random.default_rng(1)
    try:
        session = sessions.make_session(model.SerializeToString(), ep, opt_level="disabled")
        feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
                 for i in model.graph.input}
        runner = sessions.BoundRunner(session, feeds, ep)
        runner.run()
    except Exception as exc:  # ORT raises several types; a probe that cannot run is reported, not fatal
        return ProbeTiming(probe.name, probe.family, 0.0, 0.0, 0, first_line(exc)[:200])
    t = time_blocks(runner.run, policy)
    return ProbeTiming(probe.name, probe.family, t.latency_ms, t.spread, t.n_runs)


def measure_signature(ep: EPConfig, budget_s: float = DEFAULT_BUDGET_S, host_fp: str = "",
                      probes: tuple[Probe, ...] = PROBES) -> Signature:
    """Every probe timed on `ep` in about `budget_s` seconds together; `host_fp` names the host (this one's
    fingerprint digest when empty)."""
    if not host_fp:
        from hase.runtime.host import host_fingerprint  # noqa: PLC0415 - reads /proc once, only when measuring

        host_fp = host_fingerprint().digest
    t0 = time.perf_counter()
    policy = probe_policy(budget_s, len(probes))
    timings = tuple(measure_probe(p, ep, policy) for p in probes)
    return Signature(ep.name, host_fp, timings, budget_s, time.perf_counter() - t0, time.time())


@dataclass(frozen=True)
class FamilyVerdict:
    """One op family of two signatures: this host's time over the other machine's (geometric mean of its probes;
    1.3 = 30 % slower here), the larger block spread either side saw, and the verdict (SAME, DIFFERENT, NOISY)."""

    family: str
    time_ratio: float
    noise: float
    n_probes: int
    verdict: str

    @property
    def text(self) -> str:
        """The verdict in words."""
        return VERDICT_TEXT[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the verdict's words included."""
        return {"family": self.family, "time_ratio": self.time_ratio, "noise": self.noise, "n_probes": self.n_probes,
                "verdict": self.verdict, "verdict_text": self.text}


def verdict(time_ratio: float, noise: float, tolerance: float = TOLERANCE) -> str:
    """SAME when within ±tolerance and the noise is under it; DIFFERENT when the gap is larger than the tolerance
    plus the noise; NOISY otherwise (the noise could explain the gap, or hide one)."""
    gap = abs(math.log(time_ratio))
    if gap <= math.log1p(tolerance) and noise <= tolerance:
        return SAME
    if gap > math.log1p(tolerance) + noise:
        return DIFFERENT
    return NOISY


def compare(here: Signature, there: Signature) -> list[FamilyVerdict]:
    """Per op family (FAMILIES order), `here` against `there` over the probes both ran; a family with no such probe
    is left out."""
    theirs = {p.name: p for p in there.probes if not p.error and p.ms > 0}
    out = []
    for family in FAMILIES:
        pairs = [(p, theirs[p.name]) for p in here.probes
                 if p.family == family and not p.error and p.ms > 0 and p.name in theirs]
        if not pairs:
            continue
        ratio = math.exp(sum(math.log(a.ms / b.ms) for a, b in pairs) / len(pairs))
        noise = max(max(a.spread, b.spread) for a, b in pairs)
        out.append(FamilyVerdict(family, ratio, noise, len(pairs), verdict(ratio, noise)))
    return out
