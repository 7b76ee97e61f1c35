"""hase.predict.features: per-family feature tables from kernel signatures, the registry, the generic fallback."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import NCHWC_HOST, conv_bn_relu_model

from hase.errors import HaseError
from hase.kernels import graph, split
from hase.kernels.types import KernelSpec, TensorSpec
from hase.predict import features
from hase.predict.features.common import fold_hw, hw_pads, hw_pair
from hase.predict.features.movement import IN_PLACE_OPS, moves_single_axis
from hase.predict.features.reduce import reduced_axes
from hase.predict.features.registry import feature_family
from hase.runtime.types import EPConfig


def spec(op, inputs, outputs, attrs=(), domain=""):
    """A KernelSpec from (shape, const) pairs; float32 tensors."""
    ins = tuple(TensorSpec(f"i{k}", tuple(s), "float32", c) for k, (s, c) in enumerate(inputs))
    outs = tuple(TensorSpec(f"o{k}", tuple(s), "float32") for k, s in enumerate(outputs))
    return KernelSpec(f"{op}-{inputs}-{attrs}", op, domain, tuple(sorted(attrs)), ins, outs)


def conv(cin=16, cout=32, hw=28, k=3, stride=1, group=1, op="Conv", act=None, domain=None):
    out = (hw + 2 * (k // 2) - k) // stride + 1
    attrs = [("group", group), ("kernel_shape", [k, k]), ("strides", [stride, stride]), ("pads", [k // 2] * 4)]
    if act:
        attrs.append(("activation", act))
    return spec(op, [((1, cin, hw, hw), False), ((cout, cin // group, k, k), True), ((cout,), True)],
                [(1, cout, out, out)], attrs, domain or ("com.microsoft" if op == "FusedConv" else ""))


def test_conv_flops_params_and_geometry():
    f = features.extract(conv(cin=16, cout=32, hw=28, k=3))
    assert f["flops"] == 2 * 32 * 28 * 28 * 16 * 9  # MACs x 2
    assert f["params"] == 32 * 16 * 9 + 32
    assert (f["h"], f["w"], f["out_h"], f["kh"], f["pad_h"]) == (28, 28, 28, 3, 2)
    assert f["in_bytes"] == 16 * 28 * 28 * 4 and f["weight_bytes"] == (32 * 16 * 9 + 32) * 4
    assert f["bytes"] == f["in_bytes"] + f["out_bytes"] + f["weight_bytes"]
    assert features.extract(conv(stride=2))["out_h"] == 14


def test_depthwise_and_grouped_convs_are_separated():
    dw = conv(cin=32, cout=32, group=32, op="FusedConv", act="Relu")
    grouped = conv(cin=32, cout=32, group=4)
    assert features.kernel_key(dw) == "FusedConv/dw-nchw" and features.kernel_key(conv()) == "Conv"
    blocked = conv(cin=32, cout=32, group=32, op="Conv", domain="com.microsoft.nchwc")
    assert features.kernel_key(blocked) == "Conv/dw"  # NCHWc and plain NCHW depthwise convs: two predictors
    assert features.kernel_key(grouped) == "Conv"  # grouped stays with dense, told apart by features
    g = features.extract(grouped)
    assert (g["groups"], g["cin_per_group"], g["depthwise"]) == (4, 8, 0)
    d = features.extract(dw)
    assert d["depthwise"] == 1 and d["flops"] == 2 * 32 * 28 * 28 * 9 and d["activation"] == 1


def test_matmul_dims_batch_and_transposes():
    mm = features.extract(spec("MatMul", [((2, 4, 64, 32), False), ((2, 4, 32, 16), False)], [(2, 4, 64, 16)]))
    assert (mm["batch"], mm["m"], mm["n"], mm["k"]) == (8, 64, 16, 32)
    assert mm["flops"] == 2 * 8 * 64 * 16 * 32 and mm["b_batched"] == 1 and mm["b_const"] == 0
    gemm = features.extract(spec("Gemm", [((128, 256), False), ((512, 256), True), ((512,), True)], [(128, 512)],
                          [("transB", 1)]))
    got = (gemm["m"], gemm["n"], gemm["k"], gemm["trans_b"], gemm["b_const"], gemm["has_bias"])
    assert got == (128, 512, 256, 1, 1, 1)
    vec = features.extract(spec("MatMul", [((64,), False), ((64, 10), True)], [(10,)]))
    assert (vec["m"], vec["n"], vec["k"]) == (1, 10, 64)


def test_einsum_is_a_matrix_product_with_its_dims_from_the_equation():
    """CvT's attention `bhlk,bhtk->bhlt` is q @ k^T batched over b, h: FLOPs of the product, not element counts."""
    scores = spec("Einsum", [((1, 2, 3136, 64), False), ((1, 2, 49, 64), False)], [(1, 2, 3136, 49)],
                  [("equation", "bhlk,bhtk->bhlt")])
    assert features.family_of("Einsum").name == "matmul"
    f = features.extract(scores)
    assert (f["batch"], f["m"], f["n"], f["k"], f["trans_b"]) == (2, 3136, 49, 64, 1)
    assert f["flops"] == 2 * 2 * 3136 * 49 * 64
    rel = spec("Einsum", [((1, 1, 56, 56, 96), False), ((56, 56, 96), False)], [(1, 1, 56, 56, 56)],
               [("equation", "byhwc,hkc->byhwk")])  # MViTv2's relative positions: batched over h
    assert (features.extract(rel)["batch"], features.extract(rel)["k"]) == (56, 96)
    local = spec("Einsum", [((1, 8, 64, 8, 32), False), ((1, 8, 224, 8, 32), False)], [(1, 8, 8, 64, 224)],
                 [("equation", "...qhd,...khd->...hqk")])  # LongT5's local attention: the ellipsis is batch
    f = features.extract(local)
    assert (f["batch"], f["m"], f["n"], f["k"], f["trans_b"]) == (64, 64, 224, 32, 1)
    ell = spec("Einsum", [((4, 8), False), ((8, 3), False)], [(4, 3)], [("equation", "...i,ij->...j")])
    assert (features.extract(ell)["m"], features.extract(ell)["k"]) == (4, 8)
    odd = spec("Einsum", [((4, 8), False), ((8, 3), False)], [(4, 3)], [("equation", "i,ij,jk->k")])
    assert features.extract(odd)["m"] == 12  # an equation it cannot read: one product per output element


