"""hase.kernels.split: single-kernel models, signatures, dedupe, and the chained-kernels correctness check."""
from __future__ import annotations

import csv
import json
import re

import numpy as np
import onnx
import pytest
from conftest import EXPORTED_MODELS, NCHWC, NCHWC_HOST, conv_bn_relu_model, exported_model

from hase.cli import main
from hase.kernels import graph, split
from hase.runtime import sessions
from hase.runtime.sessions import EPConfig

EP = EPConfig()  # ONNX Runtime's default level, `all`
LEVELS = ["extended", "all"]


def run_chained(kg: graph.KernelGraph, ep: EPConfig = EP) -> dict[str, np.ndarray]:
    """Run every kernel model in order, feeding each the outputs of the ones before it. Each kernel model runs
    with optimizations disabled, as `hase.measure.kernel` times it: it already is ORT's optimized kernel."""
    values = dict(kg.feeds)
    for node, km in split.iter_kernel_models(kg):
        onnx.checker.check_model(km) if not node.domain else None
        sess = sessions.make_session(km.SerializeToString(), ep, opt_level="disabled")
        outs = sess.run(None, {i.name: values[i.name] for i in sess.get_inputs()})
        values.update({o.name: a for o, a in zip(sess.get_outputs(), outs, strict=True)})
    return values


def assert_chain_matches_model(model: onnx.ModelProto, ep: EPConfig = EP) -> graph.KernelGraph:
    """The kernels of `model` at `ep`'s level, chained, give the full model's outputs at that level."""
    kg = graph.kernel_graph(model, ep)
    assert kg.opt_level == ep.opt_level
    values = run_chained(kg, ep)
    full = sessions.make_session(model.SerializeToString(), ep).run(None, kg.feeds)
    for out, ref in zip(model.graph.output, full, strict=True):
        np.testing.assert_allclose(values[out.name], ref, rtol=1e-4, atol=1e-5)
    return kg


@pytest.mark.parametrize("opt_level", LEVELS)
def test_chain_equals_model_conv(opt_level):
    kg = assert_chain_matches_model(conv_bn_relu_model(), EPConfig(opt_level=opt_level))
    nchwc = opt_level == "all" and NCHWC_HOST
    assert any(n.domain == NCHWC for n in kg.nodes) == nchwc


@pytest.mark.parametrize("opt_level", LEVELS)
@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_chain_equals_model_exported(name, opt_level):
    model = graph.load_model(exported_model(name))
    kg = assert_chain_matches_model(model, EPConfig(opt_level=opt_level))
    domains = {n.domain for n in kg.nodes}
    # ORT's contrib ops (attention, layer norms, fused convolutions and GEMMs) stand in the kernel graph
    assert domains & {"com.microsoft", NCHWC} or any(n.op_type.startswith("Fused") for n in kg.nodes)
    ops = {(n.domain, n.op_type) for n in kg.nodes}
    if any(n.op_type == "Conv" for n in model.graph.node) and opt_level == "all" and NCHWC_HOST:
        # a CNN at `all`: blocked convolutions, left through ReorderOutput kernels (entered through ReorderInput
        # unless the first convolution reads the 3-channel NCHW image itself); each one a kernel model of its
        # own above, run in the chain on the blocked tensors ORT hands between them
        assert {(NCHWC, "Conv"), (NCHWC, "ReorderOutput")} <= ops
    else:
        assert NCHWC not in domains


def zoo_specs_by_family():
    from hase.sampler.config import load_zoo

    seen = {}
    for spec in load_zoo(split_repo() / "configs" / "zoo_small.toml"):
        seen.setdefault(spec.family, spec)
    return seen


def split_repo():
    from conftest import REPO
    return REPO


@pytest.mark.parametrize("family", ["resnet", "mobilenetv2", "shufflenetv2", "densenet", "bert", "gpt", "vit"])
def test_chain_equals_model_zoo_families(family):
    from hase.zoo import build_model

    specs = zoo_specs_by_family()
    if family not in specs:
        pytest.fail(f"zoo_small.toml has no {family} family; it has {sorted(specs)}")
    assert_chain_matches_model(build_model(specs[family]))


@pytest.mark.parametrize("opt_level", LEVELS)
def test_signatures_dedupe_identical_kernels(opt_level):
    ep = EPConfig(opt_level=opt_level)
    kg = graph.kernel_graph(conv_bn_relu_model(c=16), ep)
    nodes = split.split(kg)
    ids = [n.spec.kernel_id for n in nodes]
    assert len(ids) == len(nodes) and all(len(i) == 16 for i in ids)
    # same model again: same ids; other width (16 and 32: whole NCHWc blocks, 8 or 16 channels): kernels differ
    again = [n.spec.kernel_id for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=16), ep))]
    wider = {n.spec.kernel_id for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=32), ep))}
    assert ids == again
    assert not set(ids) & wider - {n.spec.kernel_id for n in nodes if n.spec.op_type in ("Flatten",)}


