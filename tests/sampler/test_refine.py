"""Tests of hase.sampler.refine on a small real collected store: k-fold errors of the sampled kernels, the next round
around the worst ones (deterministic, written as a plain zoo config), and the order of rounds."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from sampler_cases import FAST

from hase import zoo
from hase.cli import main
from hase.errors import HaseError
from hase.sampler.config import read_zoo
from hase.sampler.draw import SamplerConfig
from hase.sampler.refine import neighbours, refine, spec_from_name

REPO = Path(__file__).resolve().parents[2]
RANGES = REPO / "configs" / "kernel_ranges.csv"
PREDICTOR = REPO / "configs" / "predictor.toml"
ZOO = f"""
seed = 0
[sampler]
ranges = "{RANGES}"
kernels = 14
max_mflop = 5.0
rounds = 1
neighbours = 3
threshold = 0.0
max_points = 2
folds = 3
[sampler.shares]
conv = 1
matmul = 1
"""


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A zoo of 14 sampled blocks collected into a real store (ORT at `all`, quick timing)."""
    tmp = tmp_path_factory.mktemp("refine")
    devices, config, store = tmp / "devices.toml", tmp / "sampled.toml", tmp / "s.sqlite"
    devices.write_text(FAST)
    config.write_text(ZOO)
    assert main(["collect", "--zoo", str(config), "--zoo-dir", str(tmp / "zoo"), "--devices", str(devices),
                 "--store", str(store)]) == 0
    return config, store, tmp


def _cfg(**kw) -> SamplerConfig:
    return SamplerConfig(ranges=RANGES, **kw)


def test_names_parse_back_to_specs():
    for spec in read_zoo(REPO / "configs" / "zoo_small.toml").specs:
        if spec.family.startswith("sampled-"):
            assert spec_from_name(spec.name) == spec
            assert spec_from_name(spec.name + "-0123abcd") == spec  # the store's suffix for a taken name
    with pytest.raises(HaseError, match="not named like"):
        spec_from_name("sampled-conv_b1")


def test_neighbours_are_close_keep_the_kind_and_are_deterministic():
    base = zoo.get_family("sampled-conv").spec({"c_in": 64, "c_out": 64, "groups": 64, "spatial": 28, "kernel": 5})
    cfg = _cfg(neighbours=10)
    near = neighbours(base, cfg, 1)
    assert near == neighbours(base, cfg, 1) and near != neighbours(base, cfg, 2)
    assert len(near) == 10 and base not in near
    for spec in near:
        p = spec.kwargs()
        assert p["groups"] == p["c_in"] == p["c_out"]  # depthwise stays depthwise
        assert p["kernel"] == 5 and p["stride"] == 1 and p["act"] == "relu"
        assert abs(math.log(p["spatial"] / 28)) < 1.5 and abs(math.log(p["c_in"] / 64)) < 1.5


@pytest.mark.slow
def test_refine_writes_a_round_around_the_worst_points(collected, tmp_path):
    config, store, _ = collected
    result = refine(config, store, "cpu-test", PREDICTOR, tmp_path / "rounds")
    points = result.points
    assert len(points) == 14 and set(points["family"]) == {"sampled-conv", "sampled-matmul"}
    assert points["error"].notna().all() and (points["y_ms"] > 0).all()
    worst = points.loc[points["error"].abs().sort_values(ascending=False).index, "model_id"]
    assert result.chosen == tuple(worst[:2])  # threshold 0: the two largest errors
    assert result.round == 1 and result.config_path == tmp_path / "rounds" / "sampled.round1.toml"
    chosen = [spec_from_name(m) for m in result.chosen]
    for spec in result.specs:  # every new block is a neighbour of a chosen point
        assert any(spec.family == c.family and spec in neighbours(c, _cfg(neighbours=3, max_mflop=5.0), 1)
                   for c in chosen)
    again = refine(config, store, "cpu-test", PREDICTOR, tmp_path / "again")
    assert again.specs == result.specs  # deterministic given the store, config and seed
    written = zoo.read_zoo_config(result.config_path)
    assert written.sampler_table is None and list(written.specs) == list(result.specs)  # a plain zoo config


@pytest.mark.slow
def test_rounds_wait_for_collect_and_stop_after_the_last(collected, tmp_path):
    config, store, _tmp = collected
    rounds = tmp_path / "rounds"
    config2 = tmp_path / "sampled.toml"
    config2.write_text(ZOO.replace("rounds = 1", "rounds = 2"))
    first = refine(config2, store, "cpu-test", PREDICTOR, rounds)
    with pytest.raises(HaseError, match=r"are not measured .* yet: run `hase collect --zoo"):
        refine(config2, store, "cpu-test", PREDICTOR, rounds)
    done = refine(config, store, "cpu-test", PREDICTOR, rounds)  # rounds = 1: round 1 exists, nothing more
    assert first.config_path is not None and done.config_path is None and done.points.empty


def test_cli_without_a_sampler_says_so(tmp_path, capsys):
    path = tmp_path / "z.toml"
    path.write_text('[families]\nresnet = { depth = 10, width = 0.25, resolution = 32 }\n')
    assert main(["zoo", "--config", str(path), "--refine", "--store", str(tmp_path / "none.sqlite")]) == 0
    assert "no [sampler] table" in capsys.readouterr().out
