"""hase.kernels.lean: a model read without its weights is the same model, its large tensors referenced in place."""
from __future__ import annotations

import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import EXPORTED_MODELS, conv_bn_relu_model, exported_model
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import load_external_data_for_model

from hase.errors import HaseError
from hase.kernels import graph, lean, probe, split
from hase.runtime.types import EPConfig


def matmul_chain(n: int, d: int) -> onnx.ModelProto:
    """x[1,4,d] -> n x (MatMul by a d x d weight -> Add bias -> Relu): weights of n*d*d floats."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for i in range(n):
        inits += [numpy_helper.from_array(rng.standard_normal((d, d)).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
        cur = f"r{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, d])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 4, d])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _values(model: onnx.ModelProto, folder: Path) -> dict[str, np.ndarray]:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    load_external_data_for_model(m, str(folder))
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_lean_model_is_the_model_with_its_weights_referenced_in_place(name):
    path = exported_model(name)
    full = onnx.load(path)
    light = lean.load_lean(path)
    referenced = [t for t in light.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    assert referenced and all(lean._numel(t) > lean.MIN_ELEMENTS for t in referenced)
    assert light.ByteSize() < full.ByteSize() / 4
    assert light.graph.node == full.graph.node and light.graph.input == full.graph.input
    values = _values(light, path.parent)  # the references read back the very bytes of the file
    for t in full.graph.initializer:
        np.testing.assert_array_equal(values[t.name], numpy_helper.to_array(t))


def test_lean_kernel_graph_never_holds_the_weights(tmp_path):
    p = tmp_path / "chain.onnx"
    onnx.save(matmul_chain(6, 512), p)  # 6 MB of weights
    tracemalloc.start()
    kg = graph.file_kernel_graph(p, EPConfig(), with_weights=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.5e6 and not kg.has_weights  # numpy and Python never saw the 6 MB
    full = graph.kernel_graph(graph.load_model(p), EPConfig())
    assert [n.spec.kernel_id for n in split.split(kg)] == [n.spec.kernel_id for n in split.split(full)]


def test_optimizing_a_lean_model_gives_the_same_graph_and_can_discard_its_weights(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(c=96, hw=8), p)  # conv weights over MIN_ELEMENTS: referenced
    light = graph.load_model(p, weights=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in light.graph.initializer)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        whole = onnx.load(graph.optimize_to(None, EPConfig(), a, source=p), load_external_data=False)
        lean_opt = graph.optimize_to(light, EPConfig(), b, external_folder=tmp_path, discard_weights=True)
        written = sum(f.stat().st_size for f in Path(b).iterdir() if f.is_file() and not f.is_symlink())
        # the 330 KB of conv weights went to the null device; what stays inside the model (under graph.INLINE_BYTES
        # each: the folded bias, ORT's small constants) is written
        assert written < 50_000 and sum(f.stat().st_size for f in Path(a).iterdir()) > 300_000
        assert onnx.load(lean_opt, load_external_data=False).graph.node == whole.graph.node


def test_a_file_that_is_not_a_model_is_reported_as_by_onnx_load(tmp_path):
    for name, data in [("junk.onnx", b"\xff" * 100), ("empty.onnx", b""),
                       ("cut.onnx", conv_bn_relu_model().SerializeToString()[:300])]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Exception) as lean_exc:
            graph.load_model(tmp_path / name, weights=False)
        with pytest.raises(Exception) as full_exc:
            graph.load_model(tmp_path / name)
        assert isinstance(lean_exc.value, HaseError) and str(lean_exc.value) == str(full_exc.value)
    with pytest.raises(lean.NotLeanError):
        lean.load_lean(tmp_path / "junk.onnx")


def _external_model(tmp_path: Path, location: str, small: bool = False) -> Path:
    m = conv_bn_relu_model(c=96, hw=8)
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0 if small else 1024)
    if location != "w.bin":
        model = onnx.load(tmp_path / "m.onnx", load_external_data=False)
        for t in model.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = location
        onnx.save(model, tmp_path / "m.onnx")
    return tmp_path / "m.onnx"


def test_external_data_models_are_read_and_checked(tmp_path):
    p = _external_model(tmp_path, "w.bin", small=True)
    light = lean.load_lean(p)
    small = [t for t in light.graph.initializer if lean._numel(t) <= lean.MIN_ELEMENTS]
    assert small and all(t.data_location != TensorProto.EXTERNAL for t in small)  # read, as onnx.load would
    kg = graph.file_kernel_graph(p, EPConfig(), with_weights=False)
    full = graph.kernel_graph(graph.load_model(p), EPConfig())
    assert [n.spec.kernel_id for n in split.split(kg)] == [n.spec.kernel_id for n in split.split(full)]


@pytest.mark.parametrize("location, match", [
    ("nope.bin", r"external data file is missing \(nope.bin\)"),
    ("../outside.bin", "outside the model's folder"),
])
def test_bad_external_data_is_one_line(tmp_path, location, match):
    (tmp_path / "outside.bin").write_bytes(b"\0" * 10)
    sub = tmp_path / "sub"
    sub.mkdir()
    p = _external_model(sub, location)
    with pytest.raises(HaseError, match=match):
        graph.load_model(p, weights=False)


def test_short_external_data_is_one_line(tmp_path):
    p = _external_model(tmp_path, "w.bin")
    (tmp_path / "w.bin").write_bytes((tmp_path / "w.bin").read_bytes()[:100])
    with pytest.raises(HaseError, match="shorter than tensor"):
        graph.load_model(p, weights=False)


def test_ort_type_inference_gives_the_shapes_a_run_gives():
    for name in EXPORTED_MODELS:
        model = graph.load_model(exported_model(name))
        feeds = graph.make_model_feeds(model)
        with tempfile.TemporaryDirectory() as tmp:
            path = graph.optimize_to(model, EPConfig(opt_level="all"), tmp)
            opt = onnx.load(str(path), load_external_data=False)
            inferred = probe.infer_shapes(opt, feeds)
            run = probe.observe_shapes(opt, path, feeds)
        assert {k: (v.shape, v.dtype) for k, v in inferred.items()} == {k: (v.shape, v.dtype) for k, v in run.items()}


def test_a_data_dependent_shape_falls_back_to_a_run(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("NonZero", ["r"], ["y"], name="nz")]
    m = helper.make_model(helper.make_graph(nodes, "nz", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "nz.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        path = graph.optimize_to(m, EPConfig(), tmp)
        with pytest.raises(probe.ShapesUnavailableError, match="no static shape for 'y'"):
            probe.infer_shapes(onnx.load(str(path)), graph.make_model_feeds(m))
    kg = graph.file_kernel_graph(tmp_path / "nz.onnx", EPConfig(), with_weights=False)
    assert len(kg.values["y"].shape) == 2 and kg.values["y"].shape[0] == 2  # from the run