def test_elementwise_broadcast_patterns():
    same = features.extract(spec("Add", [((1, 8, 4, 4), False), ((1, 8, 4, 4), False)], [(1, 8, 4, 4)]))
    scalar = features.extract(spec("Mul", [((1, 8, 4, 4), False), ((), True)], [(1, 8, 4, 4)]))
    row = features.extract(spec("Add", [((2, 64, 128), False), ((128,), True)], [(2, 64, 128)]))
    chan = features.extract(spec("Add", [((1, 8, 4, 4), False), ((1, 8, 1, 1), True)], [(1, 8, 4, 4)]))
    outer = features.extract(spec("Add", [((6, 32, 1), False), ((6, 1, 32), False)], [(6, 32, 32)]))
    state = features.extract(spec("Mul", [((1, 64, 1), False), ((1, 1, 16), False)], [(1, 64, 16)]))
    assert [x["broadcast"] for x in (same, scalar, row, chan, outer, state)] == [0, 1, 2, 3, 4, 4]
    assert row["broadcast_ratio"] == 128 and chan["inner_block"] == 1 and same["inner_block"] == 128


def test_reductions_infer_axes_from_shapes():
    assert reduced_axes((1, 48, 20, 20), (1, 48, 1, 1)) == [2, 3]
    assert reduced_axes((2, 64, 128), (2, 64)) == [2]
    r = features.extract(spec("ReduceMean", [((1, 48, 20, 20), False)], [(1, 48, 1, 1)]))
    assert (r["reduce_size"], r["n_axes"], r["last_axis_reduced"]) == (400, 2, 1)


