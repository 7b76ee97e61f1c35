"""The kernel sampler: block-model variants drawn over the kernel sizes real models use (nn-Meter's idea).

A zoo config's `[sampler]` table asks for `kernels` sampled blocks, shared among the block families
(`hase.zoo.blocks`) by `[sampler.shares]`. Each dimension of a sample is drawn from the measured distribution
of that dimension in real graphs (`configs/kernel_ranges.csv`, `hase.sampler.ranges`), except for a `uniform` share
of the samples, drawn log-uniformly over the observed range (coverage beyond the common sizes). A sample whose
kernel costs more than `max_mflop` is drawn again, so the collect budget stays bounded. The same config and
seed always give the same samples.

    [sampler]
    ranges = "kernel_ranges.csv"   # relative to the config file
    kernels = 240                  # first-round blocks
    seed = 0
    uniform = 0.25
    max_mflop = 800.0
    rounds = 1                     # adaptive rounds (`hase zoo --refine`), and their settings
    neighbours = 20
    threshold = 0.10
    max_points = 15
    folds = 5
    target = "warm"
    [sampler.shares]
    conv = 0.35
    matmul = 0.25
    ...

A family left out of `[sampler.shares]` draws nothing; adding one to an existing config with `kernels` raised by the
same proportion keeps every other family's samples as they were (each family has its own random stream), so a
collect measures only the new blocks.
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hase.errors import HaseError
from hase.sampler.ranges import KernelRanges, read_ranges
from hase.zoo.blocks import (
    ACTIVATION_OPS,
    COVERAGE_OPS,
    ELTWISE_OPS,
    INDEX_KINDS,
    MOVEMENT_OPS,
    POOL_KINDS,
    RECURRENT_CELLS,
    SAMPLED_EINSUMS,
    SOFTMAX_OPS,
    TRANSPOSE_OPS,
    block_flops,
)
from hase.zoo.registry import ModelSpec, get_family

#: sampler family -> the kernel-ranges family it samples from
SOURCES = {"conv": "conv", "matmul": "matmul", "attention": "batched_matmul", "norm": "norm", "pool": "pool",
           "eltwise": "eltwise", "index": "movement", "conv_nchw": "conv", "einsum": "batched_matmul",
           "coverage": "eltwise", "activation": "eltwise", "recurrent": "matmul", "upsample": "movement",
           "rmsnorm": "norm", "conv1d": "conv", "scan": "matmul"}
#: sampler family -> the block family (`sampled-<name>`) that builds its samples, where the two differ
BLOCKS = {"conv_nchw": "conv", "coverage": "eltwise", "activation": "eltwise", "upsample": "resize"}
DEFAULT_SHARES = {"conv": 0.35, "matmul": 0.25, "attention": 0.1, "norm": 0.08, "pool": 0.07, "eltwise": 0.15,
                  "index": 0.06, "conv_nchw": 0.05, "einsum": 0.04, "coverage": 0.05, "activation": 0.05,
                  "recurrent": 0.02}
# Rare in real graphs but not predictable from their neighbours: a forest that never saw a grouped convolution
# (14 of the 1,059 conv kernels of kernel_ranges.csv, RegNets' and DLA's) predicted RegNets 1.6-2.4x too slow,
# one that never saw a Resize put CrossViT's bicubic 240->224 resize (21 ms, a third of the model) at 0.05 ms.
# So these shares of the conv and element-wise draws are grouped convolutions (group widths as RegNet/ResNeXt
# use) and Resize (nearest, linear, cubic), whatever their share in the ranges.
GROUPED_SHARE = 0.15
GROUP_WIDTHS = (8, 16, 24, 32, 48, 64)
RESIZE_SHARE = 0.25
RESIZE_OPS = tuple(op for op in MOVEMENT_OPS if op.startswith("Resize"))
# steps, batch, input and hidden sizes of sampled LSTMs and GRUs (speech and OCR models: 50-500 frames or columns,
# 64-1024 units)
RECURRENT_RANGES = {"seq": (4, 512), "batch": (1, 8), "input": (16, 1024), "hidden": (16, 1024)}
# Upsampling as FPN/DBNet necks and decoders write it (`upsample`, in turn): torch's nearest by 2, 4 and 8 (ORT's
# quick exact-2x copy and its general path) and bilinear by 2 and 4; channels (batch folded in: the same copy)
# and input side log-uniform over these
UPSAMPLE_KINDS = (("nearest-floor", 2), ("nearest-floor", 4), ("nearest-floor", 8), ("linear", 2), ("linear", 4))
UPSAMPLE_RANGES = {"channels": (8, 768), "side": (5, 80)}
# 1-D convolutions as audio and time-series models write them (`conv1d`, in turn): depthwise k=7 (ConvNeXt-1D blocks
# of codecs), dense k=3, pointwise, and strided downsampling (kernel 2 x stride, wav2vec2-style); channels and
# length log-uniform over these (the ranges' convs are 2-D)
CONV1D_KINDS = ("depthwise", "dense", "pointwise", "strided")
CONV1D_RANGES = {"channels": (16, 1024), "length": (32, 48000)}
# unrolled selective scans (`scan`: Mamba's slow path as torch.onnx writes it), log-uniform over these
SCAN_RANGES = {"steps": (8, 128), "channels": (16, 1024), "state": (4, 16)}
# PoolFormer's token mixers (pool(x) - x, a 3x3 stride-1 AveragePool without the padding in the mean, then a Sub
# over the whole activation) are stride-1 average pools in the ranges: this share of those is drawn as a mixer
MIXER_SHARE = 0.5


def _half_on(favoured: str, ops: tuple[str, ...]) -> tuple[float, ...]:
    """Choice weights: half on `favoured`, the other half shared by the rest of `ops`."""
    return tuple(0.5 if op == favoured else 0.5 / (len(ops) - 1) for op in ops)


# cubic: ~20x the time per element of the other two, the one a few points cannot pin down
RESIZE_WEIGHTS = _half_on("ResizeCubic", RESIZE_OPS)
# Softmax over a non-last axis (SOFTMAX_OPS; CoaT's keys over tokens: 5.9 ms predicted 0.5 ms by a forest that
# had only seen last-axis softmaxes), sized as a head-split tensor of the movement ranges
SOFTMAX_TOKENS_SHARE = 0.12
# head transposes (TRANSPOSE_OPS): ORT's time per element differs 9x between permutations of the same data
HEAD_TRANSPOSE_SHARE = 0.18
TRANSPOSE_WEIGHTS = _half_on("Transpose20341", TRANSPOSE_OPS)
# Convolutions whose channels are no multiple of 8 stay in plain NCHW (ORT's NCHWc transformer wants whole channel
# blocks): MixNet splits 480 channels into depthwise groups of 90 and 9x9 windows, 10x the time per MAC of an NCHWc
# depthwise conv. The conv sampler rounds channels to multiples of 8, so `conv_nchw` draws these: depthwise
# (`NCHW_DEPTHWISE_SHARE` of them, kernels `NCHW_KERNELS`) or dense, channels just off a multiple of 8.
NCHW_DEPTHWISE_SHARE = 0.7
NCHW_KERNELS = (3, 5, 7, 9)
EINSUM_KINDS = SAMPLED_EINSUMS
_ROUND8 = frozenset({"c_in", "c_out", "channels", "k", "n", "hidden", "width", "group_width"})
_TRIES = 200


@dataclass(frozen=True)
class SamplerConfig:
    """The checked `[sampler]` table of a zoo config (see the module docstring)."""

    ranges: Path
    kernels: int = 240
    seed: int = 0
    uniform: float = 0.25
    max_mflop: float = 800.0
    shares: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    rounds: int = 1
    neighbours: int = 20
    threshold: float = 0.10
    max_points: int = 15
    folds: int = 5
    target: str = "warm"


_NUMBERS: dict[str, tuple[type[int] | type[float], float, float]] = {
    "kernels": (int, 0, 20_000), "seed": (int, 0, 2**32 - 1), "uniform": (float, 0.0, 1.0),
    "max_mflop": (float, 0.001, 1e6), "rounds": (int, 0, 10), "neighbours": (int, 1, 1000),
    "threshold": (float, 0.0, 10.0), "max_points": (int, 0, 10_000), "folds": (int, 2, 50)}


def parse_sampler(table: Any, config_dir: Path, where: str) -> SamplerConfig:
    """Check a `[sampler]` table; `ranges` is taken relative to the config's folder."""
    if not isinstance(table, Mapping):
        raise HaseError(f"{where}: [sampler] must be a table")
    known = set(_NUMBERS) | {"ranges", "shares", "target"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise HaseError(f"{where}: unknown [sampler] key(s) {unknown}: use some of {sorted(known)}")
    values: dict[str, Any] = {}
    for key, (kind, lo, hi) in _NUMBERS.items():
        if key in table:
            value = table[key]
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if type(value) is not kind or not lo <= value <= hi:
                raise HaseError(f"{where}: [sampler] {key} = {value!r} is invalid: use a {kind.__name__} "
                                f"from {lo:g} to {hi:g}")
            values[key] = value
    shares = _shares(table.get("shares", DEFAULT_SHARES), where)
    target = table.get("target", "warm")
    if target not in ("warm", "cold", "span"):
        raise HaseError(f"{where}: [sampler] target = {target!r} is invalid: use warm, cold or span")
    ranges = table.get("ranges", "kernel_ranges.csv")
    if not isinstance(ranges, str) or not ranges:
        raise HaseError(f"{where}: [sampler] ranges must be the path of a kernel ranges CSV")
    return SamplerConfig(ranges=config_dir / ranges, shares=shares, target=target, **values)


def _shares(raw: Any, where: str) -> dict[str, float]:
    if not isinstance(raw, Mapping) or not raw:
        raise HaseError(f"{where}: [sampler.shares] must map block families {sorted(SOURCES)} to shares")
    out = {}
    for name, share in raw.items():
        if name not in SOURCES:
            raise HaseError(f"{where}: [sampler.shares] {name!r} is not a block family: use some of {sorted(SOURCES)}")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or share < 0:
            raise HaseError(f"{where}: [sampler.shares] {name} = {share!r} is invalid: use a number >= 0")
        out[name] = float(share)
    if sum(out.values()) <= 0:
        raise HaseError(f"{where}: [sampler.shares] are all 0: give at least one block family a share")
    return out


def family_counts(cfg: SamplerConfig) -> dict[str, int]:
    """How many blocks each family gets of `cfg.kernels` (largest remainders, so they add up exactly)."""
    total = sum(cfg.shares.values())
    exact = {f: cfg.kernels * s / total for f, s in cfg.shares.items()}
    counts = {f: math.floor(v) for f, v in exact.items()}
    for f in sorted(exact, key=lambda f: (counts[f] - exact[f], f))[: cfg.kernels - sum(counts.values())]:
        counts[f] += 1
    return counts


def sample_specs(cfg: SamplerConfig, ranges: KernelRanges | None = None) -> list[ModelSpec]:
    """The first round: `cfg.kernels` distinct block specs, deterministic given the config and its seed."""
    ranges = ranges if ranges is not None else read_ranges(cfg.ranges)
    specs: dict[str, ModelSpec] = {}
    for name, count in family_counts(cfg).items():
        rng = np.random.default_rng([cfg.seed, zlib.crc32(name.encode())])
        made = 0
        for _ in range(count * _TRIES):
            if made == count:
                break
            draw = Draw(rng, ranges, SOURCES[name], rng.random() < cfg.uniform, made)
            spec = _fit(name, SAMPLERS[name](draw), cfg)
            if spec is not None and spec.name not in specs:
                specs[spec.name] = spec
                made += 1
    return list(specs.values())


def _fit(block: str, sample: BlockParams, cfg: SamplerConfig) -> ModelSpec | None:
    """The spec of a sample, or None when it costs more than max_mflop or the family refuses it."""
    family = f"sampled-{BLOCKS.get(block, block)}"
    params = block_values(sample)
    if block_flops(family, params) > cfg.max_mflop * 1e6:
        return None
    try:
        return get_family(family).spec(params)
    except HaseError:
        return None


@dataclass(frozen=True)
class ConvParams:
    """A sampled Conv block (`sampled-conv`): NCHW input `batch x c_in x spatial x spatial`, a square `kernel`,
    `groups` (1 dense, c_in depthwise, else grouped), and a Relu after it or not (`act`)."""

    batch: int
    c_in: int
    c_out: int
    spatial: int
    kernel: int
    stride: int
    dilation: int
    groups: int
    act: str


@dataclass(frozen=True)
class MatmulParams:
    """A sampled MatMul block (`sampled-matmul`): `rows x k` by `k x n`, as a rank-2 or rank-3 MatMul, with a
    GELU (`erf`, `tanh`) after it or none."""

    rows: int
    k: int
    n: int
    rank: int
    gelu: str


@dataclass(frozen=True)
class AttentionParams:
    """A sampled batched MatMul (`sampled-attention`): `batch` products of `m x k` by `k x n`."""

    batch: int
    m: int
    k: int
    n: int


@dataclass(frozen=True)
class NormParams:
    """A sampled LayerNormalization block (`sampled-norm`) over `hidden`, with a residual Add before it (`skip`)."""

    rows: int
    hidden: int
    skip: int


@dataclass(frozen=True)
class PoolParams:
    """A sampled pooling block (`sampled-pool`): `kind` max, avg, global, window, mixer (PoolFormer's) or se
    (squeeze-and-excite, listed only)."""

    batch: int
    channels: int
    spatial: int
    kernel: int
    stride: int
    kind: str


@dataclass(frozen=True)
class EltwiseParams:
    """A sampled element-wise or data-movement block (`sampled-eltwise`): `op` over `rows x width`."""

    rows: int
    width: int
    op: str


@dataclass(frozen=True)
class EinsumParams:
    """A sampled Einsum (`sampled-einsum`): `batch` products of m x k by k x n written as `eq` (attention scores,
    context, relative positions: `hase.zoo.blocks.EINSUM_EQUATIONS`)."""

    batch: int
    m: int
    k: int
    n: int
    eq: str


@dataclass(frozen=True)
class IndexParams:
    """A sampled Gather or ScatterND (`sampled-index`) of `kind` (`hase.zoo.blocks.INDEX_KINDS`) over rows x width."""

    rows: int
    width: int
    kind: str


@dataclass(frozen=True)
class RecurrentParams:
    """A sampled recurrent layer (`sampled-recurrent`): an LSTM or GRU (`cell`) of `hidden` units over `seq` steps of
    `batch` x `input`, one direction or two (`dirs`)."""

    seq: int
    batch: int
    input: int
    hidden: int
    cell: str
    dirs: int


@dataclass(frozen=True)
class ResizeParams:
    """A sampled Resize (`sampled-resize`) of [1, channels, side, side] to [1, channels, out, out] in `mode`
    (`hase.zoo.blocks.RESIZE_MODE_NAMES`)."""

    channels: int
    side: int
    out: int
    mode: str


@dataclass(frozen=True)
class Conv1dParams:
    """A sampled 1-D Conv (`sampled-conv1d`) over [batch, c_in, length]."""

    batch: int
    c_in: int
    c_out: int
    length: int
    kernel: int
    stride: int
    groups: int


@dataclass(frozen=True)
class ScanParams:
    """A sampled unrolled selective scan (`sampled-scan`): `steps` of [1, channels, state]."""

    steps: int
    channels: int
    state: int


@dataclass(frozen=True)
class RmsNormParams:
    """A sampled RMSNorm (`sampled-rmsnorm`) over [1, rows, hidden]."""

    rows: int
    hidden: int


BlockParams = (ConvParams | MatmulParams | AttentionParams | NormParams | PoolParams | EltwiseParams | IndexParams
               | EinsumParams | RecurrentParams | ResizeParams | RmsNormParams | Conv1dParams | ScanParams)


def block_values(sample: BlockParams) -> dict[str, Any]:
    """A block's parameter record as the zoo's family registry takes it (a `ModelSpec`'s values by name), e.g.
    `{"rows": 64, "k": 768, "n": 3072, "rank": 3, "gelu": "none"}` for a `MatmulParams`."""
    return dataclasses.asdict(sample)


@dataclass
class Draw:
    """Draws the dimensions of one sample: from the observed distribution, or log-uniform over its range."""

    rng: np.random.Generator
    ranges: KernelRanges
    source: str
    uniform: bool
    index: int = 0  # how many samples of the family were drawn before this one (a family may cycle through kinds)

    def num(self, dim: str, source: str | None = None) -> int:
        """A numeric dimension."""
        values, counts = self.ranges.numeric(source or self.source, dim)
        if not self.uniform:
            return int(self.rng.choice(values, p=np.asarray(counts) / sum(counts)))
        lo, hi = math.log(max(min(values), 1)), math.log(max(*values, 1))
        value = round(math.exp(self.rng.uniform(lo, hi)))
        if dim in _ROUND8 and value >= 16:
            value = int(round(value / 8) * 8)
        return max(1, value)

    def log_uniform(self, lo: int, hi: int) -> int:
        """An integer log-uniform over [lo, hi] (for dimensions the ranges do not hold)."""
        return round(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))

    def cat(self, dim: str, allowed: tuple[str, ...] | None = None, source: str | None = None) -> str:
        """A categorical dimension, restricted to `allowed` values when given (uniform over them if none seen)."""
        values, counts = self.ranges.values(source or self.source, dim)
        pairs = [(v, c) for v, c in zip(values, counts, strict=True) if allowed is None or v in allowed]
        if not pairs:
            return str(self.rng.choice(list(allowed or values)))
        weights = np.ones(len(pairs)) if self.uniform else np.asarray([c for _, c in pairs], dtype=float)
        return str(pairs[int(self.rng.choice(len(pairs), p=weights / weights.sum()))][0])


