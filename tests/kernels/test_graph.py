"""hase.kernels.graph: loading, validation and ORT's kernel graph."""
from __future__ import annotations

import onnx
import pytest
from conftest import NCHWC, NCHWC_HOST, conv_bn_relu_model, embedding_model
from onnx import TensorProto, helper

from hase.errors import HaseError
from hase.kernels import graph
from hase.kernels.inputs import make_model_feeds
from hase.runtime.sessions import EPConfig


def test_kernel_graph_applies_ort_fusions(conv_model_path):
    kg = graph.kernel_graph(graph.load_model(conv_model_path), EPConfig(opt_level="extended"))
    ops = [n.op_type for n in kg.nodes]
    assert kg.opt_level == "extended"
    assert "FusedConv" in ops and "BatchNormalization" not in ops  # Conv+BN folded, Conv+Relu fused
    assert "Relu" not in ops and all(n.domain != NCHWC for n in kg.nodes)  # convolutions stay NCHW
    assert kg.values["y"].shape == (1, 10)
    assert all(kg.values[o].shape for n in kg.nodes for o in n.output)  # every tensor has ORT's shape


def test_kernel_graph_at_all_applies_the_layout_transforms(conv_model_path):
    kg = graph.kernel_graph(graph.load_model(conv_model_path), EPConfig())  # the default level: `all`
    ops = [(n.domain, n.op_type) for n in kg.nodes]
    assert kg.opt_level == "all"
    assert not {"BatchNormalization", "Relu"} & {op for _, op in ops}  # the `extended` fusions happen first
    if NCHWC_HOST:  # blocked convolutions, and reorders back to NCHW where a plain kernel reads their output
        assert [d for d, op in ops if "Conv" in op] == [NCHWC, NCHWC]  # both convolutions, no FusedConv left
        assert (NCHWC, "ReorderOutput") in ops
    else:
        assert ("com.microsoft", "FusedConv") in ops
    assert kg.values["y"].shape == (1, 10)
    assert all(kg.values[o].shape for n in kg.nodes for o in n.output)


def test_symbolic_dim_needs_input_shape(tmp_path):
    p = tmp_path / "sym.onnx"
    onnx.save(conv_bn_relu_model(batch="N"), p)
    with pytest.raises(HaseError, match="--input-shape x="):
        graph.load_model(p)
    model = graph.load_model(p, {"x": (4, 3, 16, 16)})
    kg = graph.kernel_graph(model, EPConfig())
    assert kg.values["y"].shape == (4, 10)


def test_input_shape_errors(conv_model_path):
    with pytest.raises(HaseError, match="unknown inputs"):
        graph.load_model(conv_model_path, {"nope": (1,)})
    with pytest.raises(HaseError, match="rank"):
        graph.load_model(conv_model_path, {"x": (1, 3)})
    with pytest.raises(HaseError, match="bad --input-shape"):
        graph.parse_input_shapes(["x=a,b"])
    assert graph.parse_input_shapes(["x=1,3,224,224"]) == {"x": (1, 3, 224, 224)}