def test_window_helpers_fold_1d_2d_3d_into_height_and_width():
    assert fold_hw([7]) == (1, 7) and fold_hw([4, 5]) == (4, 5) and fold_hw([2, 3, 5]) == (6, 5)
    assert fold_hw([]) == (1, 1) and fold_hw([], fill=0) == (0, 0)
    assert hw_pair(None, 2, 1) == (1, 1) and hw_pair([2], 1, 1) == (1, 2) and hw_pair([2, 4, 3], 3, 1) == (2, 3)
    padded = spec("MaxPool", [((1, 1, 8, 8), False)], [(1, 1, 10, 14)], [("pads", [1, 2, 1, 4])])
    assert hw_pads(padded, 2) == (2, 6)
    assert hw_pads(spec("MaxPool", [((1, 1, 8), False)], [(1, 1, 10)], [("pads", [1, 1])]), 1) == (0, 2)
    assert hw_pads(spec("MaxPool", [((1, 1, 8, 8), False)], [(1, 1, 8, 8)], [("pads", [1])]), 2) == (0, 0)
    pool = features.extract(spec("MaxPool", [((1, 4, 8, 8), False)], [(1, 4, 4, 4)],
                          [("kernel_shape", [3, 3]), ("strides", [2, 2]), ("pads", [1, 1, 1, 1])]))
    assert (pool["kh"], pool["stride_w"], pool["pad_h"], pool["out_h"], pool["window"]) == (3, 2, 2, 4, 9)


def test_movement_transpose_and_concat():
    t = features.extract(spec("Transpose", [((2, 64, 2, 64), False)], [(2, 2, 64, 64)], [("perm", [0, 2, 1, 3])]))
    assert t["perm_moved"] == 2 and t["last_axis_kept"] == 1 and t["inner_block"] == 64 and t["single_axis_move"] == 1
    xcit = features.extract(spec("Transpose", [((1, 196, 1, 4, 32), False)], [(1, 1, 4, 32, 196)],
                          [("perm", [2, 0, 3, 4, 1])]))
    assert xcit["single_axis_move"] == 0 and xcit["last_axis_kept"] == 0


def test_ops_ort_runs_in_place_move_no_bytes_whatever_their_size():
    big = features.extract(spec("Unsqueeze", [((1, 6, 256, 32), False), ((1,), True)], [(1, 6, 1, 256, 32)]))
    assert (big["flops"], big["bytes"]) == (0, 0) and big["in_elems"] == 6 * 256 * 32  # size is still a feature
    assert {features.family_of(op).name for op in IN_PLACE_OPS} == {"inplace"}
    assert features.family_of("Slice").name == "movement" and big["out_rank"] == 5
    copy = features.extract(spec("Transpose", [((1, 6, 256, 32), False)], [(1, 256, 6, 32)], [("perm", [0, 2, 1, 3])]))
    assert copy["bytes"] == 2 * 4 * 6 * 256 * 32


def test_recurrent_layers_have_their_steps_and_gates_from_a_real_lstm_and_gru():
    """The LSTM and GRU kernels ORT runs for the zoo's recurrent blocks (torch.onnx's layout): steps, batch, sizes,
    directions and gates from X [seq, batch, input] and W [dirs, gates x hidden, input]."""
    from hase import zoo

    for cell, dirs, gates in (("lstm", 1, 4), ("gru", 2, 3)):
        model = zoo.build_model(zoo.get_family("sampled-recurrent").spec(
            {"seq": 10, "batch": 3, "input": 20, "hidden": 8, "cell": cell, "dirs": dirs}))
        (k,) = [n.spec for n in split.split(graph.kernel_graph(model, EPConfig("cpu-1t")))]
        f = features.extract(k)
        assert features.family_of(k.op_type).name == "recurrent" and features.kernel_key(k) == cell.upper()
        assert (f["steps"], f["batch"], f["input_size"], f["hidden"], f["directions"], f["gates"]) == \
            (10, 3, 20, 8, dirs, gates)
        assert f["flops"] == 2 * 10 * 3 * dirs * gates * 8 * (20 + 8) and f["step_flops"] == 2 * 3 * gates * 64 * dirs
        assert f["weight_bytes"] == 4 * dirs * gates * 8 * (20 + 8 + 2)


@pytest.mark.parametrize(("perm", "single"), [
    ([0, 2, 3, 4, 1], True), ([0, 2, 1, 3], True), ([0, 3, 1, 2], True), ([1, 0], True), ([0, 1, 3, 2], True),
    ([2, 0, 3, 4, 1], False), ([0, 1, 2], False), ([3, 2, 1, 0], False), ([1, 0, 3, 2], False),
])
def test_single_axis_moves_are_orts_fast_transposes(perm, single):
    assert moves_single_axis(perm) is single
    c = features.extract(spec("Concat", [((1, 8, 4, 4), False), ((1, 8, 4, 4), False)], [(1, 16, 4, 4)], [("axis", 1)]))
    assert c["axis_from_end"] == 2 and c["inner_block"] == 16 and c["n_inputs"] == 2


