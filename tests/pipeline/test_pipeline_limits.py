"""Pipeline sizes are bounded before anything is allocated, and config values are checked for type."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import numpy_helper

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import DummyModel, PipelineSpec, matmul_chain, pipeline_from_dict, simulation_spec, single_stage


def test_simulate_with_a_huge_width_is_refused_at_once(capsys):
    tracemalloc.start()
    try:
        code = main(["pipeline", "simulate", "--width", "200000", "--batches", "2"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert ("dummy model (width=200000): a weight of shape [200000, 200000] float32 needs 160.0 GB, over the "
            "4.0 GB limit per tensor") in err
    assert peak < 200 * 10**6  # nothing of the 160 GB was allocated


def test_a_dummy_chain_over_one_onnx_file_is_refused_before_drawing():
    tracemalloc.start()
    try:
        with pytest.raises(HaseError, match=r"dummy model \[16, 20000\] -> 4 x 20000: its weights need 6.4 GB, "
                                            r"more than one ONNX file holds \(2 GB\)"):
            matmul_chain(16, 20_000, 20_000, 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**6
    spec = simulation_spec(width=20_000)  # each weight (1.6 GB) fits; the chain is refused when it is built
    assert spec.stage("embed").executors[0].dummy == DummyModel(20_000, 4, seed=1)


def test_dummy_weights_are_the_float64_draw_cast_to_float32():
    model = matmul_chain(4, 300, 600, 2, seed=3)  # the second weight spans two draw chunks
    rng = np.random.default_rng(3)
    for fan_in, init in zip((300, 600), model.graph.initializer, strict=True):
        expected = (rng.standard_normal((fan_in, 600)) / np.sqrt(fan_in)).astype(np.float32)
        assert np.array_equal(numpy_helper.to_array(init), expected)


@pytest.mark.parametrize("make, match", [
    (lambda: PipelineSpec(stages=(single_stage("a", dummy=DummyModel(8, 1)),), batch=10**6, features=10**5),
     r"the pipeline's input batch of shape \[1000000, 100000\] float32 needs 400.0 GB"),
    (lambda: PipelineSpec(stages=(single_stage("a", dummy=DummyModel(8, 1)),), batch=2, input_shape=(2, 0)),
     r"input_shape \[2, 0\] must be a list of sizes >= 1"),
    (lambda: single_stage("a", dummy=DummyModel(8, 1), streams=1000),
     r"stage 'a': streams = 1000 is over the limit of 64"),
    (lambda: single_stage("a", dummy=DummyModel(8, 1), threads=100_000), r"threads = 100000 is over the limit of 1024"),
    (lambda: PipelineSpec(stages=(single_stage("a", dummy=DummyModel(8, 1)),), queue_depth=10**6),
     r"queue_depth = 1000000 is over the limit of 1024"),
    (lambda: DummyModel(8, 10**6), r"dummy model layers = 1000000 is over the limit of 1000"),
])
def test_pipeline_sizes_are_bounded(make, match):
    with pytest.raises(HaseError, match=match):
        make()


@pytest.mark.parametrize("pipeline, stage, match", [
    ({"batch": "16"}, {}, r"\[pipeline\]: batch = '16' must be an integer"),
    ({"batches": 1.5}, {}, r"\[pipeline\]: batches = 1.5 must be an integer"),
    ({"warmup": True}, {}, r"\[pipeline\]: warmup = True must be an integer"),
    ({"batches": 0}, {}, r"\[pipeline\] needs batches >= 1"),
    ({"input_shape": [4, "x"]}, {}, r"input_shape = \[4, 'x'\] must be a list of sizes >= 1"),
    ({"name": 3}, {}, r"\[pipeline\]: name = 3 must be a string"),
    ({}, {"streams": "2"}, r"stage 'a': streams = '2' must be an integer"),
    ({}, {"threads": 2.0}, r"stage 'a': executor: threads = 2.0 must be an integer"),
    ({}, {"dummy": {"width": "wide"}}, r"stage 'a' dummy: width = 'wide' must be an integer"),
    ({}, {"device": 1}, r"stage 'a': executor: device = 1 must be a string"),
])
def test_config_values_are_type_checked(pipeline, stage, match):
    data = {"pipeline": {"batch": 4, **pipeline}, "stages": [{"name": "a", "dummy": {"width": 8}, **stage}]}
    with pytest.raises(HaseError, match=match):
        pipeline_from_dict(data)


def test_non_table_stages_are_one_line_errors():
    with pytest.raises(HaseError, match="every \\[\\[stages\\]\\] entry must be a table"):
        pipeline_from_dict({"stages": ["a"]})
    with pytest.raises(HaseError, match="\\[pipeline\\] must be a table"):
        pipeline_from_dict({"pipeline": [1], "stages": [{"name": "a", "dummy": {}}]})
