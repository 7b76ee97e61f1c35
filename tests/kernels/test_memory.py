"""Size limits of hase.kernels: every tensor is sized from its shape before anything is allocated.

`tracemalloc` sees numpy's allocations, so "refused before allocation" is checked as a traced peak far below
the refused tensor's size.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import onnx
import pytest
from conftest import _model, conv_bn_relu_model, embedding_model
from onnx import TensorProto, helper, numpy_helper

from hase import limits
from hase.cli import main
from hase.errors import HaseError
from hase.kernels import graph
from hase.kernels.inputs import make_model_feeds, model_input_specs, random_tensor
from hase.kernels.memory import check_model_memory, sized_tensors
from hase.kernels.types import TensorSpec
from hase.runtime.types import EPConfig


def _peak_bytes(fn, *args, **kwargs) -> tuple[BaseException | None, int]:
    """Run fn, return (the exception it raised or None, the traced peak of Python/numpy allocations)."""
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        err = None
    except BaseException as exc:
        err = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return err, peak


def _big_intermediate_model() -> onnx.ModelProto:
    """x[1] -> ConstantOfShape([100000, 100000]) + x -> ReduceSum -> y[1]: a 40 GB tensor only in the middle."""
    shape = numpy_helper.from_array(np.array([100_000, 100_000], np.int64), "big_shape")
    axes = numpy_helper.from_array(np.array([0, 1], np.int64), "axes")
    nodes = [helper.make_node("ConstantOfShape", ["big_shape"], ["big"], name="fill"),
             helper.make_node("Add", ["big", "x"], ["sum"], name="add"),
             helper.make_node("ReduceSum", ["sum", "axes"], ["y"], keepdims=0, name="reduce")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    return _model(nodes, [x], [y], [shape, axes])


def test_oversized_declared_input_is_refused_with_the_number(tmp_path):
    p = tmp_path / "huge.onnx"
    onnx.save(conv_bn_relu_model(hw=100_000), p)  # a 3 KB file that declares a 120 GB input
    model = graph.load_model(p)
    err, peak = _peak_bytes(graph.kernel_graph, model, EPConfig())
    assert isinstance(err, HaseError)
    assert str(err) == ("input 'x' of shape [1, 3, 100000, 100000] float32 needs 120.0 GB, over the 4.0 GB limit "
                        "per tensor (set HASE_MAX_TENSOR_GB to change it)")
    assert peak < 50 * 10**6


def test_oversized_input_shape_option_is_refused(tmp_path, capsys):
    p = tmp_path / "sym.onnx"
    onnx.save(conv_bn_relu_model(batch="N", hw=8), p)
    model = graph.load_model(p, graph.parse_input_shapes(["x=1000000000,3,8,8"]))
    with pytest.raises(HaseError, match=r"input 'x' of shape \[1000000000, 3, 8, 8\] float32 needs 768.0 GB"):
        make_model_feeds(model)
    code = main(["split", str(p), "--input-shape", "x=1000000000x3x8x8", "--out", str(tmp_path / "k")])
    assert code == 2 and "768.0 GB" in capsys.readouterr().err
    assert not (tmp_path / "k").exists()


def test_refused_under_a_lowered_limit_without_allocating(monkeypatch):
    model = conv_bn_relu_model(hw=512)  # input 3.1 MB: fine by default
    monkeypatch.setenv(limits.TENSOR_ENV, "0.001")
    err, peak = _peak_bytes(make_model_feeds, model)
    assert isinstance(err, HaseError) and "needs 3.1 GB" not in str(err) and "0.0031 GB" in str(err)
    assert peak < 1_000_000  # the 3.1 MB input was never allocated
    monkeypatch.setenv(limits.TENSOR_ENV, "0.01")
    assert make_model_feeds(model)["x"].nbytes == 3 * 512 * 512 * 4


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_a_bad_limit_setting_is_named(monkeypatch, value):
    monkeypatch.setenv(limits.TENSOR_ENV, value)
    with pytest.raises(HaseError, match=f"HASE_MAX_TENSOR_GB='{value}' is not a size"):
        make_model_feeds(conv_bn_relu_model())


def test_oversized_intermediate_is_refused_before_ort_folds_it():
    err, peak = _peak_bytes(graph.kernel_graph, _big_intermediate_model(), EPConfig())
    assert isinstance(err, HaseError), err
    assert "intermediate tensor 'big' of shape [100000, 100000] float32 needs 40.0 GB" in str(err)
    assert peak < 50 * 10**6


def test_probe_total_is_bounded_but_only_for_the_value_probe(monkeypatch):
    model = conv_bn_relu_model(hw=64)
    sizes = {t.name: t.nbytes for t in sized_tensors(model)}
    assert sizes["x"] == 3 * 64 * 64 * 4 and sizes["c1"] == 8 * 64 * 64 * 4 and sizes["y"] == 40  # inferred
    monkeypatch.setenv(limits.PROBE_ENV, "0.0002")  # 200 KB: each tensor fits, all of them do not
    with pytest.raises(HaseError, match=r"the probe run of this model \(its \d+ tensors .*over the 0.0002 GB limit "
                                        r"\(set HASE_MAX_PROBE_GB"):
        graph.kernel_graph(model, EPConfig())
    kg = graph.kernel_graph(model, EPConfig(), with_weights=False)  # shapes-only: nothing kept alive at once
    assert kg.values["y"].shape == (1, 10)
    assert check_model_memory(model, probe=False) == sum(sizes.values())


def test_inputs_are_generated_in_their_own_dtype():
    spec = TensorSpec("x", (1, 3, 1024, 1024), "float32")
    err, peak = _peak_bytes(random_tensor, spec, np.random.default_rng(0))
    assert err is None
    assert peak < 1.25 * 4 * 3 * 1024 * 1024  # the float64 draw-then-cast peaked at 3x the float32 result
    arr = random_tensor(spec, np.random.default_rng(0))
    assert arr.dtype == np.float32 and arr.shape == spec.shape


@pytest.mark.parametrize("spec", [
    TensorSpec("f", (3, 1000, 700), "float32", low=-1.0, high=1.0),  # over one draw chunk
    TensorSpec("h", (5, 7), "float16", low=0.5, high=2.0),
    TensorSpec("ids", (2, 300_000), "int64", low=0.0, high=30521.0),
    TensorSpec("i32", (4, 9), "int32", low=3.0, high=9.0),
    TensorSpec("m", (2, 64), "bool", low=0.0, high=1.0),
])
def test_generated_values_are_those_of_one_float64_draw(spec):
    """Values (and so ranges and every observed min/max) are what `draw whole tensor, then cast` gave."""
    new = random_tensor(spec, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    dt = np.dtype(spec.dtype)
    if dt == np.bool_:
        old = rng.integers(0, 2, size=spec.shape).astype(bool)
    elif np.issubdtype(dt, np.integer):
        old = rng.integers(int(spec.low), int(spec.high) + 1, size=spec.shape, dtype=np.int64).astype(dt)
    else:
        old = rng.uniform(spec.low, spec.high, size=spec.shape).astype(dt)
    assert new.dtype == dt and np.array_equal(new, old)
    assert spec.low <= float(new.min()) and float(new.max()) <= spec.high


def test_token_ids_and_masks_keep_their_ranges():
    feeds = make_model_feeds(embedding_model(vocab=50))
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].min() >= 0 and feeds["ids"].max() <= 49
    (spec,) = model_input_specs(embedding_model(vocab=50))
    assert (spec.low, spec.high) == (0.0, 49.0)


def test_format_helpers():
    assert limits.format_gb(120 * 10**9) == "120.0 GB" and limits.format_gb(3_145_728) == "0.0031 GB"
    assert limits.format_shape(["batch", 3, None]) == "[batch, 3, ?]"
    assert limits.tensor_nbytes((10**12, 10**12), "float64") == 8 * 10**24  # exact, no int64 overflow