def test_unknown_op_uses_generic_table():
    s = spec("NotARealOp", [((3, 5), False), ((5,), True)], [(3, 5)])
    assert not features.has_family("NotARealOp") and features.family_of("NotARealOp").name == features.GENERIC
    g = features.extract(s)
    assert g == features.generic_extract(s)
    assert (g["in_elems"], g["out_elems"], g["const_bytes"], g["max_rank"]) == (20, 15, 20, 2)


def test_every_family_has_flops_and_bytes_and_docs():
    doc = features.describe()
    assert set(doc["family"]) == {f.name for f in features.families()}
    assert doc["meaning"].str.len().min() > 3
    for fam in features.families():
        assert {"flops", "bytes"} <= set(fam.column_names)


def test_registry_checks_itself():
    with pytest.raises(ValueError, match="registered twice"):
        feature_family("conv", ("Nope",), (("flops", ""), ("bytes", "")))(lambda s: {})
    with pytest.raises(ValueError, match="already belong"):
        feature_family("another", ("Conv",), (("flops", ""), ("bytes", "")))(lambda s: {})
    with pytest.raises(ValueError, match="include"):
        feature_family("nobytes", ("Nope2",), (("flops", ""),))
    with pytest.raises(HaseError, match="known families are"):
        features.get_family("nope")


@pytest.mark.parametrize("opt_level", ["extended", "all"])
def test_features_of_a_real_kernel_graph(opt_level):
    kg = graph.kernel_graph(conv_bn_relu_model(c=8, hw=16), EPConfig(opt_level=opt_level))
    specs = [n.spec for n in split.split(kg)]
    keys = [features.kernel_key(s) for s in specs]
    nchwc = opt_level == "all" and NCHWC_HOST
    conv = "Conv" if nchwc else "FusedConv"  # NCHWc Conv at `all` on x86 (the activation fused in as well)
    assert conv in keys and "Gemm" in keys
    for s in specs:
        values = list(features.extract(s).values())
        assert all(math.isfinite(v) for v in values), s.op_type
    first = next(s for s in specs if s.op_type == conv)
    assert features.extract(first)["activation"] == 1  # the Relu, fused into the first convolution at both levels
    # the blocked NCHWc kernel and ORT's plain NCHW one (what real models run for convolutions the NCHWc transformer
    # leaves alone, e.g. large depthwise windows) differ severalfold in speed: a feature tells them apart
    assert features.extract(first)["nchwc"] == float(nchwc)
    # NCHWc pads the output channels to its block (8 or 16 on x86): the work the kernel really does
    c_out = first.inputs[1].shape[0]
    assert c_out % 8 == 0 if nchwc else c_out == 8
    assert features.extract(first)["flops"] == 2 * c_out * 16 * 16 * 3 * 9
    costs = features.cost_frame(specs)
    moved = costs[[s.op_type not in IN_PLACE_OPS for s in specs]]  # a Flatten before the Gemm moves nothing
    assert list(costs.columns) == ["key", "family", "flops", "bytes"] and np.all(moved["bytes"] > 0)
    reorders = [s for s in specs if s.op_type in ("ReorderInput", "ReorderOutput")]
    assert bool(reorders) == nchwc and all(features.family_of(s.op_type).name == "layout" for s in reorders)


def test_layout_reorders_into_and_out_of_nchwc():
    """ReorderInput pads the channels to the block; ReorderOutput keeps `channels` of them; an SE block's 1x1
    reorders span a plane of one element."""
    into = features.extract(spec("ReorderInput", [((1, 24, 16, 16), False)], [(1, 32, 16, 16)], [("channels_last", 0)],
                          "com.microsoft.nchwc"))
    assert (into["c_in"], into["c_out"], into["plane"], into["pad_channels"], into["reorder_in"]) == (24, 32, 256, 8, 1)
    out = features.extract(spec("ReorderOutput", [((2, 16, 1, 1), False)], [(2, 12, 1, 1)],
                         [("channels", 12), ("channels_last", 0)], "com.microsoft.nchwc"))
    assert (out["batch"], out["c_in"], out["c_out"], out["plane"], out["pad_channels"]) == (2, 16, 12, 1, 4)
    nhwc = features.extract(spec("ReorderInput", [((1, 7, 7, 24), False)], [(1, 32, 7, 7)], [("channels_last", 1)]))
    assert (nhwc["c_in"], nhwc["plane"], nhwc["channels_last"]) == (24, 49, 1)
    assert out["flops"] == 24 and out["bytes"] == (32 + 24) * 4


