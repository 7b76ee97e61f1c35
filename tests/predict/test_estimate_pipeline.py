"""hase.predict.estimate.KernelGraphs: kernel graphs built ahead in background threads change no prediction.

`hase predict` builds each model's kernel graph (ORT's optimizer, which releases the GIL) in a background thread
while the predictor loads and while the previous model's kernels are predicted. These tests hold it to the
one-model-at-a-time path on real exported models and real ORT sessions: the same kernels, the same figures, bit
for bit, failures in their place.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import onnx
import pytest
from conftest import EXPORTED_MODELS, conv_bn_relu_model, exported_model

from hase.errors import HaseError
from hase.predict.bundle import load_bundle, manifest_ep_config, read_manifest
from hase.predict.estimate import KernelGraphs, ModelEstimate, PredictFailure, estimate_model, estimate_models
from hase.predict.locate import find_predictor


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(find_predictor("cpu-1t").path)


SUMS = ("latency_ms", "low_ms", "high_ms", "sum_ms")


def _facts(est: ModelEstimate) -> dict:
    """Everything of an estimate but the timings, with the kernels as a sorted list and the model sums apart.

    ONNX Runtime names the nodes it makes up with a process-wide counter (`ReorderOutput_token_195`) and orders
    the optimized graph by node name, so the same model can come back with other generated names and some
    kernels in another order: from one process to the next, or after other models in the same one, threads or
    not (the previous version's batch output varied so between two runs). The kernels themselves (ids, forests,
    predicted ms) never change; the sums over them can, in the last bits, with their order.
    """
    facts = {k: v for k, v in dataclasses.asdict(est).items() if k not in ("timings_s", *SUMS)}
    facts["kernels"] = sorted((re.sub(r"_token_\d+$", "", k["node_name"]), k["kernel_id"], k["op_type"], k["key"],
                               k["source"], k["pred_ms"]) for k in facts["kernels"])
    return facts


def _same(a: ModelEstimate, b: ModelEstimate) -> None:
    assert _facts(a) == _facts(b)  # every kernel, id, forest and predicted ms exactly
    for name in SUMS:
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12, abs=0), name


@pytest.mark.parametrize("workers", [1, 2])
def test_graphs_built_ahead_predict_exactly_as_one_at_a_time(bundle, tmp_path, workers):
    files = [exported_model(name) for name in EXPORTED_MODELS]
    onnx.save(conv_bn_relu_model(), tmp_path / "conv.onnx")
    files += [tmp_path / "conv.onnx", files[0]]  # a model twice: each occurrence predicted on its own
    with KernelGraphs(files, bundle.ep_config(), workers=workers) as graphs:
        ahead = estimate_models(files, bundle, graphs=graphs)
    for path, est in zip(files, ahead, strict=True):
        assert isinstance(est, ModelEstimate), est
        alone = estimate_model(path, bundle)
        assert est.model == str(path)
        _same(est, alone)
        assert est.timings_s["graph_s"] > 0 and est.timings_s["predict_s"] > 0


def test_a_failing_model_keeps_its_place_and_its_message(bundle, tmp_path):
    good = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), good)
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    files = [good, tmp_path / "junk.onnx", good]
    with pytest.raises(HaseError) as alone:
        estimate_model(tmp_path / "junk.onnx", bundle)
    results = estimate_models(files, bundle)
    assert [type(r) for r in results] == [ModelEstimate, PredictFailure, ModelEstimate]
    assert results[1] == PredictFailure(str(tmp_path / "junk.onnx"), str(alone.value))


def test_graphs_yield_in_order_with_errors_as_values(bundle, tmp_path):
    good = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), good)
    missing = tmp_path / "none.onnx"
    with KernelGraphs([missing, good, missing], bundle.ep_config()) as graphs:
        got = list(graphs)
    assert [p for p, _ in got] == [missing, good, missing]
    assert isinstance(got[0][1], HaseError) and "not found" in str(got[0][1])
    kg, seconds = got[1][1]
    assert kg.nodes and seconds > 0


def test_graphs_for_other_models_or_another_configuration_are_refused(bundle, tmp_path):
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    other = dataclasses.replace(bundle.ep_config(), opt_level="basic")
    with KernelGraphs([tmp_path / "m.onnx"], other) as graphs, pytest.raises(ValueError, match="configuration"):
        estimate_models([tmp_path / "m.onnx"], bundle, graphs=graphs)
    with KernelGraphs([tmp_path / "m.onnx"], bundle.ep_config()) as graphs, pytest.raises(ValueError, match="models"):
        estimate_models([tmp_path / "other.onnx"], bundle, graphs=graphs)
    with KernelGraphs([tmp_path / "m.onnx"], bundle.ep_config(), free_dims={"batch": 2}) as graphs, \
            pytest.raises(ValueError, match="shapes"):
        estimate_models([tmp_path / "m.onnx"], bundle, graphs=graphs)


def test_closing_early_waits_for_the_graph_being_built(bundle, tmp_path):
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    graphs = KernelGraphs([tmp_path / "m.onnx"] * 5, bundle.ep_config(), workers=1)
    first = next(iter(graphs))
    graphs.close()  # the rest are dropped; nothing is left running
    assert first[0] == tmp_path / "m.onnx" and not isinstance(first[1], HaseError)
    assert list(graphs) == []


def test_the_manifest_alone_gives_the_configuration(bundle):
    assert manifest_ep_config(read_manifest(Path(find_predictor("cpu-1t").path))) == bundle.ep_config()