def test_nchwc_kernels_are_identified_by_the_shapes_ort_computes():
    """At `all`, ORT pads a convolution's output channels to the NCHWc block (16 with AVX-512, 8 with AVX2): the
    kernel id follows the shapes ORT computes, so equal padded shapes are one kernel, measured once."""
    first = {}
    for c in (8, 16):
        nodes = split.split(graph.kernel_graph(conv_bn_relu_model(c=c), EP))
        first[c] = next(n.spec for n in nodes if n.spec.op_type in ("Conv", "FusedConv"))
        reorders = [n.spec.kernel_id for n in nodes if n.spec.op_type == "ReorderOutput"]
        assert len(set(reorders)) <= 1 and (len(reorders) >= 1) == NCHWC_HOST  # equal reorders: one kernel
        assert len(split.unique_kernels(nodes)) == len({n.spec.kernel_id for n in nodes})
    shapes = {c: [t.shape for t in (*s.inputs, *s.outputs)] for c, s in first.items()}
    assert (first[8].kernel_id == first[16].kernel_id) == (shapes[8] == shapes[16])
    channels = first[8].outputs[0].shape[1]
    assert channels % 8 == 0 and channels >= 8 if NCHWC_HOST else channels == 8


@pytest.mark.parametrize("name", ["hf_bert_tiny_s64_b2", "hf_gpt2_tiny_s64_b1"])
def test_transformer_repeats_are_measured_once(exported_dir, name):
    nodes = split.split(graph.kernel_graph(graph.load_model(exported_dir / f"{name}.onnx"), EP))
    blocks: dict[int, set[str]] = {}  # block index (from node names like /layer.1/ or /h.1/) -> its kernel ids
    for n in nodes:
        if m := re.search(r"/(?:layer|h)\.(\d+)/", n.node_name):
            blocks.setdefault(int(m.group(1)), set()).add(n.spec.kernel_id)
    assert len(blocks) == 2 and blocks[1] == blocks[0]  # identical blocks: the second adds no kernel to measure
    uniq = split.unique_kernels(nodes)  # what collect measures: each kernel at its first occurrence
    assert not any(re.search(r"/(?:layer|h)\.1/", uniq[k].node_name) for k in blocks[1])


@pytest.mark.parametrize("opt_level", LEVELS)
def test_signature_roundtrip_and_constants(opt_level):
    ep = EPConfig(opt_level=opt_level)
    kg = graph.kernel_graph(conv_bn_relu_model(), ep)
    nchwc = opt_level == "all" and NCHWC_HOST
    convs = [n for n in split.split(kg) if n.spec.op_type in ("Conv", "FusedConv")]
    conv = convs[0]  # Conv + BN + Relu: input, folded weights, folded bias
    assert (conv.spec.domain, conv.spec.op_type) == ((NCHWC, "Conv") if nchwc else ("com.microsoft", "FusedConv"))
    assert [t.const for t in conv.spec.inputs] == [False, True, True]
    assert split.KernelSpec.from_json(conv.spec.to_json()) == conv.spec
    km = split.kernel_model(kg, kg.nodes[conv.node_idx])
    assert [i.name for i in km.graph.input] == [conv.spec.inputs[0].name]
    assert len(km.graph.initializer) == 2
    sessions.make_session(km.SerializeToString(), ep, opt_level="disabled")  # ORT runs it as it stands
    # the second convolution and the residual Add: at `all` one kernel, the sum its fourth input (NCHWc Conv's Sum)
    assert [t.const for t in convs[1].spec.inputs] == ([False, True, True, False] if nchwc else [False, True, True])


def test_split_cli_writes_kernels(tmp_path, conv_model_path, capsys):
    out = tmp_path / "kernels"
    assert main(["split", str(conv_model_path), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    with open(out / "kernels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == summary["n_nodes"]
    assert len(list(out.glob("*.onnx"))) == summary["n_unique"] + 1  # the kernels and optimized.onnx
    assert not list(out.glob(".*"))  # no temporary file left behind by the atomic writes
    for f in out.glob("*.onnx"):
        sessions.make_session(str(f), EP, opt_level="disabled")


def test_split_cli_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not onnx")
    assert main(["split", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a valid ONNX file" in err and "Traceback" not in err