def test_softmax_axis_position_and_pad_is_no_resize():
    """Where the softmax axis lies decides ORT's path (CoaT's [1, 3137, 8, 8] over axis 1: 10x the time of the same
    data over axis 2 of [1, 8, 3137, 8]); a Pad's own mode attribute is not a Resize mode."""
    coat = features.extract(spec("Softmax", [((1, 3137, 8, 8), False)], [(1, 3137, 8, 8)], [("axis", 1)]))
    assert (coat["axis_from_end"], coat["inner"], coat["last_axis"], coat["axis_size"]) == (2, 64, 0, 3137)
    last = features.extract(spec("Softmax", [((1, 4, 64, 64), False)], [(1, 4, 64, 64)], [("axis", -1)]))
    assert (last["axis_from_end"], last["inner"], last["last_axis"]) == (0, 1, 1)
    pad = features.extract(spec("Pad", [((1, 8, 16, 8), False)], [(1, 8, 18, 8)], [("mode", "constant")]))
    cubic = features.extract(spec("Resize", [((1, 3, 240, 240), False)], [(1, 3, 224, 224)], [("mode", "cubic")]))
    assert pad["mode"] == -1 and cubic["mode"] == 2


def test_resize_coordinates_and_orts_quick_nearest_2x():
    """torch's 2x nearest upsampling (asymmetric, floor) takes ORT's row-copy path; 8x, or half-pixel, does not."""
    def resize(out, coords, nearest="floor"):
        return features.extract(spec("Resize", [((4, 24, 10, 10), False), ((4,), True)], [out],
                                     [("mode", "nearest"), ("coordinate_transformation_mode", coords),
                                      ("nearest_mode", nearest)]))
    torch2x = resize((4, 24, 20, 20), "asymmetric")
    assert (torch2x["coordinates"], torch2x["nearest_2x"], torch2x["mode"]) == (1, 1, 0)
    assert resize((4, 24, 80, 80), "asymmetric")["nearest_2x"] == 0
    half = resize((4, 24, 20, 20), "half_pixel", "round_prefer_floor")
    assert (half["coordinates"], half["nearest_2x"]) == (0, 0)
    gather = features.extract(spec("Gather", [((8, 4), False), ((2,), True)], [(2, 4)]))
    assert (gather["coordinates"], gather["nearest_2x"]) == (-1, 0)


def test_pow_general_from_the_exponent_the_signature_carries():
    def pow_spec(exponent):
        e = TensorSpec("e", (), "float32", True, exponent, exponent) if exponent is not None else \
            TensorSpec("e", (), "float32", True)
        return KernelSpec("p", "Pow", "", (), (TensorSpec("x", (4, 8), "float32"), e),
                          (TensorSpec("y", (4, 8), "float32"),))
    assert [features.extract(pow_spec(e))["pow_general"] for e in (2.0, 3.0, 0.5, -1.0, None)] == [0, 0, 1, 1, 1]
    assert features.extract(spec("Mul", [((4, 8), False), ((4, 8), False)], [(4, 8)]))["pow_general"] == -1


def test_general_pows_and_nearest_resizes_have_predictors_of_their_own():
    """ORT runs them as other kernels: std::pow (12x a square's time per element), a copy (not an interpolation)."""
    def pow_spec(exponent):
        e = TensorSpec("e", (), "float32", True, exponent, exponent)
        return KernelSpec("p", "Pow", "", (), (TensorSpec("x", (4, 8), "float32"), e),
                          (TensorSpec("y", (4, 8), "float32"),))
    assert [features.kernel_key(pow_spec(e)) for e in (2.0, 0.5)] == ["Pow", "Pow/general"]
    nearest = spec("Resize", [((1, 3, 8, 8), False)], [(1, 3, 16, 16)], [("mode", "nearest")])
    linear = spec("Resize", [((1, 3, 8, 8), False)], [(1, 3, 16, 16)], [("mode", "linear")])
    assert (features.kernel_key(nearest), features.kernel_key(linear)) == ("Resize/nearest", "Resize")
