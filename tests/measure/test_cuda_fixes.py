"""The CUDA measuring path's fixes that a CPU-only machine can check, on real ONNX Runtime CPU sessions:
the provider check reads the session's own providers, CPU fallbacks leave out ORT's shape-subgraph placement,
the GPU name follows the device id. The CUDA runs themselves are in test_gpu_cuda.py (marker `gpu`)."""
from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest

from hase.errors import HaseError
from hase.measure.model import cpu_fallback_count
from hase.profiling import decompose
from hase.profiling.gpu.cpu_preferred import shape_subgraph_nodes
from hase.profiling.run import profile_model
from hase.runtime import sessions
from hase.runtime.types import EPConfig

MODELS = Path(__file__).parents[1] / "data" / "models"


def _cpu_session(path: Path):
    return sessions.make_session(path, EPConfig(name="cpu-test"))


def test_a_session_that_fell_back_to_the_cpu_fails_the_cuda_check():
    sess = _cpu_session(MODELS / "hf_bert_tiny_s64_b2.onnx")  # what ORT gives when CUDA cannot load
    sessions.check_session_provider(sess.get_providers(), EPConfig(name="cpu-test"))
    with pytest.raises(HaseError, match=r"CUDAExecutionProvider was requested but the session runs on "
                                        r"CPUExecutionProvider: .*hase\[gpu\]"):
        sessions.check_session_provider(sess.get_providers(), EPConfig(name="cuda0", ep="cuda"))
    with pytest.raises(HaseError, match="no provider"):
        sessions.check_session_provider([], EPConfig(name="cuda0", ep="cuda"))


def test_cuda_asked_of_the_cpu_wheel_is_one_line():
    if "CUDAExecutionProvider" in sessions.ort().get_available_providers():
        pytest.skip("onnxruntime-gpu installed: this checks the CPU wheel")
    with pytest.raises(HaseError, match="not available in this onnxruntime build"):
        sessions.make_session(MODELS / "hf_bert_tiny_s64_b2.onnx", EPConfig(name="cuda0", ep="cuda"))


def test_preload_is_a_no_op_on_the_cpu_ep():
    sessions.preload_cuda(EPConfig(name="cpu-test"))  # never touches CUDA libraries for a CPU config


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine: the name is not empty there")
def test_gpu_info_without_nvidia_smi_is_empty_for_any_device_id():
    assert sessions.gpu_info(0) == ("", "") and sessions.gpu_info(3) == ("", "")
    assert sessions.device_metadata(EPConfig(name="cpu-test"))["gpu_name"] == ""


def test_cpu_fallbacks_leave_out_the_shape_subgraph(tmp_path):
    """A real profile and the graph its session ran (the GPT-2 export at `basic`, where Shape nodes survive):
    every node is on the CPU here, so the count is every node less the shape computations."""
    opt = tmp_path / "optimized.onnx"
    ep = EPConfig(name="cpu-basic", opt_level="basic")
    res = profile_model(MODELS / "hf_gpt2_tiny_s64_b1.onnx", ep, runs=1, warmup=0, workdir=tmp_path,
                        optimized_model_path=opt)
    graph = onnx.load(opt, load_external_data=False).graph
    summary = decompose.node_summary(res.events)
    shape = shape_subgraph_nodes(graph, set(summary[decompose.NODE_NAME]))
    assert shape, "the export's shape subgraph (Shape -> Gather -> Concat) should survive at `basic`"
    assert cpu_fallback_count(summary, graph) == len(summary) - len(shape & set(summary[decompose.NODE_NAME]))
    assert cpu_fallback_count(summary, None) == 0
