"""Tests of hase.sampler.draw: deterministic samples over the real kernel ranges, within the budget, in zoo configs."""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hase import zoo
from hase.errors import HaseError
from hase.sampler.config import load_zoo, read_zoo, zoo_sampler
from hase.sampler.draw import (
    BLOCKS,
    SAMPLERS,
    SOURCES,
    UPSAMPLE_KINDS,
    Draw,
    SamplerConfig,
    block_values,
    family_counts,
    parse_sampler,
    sample_specs,
)
from hase.sampler.ranges import read_ranges
from hase.zoo.blocks import ACTIVATION_OPS, COVERAGE_OPS, block_flops
from hase.zoo.registry import get_family

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RANGES = CONFIGS / "kernel_ranges.csv"


def _cfg(**kw) -> SamplerConfig:
    return SamplerConfig(ranges=RANGES, **kw)


def test_same_seed_same_samples_other_seed_others():
    a, b = sample_specs(_cfg(kernels=60)), sample_specs(_cfg(kernels=60))
    assert a == b and len(a) == 60 and len({s.name for s in a}) == 60
    c = sample_specs(_cfg(kernels=60, seed=1))
    assert {s.name for s in c} != {s.name for s in a}


def test_shares_budget_and_cost_cap():
    cfg = _cfg(kernels=101, max_mflop=50.0)
    specs = sample_specs(cfg)
    per_family = Counter(s.family.removeprefix("sampled-") for s in specs)
    expected: Counter[str] = Counter()
    for name, count in family_counts(cfg).items():
        expected[BLOCKS.get(name, name)] += count  # conv_nchw's samples are sampled-conv blocks
    assert per_family == expected and sum(per_family.values()) == 101
    assert all(block_flops(s.family, s.kwargs()) <= 50e6 for s in specs)


def test_samples_stay_in_the_observed_ranges():
    ranges = read_ranges(RANGES)
    specs = sample_specs(_cfg(kernels=200), ranges)
    c_in, _ = ranges.numeric("conv", "c_in")
    k, _ = ranges.numeric("matmul", "k")
    for s in specs:
        p = s.kwargs()
        if s.family == "sampled-conv":
            assert min(c_in) <= p["c_in"] <= max(c_in) + 8  # uniform draws round channels to multiples of 8
            assert p["c_in"] % p["groups"] == 0 and p["c_out"] % p["groups"] == 0
        if s.family == "sampled-matmul":
            assert min(k) <= p["k"] <= max(k) + 8
    # drawn from the distribution: the common sizes come up (3x3 and 1x1 convolutions, depthwise ones)
    convs = [s.kwargs() for s in specs if s.family == "sampled-conv"]
    assert {1, 3} <= {p["kernel"] for p in convs}
    assert any(p["groups"] == p["c_in"] > 1 for p in convs)


def test_each_block_family_draws_a_typed_record_of_its_parameters():
    """The samplers hand `_fit` a frozen record per block family, whose fields are the family's parameters."""
    ranges = read_ranges(RANGES)
    for block, sampler in SAMPLERS.items():
        for uniform in (False, True):
            record = sampler(Draw(np.random.default_rng(3), ranges, SOURCES[block], uniform))
            made_by = BLOCKS.get(block, block)  # conv_nchw draws ConvParams, coverage EltwiseParams
            assert dataclasses.is_dataclass(record) and type(record).__name__.lower().startswith(made_by[:4])
            values = block_values(record)
            assert set(values) == set(get_family(f"sampled-{BLOCKS.get(block, block)}").param_names), block
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(record, next(iter(values)), 0)


def test_family_counts_add_up():
    assert family_counts(_cfg(kernels=7, shares={"conv": 1.0, "matmul": 1.0})) == {"conv": 4, "matmul": 3}
    assert sum(family_counts(_cfg(kernels=0)).values()) == 0


def test_sampler_table_in_a_zoo_config(tmp_path):
    (tmp_path / "r.csv").write_text(RANGES.read_text())
    path = tmp_path / "z.toml"
    path.write_text('seed = 0\n[sampler]\nranges = "r.csv"\nkernels = 12\n[sampler.shares]\nconv = 1\nnorm = 1\n')
    config = read_zoo(path)
    sampler = zoo_sampler(config)
    assert sampler is not None and sampler.ranges == tmp_path / "r.csv"
    assert Counter(s.family for s in config.specs) == {"sampled-conv": 6, "sampled-norm": 6}
    assert [s.name for s in read_zoo(path).specs] == [s.name for s in config.specs]


@pytest.mark.parametrize(("table", "match"), [
    ({"kernels": -1}, "kernels = -1 is invalid"),
    ({"uniform": 2.0}, "uniform = 2.0 is invalid"),
    ({"budget": 3}, "unknown \\[sampler\\] key"),
    ({"shares": {"lstm": 1.0}}, "'lstm' is not a block family"),
    ({"shares": {"conv": 0}}, "are all 0"),
    ({"target": "fast"}, "target = 'fast' is invalid"),
])
def test_bad_sampler_tables(table, match):
    with pytest.raises(HaseError, match=match):
        parse_sampler(table, CONFIGS, "zoo config 't'")


