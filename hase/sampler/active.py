"""Active ordering of a budgeted collect: the sampled blocks real graphs spend most time in and the surrogate is
least sure of go first (`hase collect --order active`).

A fifteen-minute collect on two cores measures about 830 of the zoo's 996 models; which ones it leaves out is
the order's choice. The coverage order (`hase.zoo.order`) takes the blocks in turn, family by family. This one
keeps the architecture variants first (their spans are real graphs', and the calibration fits whole models), then
measures `seed` blocks of each sampled family in the file's order, and then, `batch` blocks at a time, the blocks of
highest score: the family's share of real graphs' in-model time (its sampled op types' share of the node spans of
the architecture models measured so far, at least `floor`) times the surrogate's doubt about the block (the spread
over the trees of a small random forest fitted, per family, on the family's measured blocks: their sampler
parameters and log FLOPs against the log of their measured latency). Each chosen block lowers the score of the
rest of its family by `spread` (a batch is not all one family's), and the forests are fitted again after every
batch on what the store now holds. nn-Meter's adaptive sampler refines around its worst points after a whole
round (`hase.sampler.refine`); this is the same idea inside one budgeted run. Blocks the store already measured
go first (they are settled: visiting them costs nothing), so a rerun goes on where the last one stopped.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hase.measure.store import Store
from hase.zoo.blocks import MAIN_OPS, SAMPLED_PREFIX, block_flops, is_sampled
from hase.zoo.order import round_robin
from hase.zoo.registry import ModelSpec

__all__ = ["ActivePolicy", "active_order", "block_features", "family_weights", "scores", "store_order"]

#: measured latency (ms) of the zoo's models so far, by spec name: what the store holds for this device
Measured = Callable[[], Mapping[str, float]]
#: in-model time (ms, summed node spans) of the real-shaped (architecture) models measured so far, by op type
OpTime = Callable[[], Mapping[str, float]]


@dataclass(frozen=True)
class ActivePolicy:
    """How the active order chooses (see the module docstring)."""

    seed: int = 3  # blocks of each sampled family measured first, in the file's order
    batch: int = 24  # blocks chosen between two fits of the surrogate
    trees: int = 32  # trees of each family's surrogate forest
    floor: float = 0.02  # the least weight a family keeps, whatever real graphs spend in it
    spread: float = 0.8  # each block chosen multiplies its family's remaining scores by this, within a batch
    min_points: int = 4  # a family with fewer measured blocks is not fitted: its blocks keep the highest doubt
    random_state: int = 0


def block_features(spec: ModelSpec) -> np.ndarray:
    """A sampled block's parameters as numbers (sizes as log(1 + size), flags 0/1, words by a stable code) and
    the log of its FLOPs (`hase.zoo.blocks.block_flops`): what the surrogate reads."""
    values: list[float] = []
    for _, v in spec.params:
        if isinstance(v, bool):
            values.append(float(v))
        elif isinstance(v, (int, float)):
            values.append(math.log1p(max(float(v), 0.0)))
        else:
            values.append(float(zlib.crc32(str(v).encode()) % 1000))
    values.append(math.log1p(block_flops(spec.family, spec.kwargs())))
    return np.asarray(values, dtype=float)


def family_weights(op_time: Mapping[str, float], families: Sequence[str], floor: float) -> dict[str, float]:
    """Each sampled family's share of real graphs' in-model time: the time of its sampled op types
    (`hase.zoo.blocks.MAIN_OPS`), an op type several families sample split evenly among them; at least `floor`.

        >>> family_weights({"Conv": 6.0, "MatMul": 3.0, "Add": 1.0}, ["sampled-conv", "sampled-matmul"], 0.02)
        {'sampled-conv': 0.6, 'sampled-matmul': 0.3}
    """
    total = sum(v for v in op_time.values() if v > 0)
    claims: dict[str, int] = {}
    for f in families:
        for op in MAIN_OPS.get(f, ()):
            claims[op] = claims.get(op, 0) + 1
    out = {}
    for f in families:
        share = sum(op_time.get(op, 0.0) / claims[op] for op in MAIN_OPS.get(f, ())) / total if total > 0 else 0.0
        out[f] = max(share, floor)
    return out


def scores(candidates: Sequence[ModelSpec], measured: Mapping[str, float], specs: Mapping[str, ModelSpec],
           weights: Mapping[str, float], policy: ActivePolicy) -> np.ndarray:
    """Each candidate's score: its family's weight times the surrogate's doubt about it (the standard deviation of
    the trees' predictions of its log latency); a family with fewer than `min_points` measured blocks doubts all of
    its blocks the most (1.0, above any forest's spread on these features)."""
    from sklearn.ensemble import RandomForestRegressor  # imported here: the CLI starts without scikit-learn

    doubt = np.ones(len(candidates))
    by_family: dict[str, list[int]] = {}
    for i, s in enumerate(candidates):
        by_family.setdefault(s.family, []).append(i)
    for family, idx in by_family.items():
        seen = [(specs[n], t) for n, t in measured.items() if n in specs and specs[n].family == family and t > 0]
        if len(seen) < policy.min_points:
            continue
        forest = RandomForestRegressor(n_estimators=policy.trees, min_samples_leaf=2, random_state=policy.random_state,
                                       n_jobs=1)
        forest.fit(np.stack([block_features(s) for s, _ in seen]), np.log([t for _, t in seen]))
        x = np.stack([block_features(candidates[i]) for i in idx])
        per_tree = np.stack([tree.predict(x) for tree in forest.estimators_])
        doubt[idx] = np.minimum(per_tree.std(axis=0), 1.0)
    weight = np.asarray([weights.get(s.family, policy.floor) for s in candidates], dtype=float)
    out: np.ndarray = doubt * weight
    return out


def active_order(specs: Sequence[ModelSpec], measured: Measured, op_time: OpTime,
                 policy: ActivePolicy = ActivePolicy()) -> Iterator[ModelSpec]:
    """The zoo's models in active order (see the module docstring), chosen as they are taken: `measured` and
    `op_time` are read from the store each time a batch is chosen, so every block measured so far counts."""
    arch = [s for s in specs if not is_sampled(s.family)]
    blocks = [s for s in specs if is_sampled(s.family)]
    by_name = {s.name: s for s in blocks}
    done = measured()
    yield from round_robin(arch)
    yield from (s for s in blocks if s.name in done)  # settled already: visited for nothing, in the file's order
    left = [s for s in blocks if s.name not in done]
    seeds: list[ModelSpec] = []
    for family in dict.fromkeys(s.family for s in left):
        have = sum(1 for n in done if n in by_name and by_name[n].family == family)
        seeds += [s for s in left if s.family == family][:max(policy.seed - have, 0)]
    yield from round_robin(seeds)
    chosen = {s.name for s in seeds}
    left = [s for s in left if s.name not in chosen]
    families = sorted({s.family for s in blocks})
    while left:
        weights = family_weights(op_time(), families, policy.floor)
        score = scores(left, measured(), by_name, weights, policy)
        picks: list[int] = []
        for _ in range(min(policy.batch, len(left))):
            best = int(np.argmax(score))
            picks.append(best)
            score[best] = -np.inf
            same = np.asarray([s.family == left[best].family for s in left])
            score[same] *= policy.spread
        yield from (left[i] for i in picks)
        taken = set(picks)
        left = [s for i, s in enumerate(left) if i not in taken]


def store_order(specs: Sequence[ModelSpec], store_path: str | Path, device: str,
                policy: ActivePolicy = ActivePolicy()) -> Iterator[ModelSpec]:
    """`active_order` reading what the store at `store_path` holds for `device`: the store a collect is writing,
    opened read-only when the collect takes its first model (it exists by then) and closed with the iterator."""
    with Store(store_path, readonly=True) as store:
        yield from active_order(specs, lambda: store.model_latencies(device),
                                lambda: store.op_span_totals(device, SAMPLED_PREFIX), policy)
