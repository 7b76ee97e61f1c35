"""Tests of hase.zoo.blocks: every sampled block is valid ONNX, runs in ORT at `all`, and its kernel graph holds
the sampled kernel with the sampled shape (as ONNX Runtime fuses it)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from hase import zoo
from hase.errors import HaseError
from hase.kernels import graph, split
from hase.predict import features
from hase.runtime.types import EPConfig
from hase.zoo.blocks import ACTIVATION_OPS, MAIN_OPS, block_flops, is_sampled

ALL = EPConfig("cpu-1t", opt_level="all")


def _kernels(family: str, **params) -> list:
    spec = zoo.get_family(family).spec(params)
    model = zoo.build_model(spec)
    onnx.checker.check_model(model, full_check=True)
    return [n.spec for n in split.split(graph.kernel_graph(model, ALL))]  # a real ORT session at `all`, run once


def _main(family: str, kernels: list) -> list:
    return [k for k in kernels if k.op_type in MAIN_OPS[family]]


@pytest.mark.parametrize(("params", "out"), [
    ({"c_in": 32, "c_out": 64, "spatial": 28, "kernel": 3, "stride": 2}, (1, 64, 14, 14)),
    ({"c_in": 64, "c_out": 64, "spatial": 14, "kernel": 5, "groups": 64, "act": "none"}, (1, 64, 14, 14)),
    ({"c_in": 3, "c_out": 16, "spatial": 32, "kernel": 3, "stride": 2, "batch": 2}, (2, 16, 16, 16)),
])
def test_conv_block_is_one_fused_nchwc_conv(params, out):
    kernels = _kernels("sampled-conv", **params)
    (conv,) = _main("sampled-conv", kernels)
    assert conv.domain == "com.microsoft.nchwc"  # ORT's x86 layout at `all`, BatchNormalization folded in
    assert conv.outputs[0].shape == out
    assert dict(conv.attrs)["kernel_shape"] == [params["kernel"]] * 2
    assert dict(conv.attrs)["group"] == params.get("groups", 1)
    assert ("activation" in dict(conv.attrs)) == (params.get("act", "relu") == "relu")  # ReLU fused as well
    assert not any(k.op_type == "BatchNormalization" for k in kernels)


@pytest.mark.parametrize("gelu", ["none", "erf"])
def test_matmul_block_has_the_sampled_gemm(gelu):
    kernels = _kernels("sampled-matmul", rows=64, k=96, n=128, gelu=gelu)
    (mm,) = _main("sampled-matmul", kernels)
    a, w = mm.inputs[0], mm.inputs[1]
    assert a.shape == (64, 96) and w.const and sorted(w.shape) == [96, 128] and mm.outputs[0].shape == (64, 128)
    assert any(k.op_type == "Gelu" for k in kernels) == (gelu == "erf")  # the exported formula fuses into Gelu


def test_attention_block_is_fused_matmul_softmax_matmul():
    kernels = _kernels("sampled-attention", batch=4, m=32, k=16, n=48)
    ops = [k.op_type for k in kernels]
    assert ops == ["FusedMatMul", "Softmax", "MatMul"]
    scores, _, ctx = kernels
    assert scores.outputs[0].shape == (1, 4, 32, 48) and not scores.inputs[1].const
    assert dict(scores.attrs)["transB"] == 1 and dict(scores.attrs)["alpha"] == pytest.approx(0.25)
    assert ctx.outputs[0].shape == (1, 4, 32, 16)


@pytest.mark.parametrize(("skip", "op"), [(1, "SkipLayerNormalization"), (0, "LayerNormalization")])
def test_norm_block(skip, op):
    (norm,) = _kernels("sampled-norm", rows=24, hidden=64, skip=skip)
    assert norm.op_type == op and norm.outputs[0].shape == (1, 24, 64)


@pytest.mark.parametrize(("kind", "op", "out"), [("max", "MaxPool", (1, 32, 8, 8)),
                                                 ("global", "GlobalAveragePool", (1, 32, 1, 1))])
def test_pool_block_runs_in_nchwc_after_a_conv(kind, op, out):
    kernels = _kernels("sampled-pool", channels=32, spatial=16, kernel=3, stride=2, kind=kind)
    (pool,) = _main("sampled-pool", kernels)
    assert pool.op_type == op and pool.domain == "com.microsoft.nchwc" and pool.outputs[0].shape == out


@pytest.mark.parametrize(("op", "out"), [("Add", (1, 16, 40)), ("Transpose", (1, 40, 16)), ("Concat", (1, 16, 80)),
                                         ("Sigmoid", (1, 16, 40))])
def test_eltwise_block(op, out):
    (k,) = _kernels("sampled-eltwise", rows=16, width=40, op=op)
    assert k.op_type == op and k.outputs[0].shape == out


@pytest.mark.parametrize(("op", "ort_op", "out"), [
    ("SiLU", "QuickGelu", (1, 16, 40)),  # x * sigmoid(x), fused by ORT as real SiLU activations are
    ("SliceOuter", "Slice", (1, 8, 40)), ("SliceLast", "Slice", (1, 16, 20)), ("Pad", "Pad", (1, 18, 42)),
    ("Neg", "Neg", (1, 16, 40)), ("Expand", "Expand", (1, 16, 40)), ("ReduceSumLast", "ReduceSum", (1, 16, 1)),
    ("ReduceMaxLast", "ReduceMax", (1, 16, 1)), ("ReduceL2Outer", "ReduceL2", (1, 1, 40)),
    ("InstanceNorm", "InstanceNormalization", (1, 16, 40)),
    ("TransposeWindow", "Transpose", None),  # Swin's window partition of a 4x4 map of 40 channels
    ("ExpandLast", "Expand", (1, 16, 40)),  # F.normalize's [.., 1] norm expanded over the last axis
])
def test_coverage_ops_are_the_kernels_real_graphs_run(op, ort_op, out):
    (k,) = _kernels("sampled-eltwise", rows=16, width=40, op=op)
    assert k.op_type == ort_op and ort_op in MAIN_OPS["sampled-eltwise"]
    if out is not None:
        assert k.outputs[0].shape == out
    else:  # ORT may fold unit or neighbouring axes of the 6-d permutation; the data stay 16 tokens x 40
        assert np.prod(k.outputs[0].shape) == 16 * 40 and k.inputs[0].shape != k.outputs[0].shape


@pytest.mark.parametrize("op", ACTIVATION_OPS)
def test_activation_ops_run_as_one_kernel_of_their_own_op_type(op):
    """Each of the element-wise ops no other family draws stays one node of its own op type at `all` (SiLU fused
    into QuickGelu; Pow with its constant exponent as the second input)."""
    (k,) = _kernels("sampled-eltwise", rows=16, width=40, op=op)
    assert k.op_type == ("QuickGelu" if op == "SiLU" else op) and k.outputs[0].shape == (1, 16, 40)
    assert k.op_type in MAIN_OPS["sampled-eltwise"]
    if op == "Pow":
        assert k.inputs[1].const and k.inputs[1].shape == ()


@pytest.mark.parametrize(("cell", "op", "dirs"), [("lstm", "LSTM", 1), ("gru", "GRU", 2)])
def test_recurrent_block_is_one_lstm_or_gru_as_torch_writes_it(cell, op, dirs):
    (k,) = _kernels("sampled-recurrent", seq=12, batch=2, input=24, hidden=16, cell=cell, dirs=dirs)
    gates = 4 if op == "LSTM" else 3
    assert k.op_type == op and k.inputs[0].shape == (12, 2, 24) and k.outputs[0].shape == (12, dirs, 2, 16)
    assert k.inputs[1].const and k.inputs[1].shape == (dirs, gates * 16, 24)
    assert dict(k.attrs).get("linear_before_reset", 0) == (op == "GRU")
    params = {"seq": 12, "batch": 2, "input": 24, "hidden": 16, "cell": cell, "dirs": dirs}
    assert block_flops("sampled-recurrent", params) == 2 * 12 * 2 * dirs * gates * 16 * (24 + 16)


@pytest.mark.parametrize(("op", "out", "mode"), [
    ("Transpose0213", (1, 8, 16, 5), None),  # [1, tokens 16, heads 8, 5] -> [1, heads, tokens, 5]
    ("Transpose0231", (1, 8, 5, 16), None),  # keys transposed for q @ k^T
    ("Transpose20341", (1, 1, 8, 5, 16), None),  # XCiT's 5-D [1, tokens, 1, heads, dim] -> [1, 1, heads, dim, tokens]
    ("ResizeNearest", (1, 16, 80, 80), "nearest"), ("ResizeLinear", (1, 16, 80, 80), "linear"),
    ("ResizeCubic", (1, 16, 37, 37), "cubic"),
])
def test_movement_block(op, out, mode):
    (k,) = _kernels("sampled-eltwise", rows=16, width=40, op=op)
    assert k.op_type == ("Transpose" if mode is None else "Resize") and k.outputs[0].shape == out
    if mode is not None:
        assert dict(k.attrs)["mode"] == mode


@pytest.mark.parametrize(("op", "axis", "shape"), [("SoftmaxAxis2", 2, (1, 8, 16, 5)),
                                                   ("SoftmaxAxis1", 1, (1, 16, 8, 5))])
def test_softmax_over_tokens_block(op, axis, shape):
    """CoaT's factorized attention: Softmax over the tokens axis of [1, heads, tokens, dim] or, as ORT runs it at
    `all`, of [1, tokens, heads, dim]; never the last axis."""
    (k,) = _kernels("sampled-eltwise", rows=16, width=40, op=op)
    assert k.op_type == "Softmax" and dict(k.attrs)["axis"] == axis and k.outputs[0].shape == shape


def test_block_families_and_costs():
    names = {f.name for f in zoo.families() if is_sampled(f.name)}
    assert names == set(MAIN_OPS)
    conv = zoo.get_family("sampled-conv").spec({"c_in": 64, "c_out": 64, "spatial": 56}).kwargs()
    assert block_flops("sampled-conv", conv) == 2 * 64 * 64 * 56 * 56 * 9
    with pytest.raises(Exception, match="groups=3 must divide"):
        zoo.get_family("sampled-conv").spec({"c_in": 32, "c_out": 32, "groups": 3})


def test_pool_blocks_write_global_pooling_and_token_mixers_as_real_graphs_do():
    (win,) = _main("sampled-pool", _kernels("sampled-pool", channels=64, spatial=7, kind="window"))
    assert win.op_type == "AveragePool" and dict(win.attrs)["kernel_shape"] == [7, 7]  # the whole plane
    assert win.outputs[0].shape[-2:] == (1, 1)
    kernels = _kernels("sampled-pool", channels=16, spatial=28, kernel=3, kind="mixer")
    (pool,) = _main("sampled-pool", kernels)
    assert dict(pool.attrs)["strides"] == [1, 1] and dict(pool.attrs).get("count_include_pad", 0) == 0
    assert any(k.op_type == "Sub" for k in kernels)  # pool(x) - x
    se = _kernels("sampled-pool", channels=32, spatial=14, kernel=1, stride=1, kind="se")
    (mean,) = [k for k in se if k.op_type == "ReduceMean"]  # timm's x.mean((2, 3), keepdim=True), not a GAP
    assert mean.inputs[0].shape == (1, 32, 14, 14) and mean.outputs[0].shape == (1, 32, 1, 1)
    (gate,) = [k for k in se if k.op_type == "Mul"]  # x * sigmoid(...), broadcast over the plane
    assert sorted(t.shape for t in gate.inputs) == [(1, 32, 1, 1), (1, 32, 14, 14)]


def test_resize_block_upsamples_as_segmentation_decoders_do():
    (rs,) = _main("sampled-resize", _kernels("sampled-resize", channels=8, side=16, out=64))
    assert rs.inputs[0].shape == (1, 8, 16, 16) and rs.outputs[0].shape == (1, 8, 64, 64)
    assert dict(rs.attrs)["mode"] == "linear"
    assert block_flops("sampled-resize", {"channels": 8, "side": 16, "out": 64}) > 0


@pytest.mark.parametrize(("kind", "op", "index_shape", "out"), [
    ("window", "Gather", (9, 24), (1, 16, 9, 24, 1)),  # ConvBERT's span unfold: one element per index
    ("inner", "Gather", (1, 1), (1, 16, 24, 1, 1)),  # index 0 of a last axis of size 1
    ("scatter", "ScatterND", (1, 1, 16, 24, 4), (1, 1, 16, 24)),  # MViTv2: a full coordinate per element
    ("rows", "ScatterND", (8, 1), (16, 24)),  # whole rows
])
def test_index_block_addresses_single_elements_or_rows(kind, op, index_shape, out):
    (k,) = _main("sampled-index", _kernels("sampled-index", rows=16, width=24, kind=kind))
    assert k.op_type == op and k.inputs[1].const and k.inputs[1].shape == index_shape and k.outputs[0].shape == out
    assert block_flops("sampled-index", {"rows": 16, "width": 24, "kind": kind}) > 0


def test_index_block_refuses_a_size_over_its_limit():
    with pytest.raises(HaseError, match="over 1048576"):
        zoo.get_family("sampled-index").spec({"rows": 4096, "width": 4096, "kind": "scatter"})


def test_a_depthwise_conv_with_channels_off_a_multiple_of_8_stays_nchw():
    """What the sampler's conv_nchw draws: ORT leaves it out of NCHWc (MixNet's 90-channel 9x9 depthwise convs)."""
    (conv,) = _main("sampled-conv", _kernels("sampled-conv", c_in=90, c_out=90, groups=90, kernel=9, spatial=14))
    assert conv.domain != "com.microsoft.nchwc" and conv.inputs[0].shape == (1, 90, 14, 14)  # Conv or FusedConv


@pytest.mark.parametrize(("eq", "shapes", "out"), [
    ("qk", [(1, 2, 32, 16), (1, 2, 24, 16)], (1, 2, 32, 24)),  # CvT's attention scores
    ("av", [(1, 2, 32, 16), (1, 2, 16, 24)], (1, 2, 32, 24)),  # and its context
    ("rel", [(1, 1, 2, 32, 16), (2, 24, 16)], (1, 1, 2, 32, 24)),  # MViTv2's relative positions
    ("rel-key", [(1, 2, 32, 16), (32, 24, 16)], (1, 2, 32, 24)),  # w2v-BERT's relative keys per query
])
def test_einsum_block_stays_one_einsum_as_written(eq, shapes, out):
    (k,) = _kernels("sampled-einsum", batch=2, m=32, k=16, n=24, eq=eq)
    assert k.op_type == "Einsum" and [t.shape for t in k.inputs] == shapes and k.outputs[0].shape == out
    assert block_flops("sampled-einsum", {"batch": 2, "m": 32, "k": 16, "n": 24}) == 2 * 2 * 32 * 16 * 24


def test_nearest_floor_resize_is_torch_nearest_upsampling_with_scales():
    (rs,) = _main("sampled-resize", _kernels("sampled-resize", channels=8, side=10, out=40, mode="nearest-floor"))
    attrs = dict(rs.attrs)
    assert (attrs["mode"], attrs["coordinate_transformation_mode"], attrs["nearest_mode"]) == \
        ("nearest", "asymmetric", "floor")
    assert rs.inputs[2].shape == (4,) and rs.outputs[0].shape == (1, 8, 40, 40)  # scales, not sizes
    with pytest.raises(HaseError, match="whole factor"):
        zoo.get_family("sampled-resize").spec({"channels": 8, "side": 10, "out": 35, "mode": "nearest-floor"})


def test_rmsnorm_block_is_fused_into_one_simplified_layer_norm():
    kernels = _kernels("sampled-rmsnorm", rows=16, hidden=64)
    assert [k.op_type for k in kernels] == ["SimplifiedLayerNormalization"]
    assert kernels[0].outputs[0].shape == (1, 16, 64)


@pytest.mark.parametrize(("op", "dtypes"), [("CastF64F32", ("float64", "float32")),
                                             ("CastBoolF32", ("bool", "float32")),
                                             ("CastF32I64", ("float32", "int64"))])
def test_cast_blocks_convert_between_their_dtypes(op, dtypes):
    (cast,) = [k for k in _kernels("sampled-eltwise", rows=4, width=8, op=op) if k.op_type == "Cast"]
    assert (cast.inputs[0].dtype, cast.outputs[0].dtype) == dtypes


def test_pow_blocks_carry_their_exponent_in_the_signature():
    kernels = {op: next(k for k in _kernels("sampled-eltwise", rows=4, width=8, op=op) if k.op_type == "Pow")
               for op in ("Pow", "PowInv")}
    assert (kernels["Pow"].inputs[1].low, kernels["PowInv"].inputs[1].high) == (2.0, -1.0)
    assert kernels["PowInv"].inputs[0].low >= 0  # std::pow of a negative base takes twice as long: |x|, as real ones
    assert kernels["Pow"].kernel_id != kernels["PowInv"].kernel_id  # same shapes, another kernel


@pytest.mark.parametrize("eq", ["local-qk", "local-av"])
def test_local_attention_einsums_keep_heads_in_place(eq):
    (es,) = _main("sampled-einsum", _kernels("sampled-einsum", batch=2, m=4, k=8, n=6, eq=eq))
    assert dict(es.attrs)["equation"].startswith("...")
    assert es.outputs[0].shape == ((1, 2, 8, 4, 6) if eq == "local-qk" else (1, 2, 4, 8, 8))


@pytest.mark.parametrize(("params", "out"), [
    ({"c_in": 16, "c_out": 16, "groups": 16, "length": 100, "kernel": 7}, (1, 16, 100)),  # depthwise, same length
    ({"c_in": 1, "c_out": 32, "length": 400, "kernel": 10, "stride": 5}, (1, 32, 79)),  # wav2vec2's first conv
])
def test_conv1d_block_stays_a_plain_nchw_conv(params, out):
    (conv,) = _main("sampled-conv1d", _kernels("sampled-conv1d", **params))
    assert conv.domain == "" and conv.outputs[0].shape == out and len(dict(conv.attrs)["kernel_shape"]) == 1


@pytest.mark.parametrize(("op", "reduced", "out"), [("ReduceMeanOuter", "ReduceMean", (1, 1, 40)),
                                                    ("ReduceSumOuter", "ReduceSum", (1, 1, 40)),
                                                    ("ExpandRepeat", "Expand", (1, 6, 2, 40)),
                                                    ("AddOuter", "Add", (1, 6, 40, 40)),
                                                    ("MulOuter", "Mul", (1, 6, 40, 16)),
                                                    ("Transpose021", "Transpose", (1, 40, 6))])
def test_listed_coverage_ops_reduce_the_outer_axis_or_repeat_heads(op, reduced, out):
    (k,) = _kernels("sampled-eltwise", rows=6, width=40, op=op)
    assert (k.op_type, k.outputs[0].shape) == (reduced, out)
    if op.endswith("Outer") and reduced in ("Add", "Mul"):  # no input has the output's shape: an outer sum/product
        assert all(t.shape != out for t in k.inputs) and features.extract(k)["broadcast"] == 4


def test_scan_block_is_many_tiny_nodes_of_a_few_kernels():
    kernels = _kernels("sampled-scan", steps=6, channels=8, state=4)
    assert len(kernels) == 3 + 6 * 7 + 1  # three Splits, per step 3 Squeezes, Mul, Add, Unsqueeze, MatMul; a Concat
    assert len({k.kernel_id for k in kernels}) <= 10