def _conv(d: Draw) -> ConvParams:
    batch, c_in, c_out, spatial, kernel, stride, dilation = (
        d.num(k) for k in ("batch", "c_in", "c_out", "spatial", "kernel", "stride", "dilation"))
    mode = "grouped" if d.rng.random() < GROUPED_SHARE else d.cat("groups")
    if mode == "depthwise":
        c_out, groups = c_in, c_in
    elif mode == "grouped":
        width = int(d.rng.choice(GROUP_WIDTHS))  # the ranges' group_width is mostly dense convs' c_in: not these
        c_in = max(2 * width, c_in // width * width)
        groups = c_in // width
        c_out = max(groups, c_out // groups * groups)
    else:
        groups = 1
    act = "relu" if d.rng.random() < 0.7 else "none"
    return ConvParams(batch, c_in, c_out, max(spatial, kernel), kernel, stride, dilation, groups, act)


def _off8(c: int, rng: np.random.Generator) -> int:
    """`c` moved to a channel count that is no multiple of 8 (never below 3)."""
    c = max(3, c - int(rng.integers(1, 8))) if c > 8 else max(3, c)
    return c + 1 if c % 8 == 0 else c


def _conv_nchw(d: Draw) -> ConvParams:
    batch, c_in, c_out, spatial, stride = (d.num(k) for k in ("batch", "c_in", "c_out", "spatial", "stride"))
    c_in = _off8(c_in, d.rng)
    if d.rng.random() < NCHW_DEPTHWISE_SHARE:
        kernel = int(d.rng.choice(NCHW_KERNELS))
        c_out, groups = c_in, c_in
    else:
        kernel, groups = d.num("kernel"), 1
    act = "relu" if d.rng.random() < 0.7 else "none"
    return ConvParams(batch, c_in, c_out, max(spatial, kernel), kernel, min(stride, 2), 1, groups, act)


def _matmul(d: Draw) -> MatmulParams:
    rows, k, n = (d.num(dim) for dim in ("rows", "k", "n"))
    rank = 3 if rows > 1 and d.rng.random() < 0.7 else 2
    return MatmulParams(rows, k, n, rank, str(d.rng.choice(["none", "erf", "tanh"], p=[0.6, 0.3, 0.1])))


def _attention(d: Draw) -> AttentionParams:
    batch, m, k, n = (d.num(dim) for dim in ("batch", "m", "k", "n"))
    return AttentionParams(batch, m, k, n)


def _norm(d: Draw) -> NormParams:
    rows, hidden = d.num("rows"), d.num("hidden")
    return NormParams(rows, hidden, int(d.cat("skip", ("0", "1"))))


def _rmsnorm(d: Draw) -> RmsNormParams:
    """Sized as the ranges' LayerNormalizations (rows, hidden)."""
    return RmsNormParams(d.num("rows"), d.num("hidden"))


def _pool(d: Draw) -> PoolParams:
    batch, channels, spatial, kernel, stride = (d.num(k) for k in ("batch", "channels", "spatial", "kernel", "stride"))
    kind = d.cat("kind", POOL_KINDS)  # the ranges have max, avg, global and window (an AveragePool over the plane)
    stride = min(stride, 4)
    if kind in ("global", "window"):
        kernel = stride = 1  # unused: one name (and one model) per global pool
    elif kind == "avg" and stride == 1 and kernel % 2 == 1 and d.rng.random() < MIXER_SHARE:
        # a mixer keeps the plane's size (pool(x) - x): only an odd window centred on each pixel does
        kind = "mixer"
    return PoolParams(batch, channels, spatial, kernel, stride, kind)


def _eltwise(d: Draw) -> EltwiseParams:
    """Resize, a softmax over tokens or a head transpose in fixed shares (sized as data movement), else an
    element-wise or data-movement op as the ranges have them."""
    r = d.rng.random()
    if r < RESIZE_SHARE:
        op, source = str(d.rng.choice(RESIZE_OPS, p=RESIZE_WEIGHTS)), "movement"
    elif r < RESIZE_SHARE + SOFTMAX_TOKENS_SHARE:
        op, source = str(d.rng.choice(SOFTMAX_OPS)), "movement"
    elif r < RESIZE_SHARE + SOFTMAX_TOKENS_SHARE + HEAD_TRANSPOSE_SHARE:
        op, source = str(d.rng.choice(TRANSPOSE_OPS, p=TRANSPOSE_WEIGHTS)), "movement"
    else:
        source = "movement" if d.rng.random() < 0.3 else "eltwise"
        op = d.cat("op", ELTWISE_OPS, source=source)
    rows, width = d.num("rows", source), d.num("width", source)
    return EltwiseParams(rows, width, op)


def _coverage(d: Draw) -> EltwiseParams:
    """The ops real graphs run and no zoo family writes (`COVERAGE_OPS`) in turn, so each gets as many samples,
    sized as the ranges' element-wise ops."""
    return EltwiseParams(d.num("rows"), d.num("width"), COVERAGE_OPS[d.index % len(COVERAGE_OPS)])


def _activation(d: Draw) -> EltwiseParams:
    """The element-wise ops no other family draws (`ACTIVATION_OPS`) in turn, so each gets as many samples (and
    enough for a forest of its own), sized as the ranges' element-wise ops."""
    return EltwiseParams(d.num("rows"), d.num("width"), ACTIVATION_OPS[d.index % len(ACTIVATION_OPS)])


def _recurrent(d: Draw) -> RecurrentParams:
    """LSTM and GRU in turn, a third of them bidirectional; steps, input and hidden sizes log-uniform over
    `RECURRENT_RANGES` (the kernel ranges hold no recurrent layer: the 45 real models have none)."""
    cells = tuple(RECURRENT_CELLS)
    seq, batch, inp, hidden = (d.log_uniform(*RECURRENT_RANGES[dim]) for dim in ("seq", "batch", "input", "hidden"))
    return RecurrentParams(seq, batch, inp, hidden, cells[d.index % len(cells)], 2 if d.rng.random() < 1 / 3 else 1)


def _upsample(d: Draw) -> ResizeParams:
    """Nearest (as torch writes it) and bilinear upsampling in turn (`UPSAMPLE_KINDS`); the ranges hold a handful of
    Resizes (their 45 models have few necks), so sizes are log-uniform over `UPSAMPLE_RANGES`."""
    mode, factor = UPSAMPLE_KINDS[d.index % len(UPSAMPLE_KINDS)]
    channels, side = (d.log_uniform(*UPSAMPLE_RANGES[dim]) for dim in ("channels", "side"))
    return ResizeParams(channels, side, side * factor, mode)


def _conv1d(d: Draw) -> Conv1dParams:
    """The kinds of `CONV1D_KINDS` in turn, channels rounded to 8 (as real widths are)."""
    def channels() -> int:
        return max(8, round(d.log_uniform(*CONV1D_RANGES["channels"]) / 8) * 8)

    kind = CONV1D_KINDS[d.index % len(CONV1D_KINDS)]
    c_in, length = channels(), d.log_uniform(*CONV1D_RANGES["length"])
    if kind == "depthwise":
        return Conv1dParams(1, c_in, c_in, length, 7, 1, c_in)
    if kind == "strided":
        stride = int(d.rng.choice((2, 4, 5)))
        return Conv1dParams(1, c_in, channels(), length, 2 * stride, stride, 1)
    return Conv1dParams(1, c_in, channels(), length, 3 if kind == "dense" else 1, 1, 1)


def _scan(d: Draw) -> ScanParams:
    """Steps, channels and state log-uniform over `SCAN_RANGES` (the ranges hold no scan)."""
    return ScanParams(*(d.log_uniform(*SCAN_RANGES[dim]) for dim in ("steps", "channels", "state")))


def _index(d: Draw) -> IndexParams:
    """A Gather or ScatterND of each kind equally often, sized as the ranges' data movement."""
    return IndexParams(d.num("rows"), d.num("width"), str(d.rng.choice(INDEX_KINDS)))


def _einsum(d: Draw) -> EinsumParams:
    batch, m, k, n = (d.num(dim) for dim in ("batch", "m", "k", "n"))
    return EinsumParams(batch, m, k, n, str(d.rng.choice(EINSUM_KINDS)))


SAMPLERS: dict[str, Callable[[Draw], BlockParams]] = {
    "conv": _conv, "matmul": _matmul, "attention": _attention, "norm": _norm, "pool": _pool, "eltwise": _eltwise,
    "index": _index, "conv_nchw": _conv_nchw, "einsum": _einsum, "coverage": _coverage, "activation": _activation,
    "recurrent": _recurrent, "upsample": _upsample,
    "rmsnorm": _rmsnorm, "conv1d": _conv1d, "scan": _scan}