def test_bad_files(tmp_path):
    with pytest.raises(HaseError, match="not found"):
        graph.load_model(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf \xff\xfe" * 10)
    with pytest.raises(HaseError, match="not a valid ONNX file"):
        graph.load_model(junk)
    good = conv_bn_relu_model().SerializeToString()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(good[: len(good) // 2])
    with pytest.raises(HaseError, match="not a valid ONNX file"):
        graph.load_model(trunc)


def test_unknown_domain_is_rejected(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    g = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    p = tmp_path / "custom.onnx"
    onnx.save(m, p)
    with pytest.raises(HaseError, match=r"unknown domain 'com\.example'"):
        graph.load_model(p)


def test_unsupported_opset_is_a_clear_error(tmp_path):
    m = conv_bn_relu_model()
    m.opset_import[0].version = 99
    p = tmp_path / "future.onnx"
    onnx.save(m, p)
    with pytest.raises(HaseError, match="ONNX Runtime cannot load"):
        graph.kernel_graph(graph.load_model(p), EPConfig())


def test_missing_external_data(tmp_path):
    m = conv_bn_relu_model(c=64)
    p = tmp_path / "ext.onnx"
    onnx.save(m, p, save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(HaseError, match="external data file is missing"):
        graph.load_model(p)


def test_valid_feeds_for_token_ids():
    feeds = make_model_feeds(embedding_model(vocab=50))
    assert feeds["ids"].dtype.name == "int64" and feeds["ids"].min() >= 0 and feeds["ids"].max() < 50


def test_exported_models_load(exported_dir):
    model = graph.load_model(exported_dir / "hf_bert_tiny_s64_b2.onnx")
    feeds = make_model_feeds(model)
    assert set(feeds) == {"input_ids", "attention_mask"}
    assert feeds["input_ids"].max() < 1000 and set(feeds["attention_mask"].ravel()) <= {0, 1}


@pytest.mark.parametrize("name", ["hf_gpt2_tiny_s64_b1", "timm_semnasnet_050_cls10_b1"])
def test_shapes_only_probe_agrees_with_full_probe(exported_dir, name):
    from hase.kernels import split

    model = graph.load_model(exported_dir / f"{name}.onnx")
    full = graph.kernel_graph(model, EPConfig())
    light = graph.kernel_graph(model, EPConfig(), with_weights=False)
    assert [n.spec.kernel_id for n in split.split(full)] == [n.spec.kernel_id for n in split.split(light)]
    assert not light.has_weights
    with pytest.raises(HaseError, match="without weights"):
        split.kernel_model(light, light.nodes[0])


def test_shapes_only_probe_with_unnamed_nodes(tmp_path):
    from hase.kernels import split

    m = conv_bn_relu_model()
    for node in m.graph.node:
        node.name = ""
    p = tmp_path / "unnamed.onnx"
    onnx.save(m, p)
    model = graph.load_model(p)
    assert all(n.name for n in model.graph.node)
    light = graph.kernel_graph(model, EPConfig(), with_weights=False, source=p)
    full = graph.kernel_graph(model, EPConfig())
    assert [n.spec.kernel_id for n in split.split(light)] == [n.spec.kernel_id for n in split.split(full)]


def test_a_directory_or_unreadable_file_is_not_called_invalid_onnx(tmp_path, conv_model_path, monkeypatch):
    with pytest.raises(HaseError, match="is a directory, not an ONNX model file"):
        graph.load_model(tmp_path)
    real_open = type(conv_model_path).open

    def denied(self, *args, **kwargs):
        if self == conv_model_path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(type(conv_model_path), "open", denied)  # root reads any file: deny it this way
    with pytest.raises(HaseError, match=r"cannot read .*conv.onnx: permission denied") as info:
        graph.load_model(conv_model_path)
    assert "not a valid ONNX file" not in str(info.value)


def test_symbolic_shape_is_shown_as_declared(tmp_path):
    p = tmp_path / "sym.onnx"
    onnx.save(conv_bn_relu_model(batch="batch"), p)
    with pytest.raises(HaseError, match=r"input 'x' has symbolic shape \[batch, 3, 16, 16\]: "
                                        r"pass --input-shape x=1,3,16,16"):
        graph.load_model(p)


def test_a_zero_dimension_is_not_called_symbolic(tmp_path):
    p = tmp_path / "zero.onnx"
    onnx.save(conv_bn_relu_model(batch=0, hw=8), p)
    with pytest.raises(HaseError, match=r"input 'x' has static shape \[0, 3, 8, 8\] with a zero dimension") as info:
        graph.load_model(p)
    assert "symbolic" not in str(info.value) and "--input-shape x=1,3,8,8" in str(info.value)
    assert graph.load_model(p, {"x": (2, 3, 8, 8)}).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


@pytest.mark.parametrize("item, match", [
    ("x=0,3,8,8", "dimension 0 is not >= 1"),
    ("x=-1,3", "dimension -1 is not >= 1"),
    (f"x={2**63},3", "is too large"),
    ("=1,2", "write NAME=D0,D1"),
    ("x=", "write NAME=D0,D1"),
])
def test_bad_input_shape_items(item, match):
    with pytest.raises(HaseError, match=match):
        graph.parse_input_shapes([item])


def test_an_optimized_graph_whose_shapes_need_a_constants_values_is_read_back(tmp_path):
    """A Split into 200 parts has 1.6 KB of split sizes that ORT's shape inference must read when it loads the
    optimized model (as in Zamba's and Jamba's fused Mamba layers): they stay inside the model, not in weights.bin."""
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper

    n = 200
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n, 8])
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, 1, 8]) for i in range(n)]
    split = numpy_helper.from_array(np.ones(n, dtype=np.int64), "split")
    node = helper.make_node("Split", ["x", "split"], [o.name for o in outs], axis=1, name="split")
    model = helper.make_model(helper.make_graph([node], "s", [x], outs, initializer=[split]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = graph.optimize_to(model, EPConfig("cpu-1t"), tmp_path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # raised before the fix
    assert len(session.get_outputs()) == n
