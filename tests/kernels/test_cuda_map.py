"""hase.kernels.cuda_map: the CUDA EP's kernel graph from the CPU EP's `extended` graph, on a host without a GPU.

The rules were mined from the first GPU run; here each rewritten graph is run whole on the CPU EP (no further
optimization) and must give the original model's outputs, and `hase predict` of a CUDA configuration uses it."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from hase.cli import main
from hase.kernels import cuda_map, graph, split
from hase.predict.estimate import build_kernel_graph
from hase.runtime import sessions
from hase.runtime.types import EPConfig
from hase.zoo.build import build_model
from hase.zoo.registry import get_family

CUDA = EPConfig(name="h100-cuda", ep="cuda")
CASES = {  # zoo family -> a small variant of it, as in the GPU run's zoo
    "mobilenetv3": {"mode": "small", "width": 0.5, "resolution": 64, "batch": 1},
    "alexnet": {"width": 0.25, "resolution": 64, "batch": 1},
}


def _model(family: str) -> onnx.ModelProto:
    return build_model(get_family(family).spec(CASES[family]))


def _ops(kg: graph.KernelGraph) -> Counter[str]:
    return Counter(n.op_type for n in kg.nodes)


@pytest.mark.parametrize("family", sorted(CASES))
def test_the_mapped_graph_computes_what_the_model_computes(family):
    model = _model(family)
    cpu = graph.kernel_graph(model, cuda_map.cpu_config(CUDA))
    mapped = cuda_map.to_cuda(cpu, "all")
    assert mapped.opt_level == "all" and cpu.opt_level == cuda_map.CPU_LEVEL
    ops = _ops(mapped)
    assert not {"FusedConv", "FusedGemm"} & set(ops)
    if family == "alexnet":
        assert ops["Gemm"] == 3 and ops["Relu"] == 7  # 5 convs + 2 of the 3 Gemms carried a Relu
    else:
        assert ops["HardSwish"] > 0 and ops["HardSigmoid"] > 0  # squeeze-excitation gates: Conv + HardSigmoid
    run = sessions.make_session(mapped.model.SerializeToString(), EPConfig(opt_level="disabled"))
    got = run.run(None, mapped.feeds)
    want = sessions.make_session(model.SerializeToString(), EPConfig(opt_level="disabled")).run(None, mapped.feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert all(n.spec.op_type for n in split.split(mapped))  # every node has its spec, new tensors included


def test_x_times_hard_sigmoid_becomes_one_hard_swish():
    cpu = graph.kernel_graph(_model("mobilenetv3"), cuda_map.cpu_config(CUDA))
    inlined = sum(1 for n in cpu.nodes if n.op_type == "HardSigmoid" and not n.name)  # ORT's inlined HardSwish
    assert inlined > 0
    mapped = _ops(cuda_map.to_cuda(cpu, "all"))
    assert mapped["HardSwish"] == inlined
    assert mapped["Mul"] == _ops(cpu)["Mul"] - inlined  # the squeeze-excitation Muls stay


def test_predicting_a_cuda_configuration_here_builds_the_mapped_graph(tmp_path: Path):
    assert not sessions.provider_available(CUDA)  # the CPU wheel: what CI and this suite run on
    path = tmp_path / "m.onnx"
    onnx.save(_model("alexnet"), path)
    kg, seconds = build_kernel_graph(path, CUDA)
    assert kg.opt_level == "all" and seconds > 0
    assert Counter(n.op_type for n in kg.nodes)["Gemm"] == 3 and not kg.has_weights


def test_hase_predict_of_the_shipped_gpu_predictor_on_this_cpu_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "alexnet.onnx"
    onnx.save(_model("alexnet"), path)
    assert main(["predict", "--device", "h100-cuda", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "gives the latency on its own GPU machine" in err and "warning: this host differs" not in err
    assert '"device": "h100-cuda"' in out and '"latency_ms"' in out
