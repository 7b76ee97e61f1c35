"""hase.zoo.order: the breadth-first order a budgeted collect measures a zoo in."""
from __future__ import annotations

from conftest import REPO

from hase.sampler.config import read_zoo
from hase.zoo.order import coverage_order, round_robin
from hase.zoo.registry import ModelSpec


def spec(family: str, i: int) -> ModelSpec:
    return ModelSpec(family, f"{family}_{i}", (("i", i),))


def test_round_robin_takes_one_of_each_family_in_turn_keeping_each_familys_order():
    specs = [spec("resnet", 0), spec("resnet", 1), spec("resnet", 2), spec("vit", 0), spec("bert", 0), spec("bert", 1)]
    assert [s.name for s in round_robin(specs)] == ["resnet_0", "vit_0", "bert_0", "resnet_1", "bert_1", "resnet_2"]


def test_architectures_come_before_sampled_blocks_and_nothing_is_lost():
    specs = [spec("sampled-conv", 0), spec("sampled-conv", 1), spec("resnet", 0), spec("sampled-matmul", 0),
             spec("vit", 0), spec("resnet", 1)]
    order = [s.name for s in coverage_order(specs)]
    assert order == ["resnet_0", "vit_0", "resnet_1", "sampled-conv_0", "sampled-matmul_0", "sampled-conv_1"]


def test_the_shipped_zoos_first_models_span_every_architecture_family():
    config = read_zoo(REPO / "configs" / "zoo_small.toml")
    order = coverage_order(config.specs)
    assert sorted(s.name for s in order) == sorted(s.name for s in config.specs)
    arch = {s.family for s in config.specs if not s.family.startswith("sampled-")}
    assert {s.family for s in order[:len(arch)]} == arch
