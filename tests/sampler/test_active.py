"""Tests of hase.sampler.active: the order's composition (fake store reads: pure composition, no measurement), the
surrogate's scores on real zoo specs, and `hase collect --order active` on a real store."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from sampler_cases import FAST

from hase.cli import main
from hase.measure.store import Store
from hase.sampler.active import ActivePolicy, active_order, block_features, family_weights, scores
from hase.sampler.config import read_zoo
from hase.zoo.blocks import block_flops, is_sampled
from hase.zoo.registry import ModelSpec

REPO = Path(__file__).resolve().parents[2]
ZOO = read_zoo(REPO / "configs" / "zoo_small.toml").specs
FAMILIES = ("sampled-conv", "sampled-matmul", "sampled-norm")


def _specs(arch: int = 4, per_family: int = 12) -> list[ModelSpec]:
    """A few architecture variants and `per_family` sampled blocks of three families, from the real zoo config."""
    out = [s for s in ZOO if not is_sampled(s.family)][:arch]
    for family in FAMILIES:
        out += [s for s in ZOO if s.family == family][:per_family]
    return out


def _latency(spec: ModelSpec) -> float:
    """A made-up latency (ms) that grows with a block's FLOPs (1 ms for an architecture): what the fake store
    'measured'."""
    return 0.01 + block_flops(spec.family, spec.kwargs()) / 1e9 if is_sampled(spec.family) else 1.0


class FakeStore:
    """The two reads the order makes, answered from the specs taken so far: each one counts as measured once the
    next one is asked for (as a collect records a model before it takes the next)."""

    def __init__(self, done: list[ModelSpec] | None = None, op_time: dict[str, float] | None = None) -> None:
        self.taken: list[ModelSpec] = list(done or [])
        self.op_time = op_time or {}

    def measured(self) -> dict[str, float]:
        return {s.name: _latency(s) for s in self.taken}

    def ops(self) -> dict[str, float]:
        return self.op_time

    def run(self, specs: list[ModelSpec], policy: ActivePolicy) -> list[ModelSpec]:
        order = []
        for spec in active_order(specs, self.measured, self.ops, policy):
            order.append(spec)
            self.taken.append(spec)
        return order


def test_family_weights_share_real_graphs_time_and_keep_a_floor():
    w = family_weights({"Conv": 6.0, "MatMul": 3.0, "Add": 1.0}, ["sampled-conv", "sampled-matmul"], 0.02)
    assert w == pytest.approx({"sampled-conv": 0.6, "sampled-matmul": 0.3})
    # Conv is sampled by two families: its time is split between them; a family real graphs never ran keeps the floor
    w = family_weights({"Conv": 8.0, "LSTM": 0.0}, ["sampled-conv", "sampled-conv1d", "sampled-recurrent"], 0.05)
    assert w == pytest.approx({"sampled-conv": 0.5, "sampled-conv1d": 0.5, "sampled-recurrent": 0.05})
    assert family_weights({}, ["sampled-conv"], 0.1) == {"sampled-conv": 0.1}  # nothing measured yet


def test_block_features_are_numbers_of_one_length_per_family():
    convs = [s for s in ZOO if s.family == "sampled-conv"][:20]
    rows = [block_features(s) for s in convs]
    assert len({len(r) for r in rows}) == 1 and all(math.isfinite(v) for r in rows for v in r)
    assert rows[0][-1] == pytest.approx(math.log1p(block_flops("sampled-conv", convs[0].kwargs())))


def test_scores_weigh_the_surrogates_doubt_by_the_family_and_doubt_unfitted_families_most():
    specs = _specs(arch=0, per_family=30)
    by_name = {s.name: s for s in specs}
    conv = [s for s in specs if s.family == "sampled-conv"]
    measured = {s.name: _latency(s) for s in conv[:20]}  # conv is fitted; matmul and norm have no points
    candidates = conv[20:] + [s for s in specs if s.family != "sampled-conv"][:4]
    weights = {"sampled-conv": 0.5, "sampled-matmul": 0.25, "sampled-norm": 0.1}
    got = scores(candidates, measured, by_name, weights, ActivePolicy())
    fitted, unfitted = got[:10], got[10:]
    # a forest's spread, at most an unfitted family's full doubt (1.0), below it where the forest has seen alike blocks
    assert ((fitted >= 0) & (fitted <= 0.5)).all() and (fitted < 0.5).any()
    assert list(unfitted) == pytest.approx([weights[s.family] for s in candidates[10:]])


def test_order_takes_architectures_then_seeds_then_every_block_once():
    specs = _specs()
    order = FakeStore().run(specs, ActivePolicy(seed=2, batch=5))
    assert sorted(s.name for s in order) == sorted(s.name for s in specs)  # each once
    assert all(not is_sampled(s.family) for s in order[:4])
    seeds = order[4:10]
    assert [s.family for s in seeds] == [*FAMILIES, *FAMILIES]  # two of each, the families in turn
    assert seeds[:3] == [next(s for s in specs if s.family == f) for f in FAMILIES]  # in the file's order


def test_the_family_real_graphs_spend_their_time_in_goes_first():
    specs = _specs(arch=0, per_family=12)
    policy = ActivePolicy(seed=1, batch=6, min_points=100)  # no forest: every block doubted alike
    order = FakeStore(op_time={"LayerNormalization": 90.0, "MatMul": 5.0, "Conv": 5.0}).run(specs, policy)
    first_batch = order[3:9]
    assert [s.family for s in first_batch].count("sampled-norm") == 6  # 0.9 * 0.8^5 still tops 0.05


def test_blocks_measured_before_go_first_and_count_as_seeds():
    specs = _specs(arch=1, per_family=6)
    done = [s for s in specs if s.family == "sampled-matmul"][:3]
    order = FakeStore(done=done).run(specs, ActivePolicy(seed=3, batch=4))
    assert order[1:4] == done  # settled: visited right after the architectures
    assert [s.family for s in order[4:10]] == ["sampled-conv", "sampled-norm"] * 3  # matmul's seeds are in already


SAMPLED = f"""
seed = 0
[families]
bert = [{{ layers = 1, hidden = 32, heads = 2, seq = 16 }}]
[sampler]
ranges = "{REPO / 'configs' / 'kernel_ranges.csv'}"
kernels = 16
max_mflop = 5.0
[sampler.shares]
conv = 1
matmul = 1
"""


@pytest.mark.slow
def test_collect_in_active_order_measures_the_whole_zoo(tmp_path, capsys):
    devices, config, store = tmp_path / "devices.toml", tmp_path / "active.toml", tmp_path / "s.sqlite"
    devices.write_text(FAST)
    config.write_text(SAMPLED)
    argv = ["collect", "--zoo", str(config), "--zoo-dir", str(tmp_path / "zoo"), "--devices", str(devices),
            "--spans-only", "--order", "active"]
    assert main([*argv, "--store", str(store)]) == 0
    specs = read_zoo(config).specs
    with Store(store, readonly=True) as s:
        latencies = s.model_latencies("cpu-test")
        assert set(latencies) == {spec.name for spec in specs} and all(v > 0 for v in latencies.values())
        assert s.op_span_totals("cpu-test", "sampled-")  # the architecture model's ops: MatMul/Gemm, ...
        assert not s.op_span_totals("cpu-test", "")  # every family starts with "": nothing left
        order = s.table("model_measurements").sort_values("measured_at")
    assert not is_sampled(order.family.iloc[0])  # the architecture first
    assert main([*argv, "--store", str(store)]) == 0  # a rerun: nothing left to measure, nothing measured twice
    with Store(store, readonly=True) as s:
        assert len(s.table("model_measurements")) == len(specs)


def test_active_order_needs_one_device(tmp_path, capsys):
    devices = tmp_path / "devices.toml"
    devices.write_text(FAST + FAST[FAST.index("[[device]]"):].replace("cpu-test", "cpu-two"))
    store = tmp_path / "s.sqlite"
    assert main(["collect", "--zoo", str(REPO / "configs" / "zoo_small.toml"), "--devices", str(devices),
                 "--order", "active", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--order active chooses from one device's measurements" in err and "\n" not in err
    assert not store.exists()


def test_active_order_is_refused_with_a_cluster_before_anything_is_opened(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    assert main(["collect", "--cluster", "auto", "--order", "active", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--order active chooses from what a collect on this host measures" in err and "\n" not in err
    assert not store.exists()
