"""hase.kernels.split: single-kernel models, signatures, dedupe, and the chained-kernels correctness check."""
from __future__ import annotations

import csv
import json
import re

import numpy as np
import onnx
import pytest
from conftest import EXPORTED_MODELS, conv_bn_relu_model, exported_model

from hase.cli import main
from hase.kernels import graph, split
from hase.measure import runtime
from hase.measure.runtime import EPConfig

EP = EPConfig()


def run_chained(kg: graph.KernelGraph) -> dict[str, np.ndarray]:
    """Run every kernel model in order, feeding each the outputs of the ones before it."""
    values = dict(kg.feeds)
    for node, km in split.iter_kernel_models(kg):
        onnx.checker.check_model(km) if not node.domain else None
        sess = runtime.make_session(km.SerializeToString(), EP, opt_level="disabled")
        outs = sess.run(None, {i.name: values[i.name] for i in sess.get_inputs()})
        values.update({o.name: a for o, a in zip(sess.get_outputs(), outs, strict=True)})
    return values


def assert_chain_matches_model(model: onnx.ModelProto) -> graph.KernelGraph:
    kg = graph.kernel_graph(model, EP)
    values = run_chained(kg)
    full = runtime.make_session(model.SerializeToString(), EP).run(None, kg.feeds)
    for out, ref in zip(model.graph.output, full, strict=True):
        np.testing.assert_allclose(values[out.name], ref, rtol=1e-4, atol=1e-5)
    return kg


def test_chain_equals_model_conv():
    assert_chain_matches_model(conv_bn_relu_model())


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_chain_equals_model_exported(name):
    kg = assert_chain_matches_model(graph.load_model(exported_model(name)))
    assert any(n.domain == "com.microsoft" or n.op_type.startswith("Fused") for n in kg.nodes)


def zoo_specs_by_family():
    from hase.zoo import load_zoo_config

    seen = {}
    for spec in load_zoo_config(split_repo() / "configs" / "zoo_small.toml"):
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


def test_signatures_dedupe_identical_kernels():
    kg = graph.kernel_graph(conv_bn_relu_model(c=8), EP)
    nodes = split.split(kg)
    ids = [n.spec.kernel_id for n in nodes]
    assert len(ids) == len(nodes) and all(len(i) == 16 for i in ids)
    # same model again: same ids; other width: conv kernels differ
    again = [n.spec.kernel_id for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=8), EP))]
    wider = {n.spec.kernel_id for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=16), EP))}
    assert ids == again
    assert not set(ids) & wider - {n.spec.kernel_id for n in nodes if n.spec.op_type in ("Flatten",)}


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


def test_signature_roundtrip_and_constants():
    kg = graph.kernel_graph(conv_bn_relu_model(), EP)
    conv = next(n for n in split.split(kg) if n.spec.op_type == "FusedConv")
    assert [t.const for t in conv.spec.inputs] == [False, True, True]
    assert split.KernelSpec.from_json(conv.spec.to_json()) == conv.spec
    km = split.kernel_model(kg, kg.nodes[conv.node_idx])
    assert [i.name for i in km.graph.input] == [conv.spec.inputs[0].name]
    assert len(km.graph.initializer) == 2


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
        runtime.make_session(str(f), EP, opt_level="disabled")


def test_split_cli_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not onnx")
    assert main(["split", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a valid ONNX file" in err and "Traceback" not in err