def test_missing_ranges_file_is_one_line(tmp_path):
    path = tmp_path / "z.toml"
    path.write_text('[sampler]\nranges = "nope.csv"\n')
    with pytest.raises(HaseError, match="cannot read the kernel ranges"):
        read_zoo(path)


def test_sampled_mixers_have_odd_windows_and_an_even_one_is_refused():
    """A mixer (pool(x) - x) keeps the plane only with an odd window: the sampler never draws an even one (an even
    one reached `make collect` and failed the whole zoo build), and the builder refuses one with a clear error."""
    for config in ("zoo_small.toml", "zoo_full.toml"):
        mixers = [s.kwargs() for s in load_zoo(CONFIGS / config)
                  if s.family == "sampled-pool" and s.kwargs()["kind"] == "mixer"]
        assert mixers and all(min(p["kernel"], p["spatial"]) % 2 == 1 for p in mixers)
    spec = zoo.get_family("sampled-pool").spec({"kind": "mixer", "kernel": 4, "stride": 1, "spatial": 14})
    with pytest.raises(HaseError, match="needs an odd kernel"):
        zoo.build_model(spec)


def test_new_shares_with_kernels_raised_keep_the_other_families_samples():
    """Each family draws from its own stream: adding `index` and `conv_nchw` with `kernels` raised in proportion
    (240 -> 288 for 0.1 + 0.1) leaves every old sample in place, so a collect measures only the new blocks."""
    old = _cfg(kernels=240, shares={"conv": 0.5, "matmul": 0.3, "eltwise": 0.2})
    new = dataclasses.replace(old, kernels=288, shares={**old.shares, "index": 0.1, "conv_nchw": 0.1})
    before, after = {s.name for s in sample_specs(old)}, {s.name for s in sample_specs(new)}
    assert before < after and len(after - before) == family_counts(new)["index"] + family_counts(new)["conv_nchw"]


def test_the_small_zoo_keeps_its_earlier_blocks_and_draws_8_or_more_of_each_coverage_activation_and_cell():
    """configs/zoo_small.toml went from 312 to 672 kernels with `coverage` (0.4: 12 ops in turn), `activation`
    (0.65: 19 ops in turn), `recurrent` (0.1: LSTM and GRU in turn), `upsample`, `rmsnorm`, `conv1d` (0.1 each) and
    `scan` (0.05):
    a store collected before measures only the new blocks, and each op gets the 8 kernels a forest of its own
    needs."""
    cfg = zoo_sampler(read_zoo(CONFIGS / "zoo_small.toml"))
    assert cfg is not None
    new_families = ("coverage", "activation", "recurrent", "upsample", "rmsnorm", "conv1d", "scan")
    before = dataclasses.replace(cfg, kernels=312,
                                 shares={k: v for k, v in cfg.shares.items() if k not in new_families})
    old, new = {s.name for s in sample_specs(before)}, sample_specs(cfg)
    added = [s.kwargs() for s in new if s.name not in old]
    counts = family_counts(cfg)
    assert old < {s.name for s in new}
    assert len(added) == sum(counts[f] for f in new_families) == 96 + 156 + 24 * 4 + 12
    ops = Counter(p["op"] for p in added if "op" in p)
    assert set(ops) == set(COVERAGE_OPS) | set(ACTIVATION_OPS) and min(ops.values()) >= 8
    cells = Counter((p["cell"], p["dirs"]) for p in added if "cell" in p)
    assert cells[("lstm", 1)] + cells[("lstm", 2)] == cells[("gru", 1)] + cells[("gru", 2)] == 12
    assert cells[("lstm", 2)] + cells[("gru", 2)] > 0
    ups = Counter((p["mode"], p["out"] // p["side"]) for p in added if "mode" in p)
    assert set(ups) == set(UPSAMPLE_KINDS) and min(ups.values()) >= 4
    convs = [p for p in added if "length" in p]
    assert sum(p["groups"] == p["c_in"] > 1 for p in convs) >= 6 and sum(p["stride"] > 1 for p in convs) >= 6


def test_nchw_convs_have_channels_off_a_multiple_of_8_and_index_and_einsum_blocks_every_kind():
    specs = sample_specs(_cfg(kernels=90, shares={"conv_nchw": 1.0, "index": 1.0, "einsum": 1.0}))
    convs = [s.kwargs() for s in specs if s.family == "sampled-conv"]
    index = [s.kwargs() for s in specs if s.family == "sampled-index"]
    einsums = [s.kwargs() for s in specs if s.family == "sampled-einsum"]
    assert len(convs) == len(index) == len(einsums) == 30
    assert {p["eq"] for p in einsums} == {"qk", "av", "rel"}
    assert all(p["c_in"] % 8 for p in convs)
    depthwise = [p for p in convs if p["groups"] == p["c_in"] > 1]
    assert depthwise and {p["kernel"] for p in depthwise} <= {3, 5, 7, 9}
    assert {p["kind"] for p in index} == {"window", "inner", "scatter", "rows"}
