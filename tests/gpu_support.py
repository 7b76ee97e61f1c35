"""Shared by the `gpu`-marked tests: skip (with the reason) unless a real CUDA session runs here."""
from __future__ import annotations

import functools

import pytest

from hase.measure.types import EPConfig

CUDA_EP = EPConfig(name="cuda0", ep="cuda", opt_level="all")


@functools.cache
def cuda_skip_reason() -> str:
    """'' when a real session runs on CUDAExecutionProvider, else why not (never raises on a CPU machine)."""
    from onnx import TensorProto, helper

    from hase.measure import runtime

    try:
        ort = runtime.ort()
    except Exception as exc:  # no onnxruntime at all
        return f"onnxruntime cannot be imported: {exc}"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return "CUDAExecutionProvider not in this onnxruntime build (the CPU wheel)"
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    runtime.preload_cuda(CUDA_EP)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        return (f"CUDAExecutionProvider not in a real session's providers ({sess.get_providers()}): "
                f"no GPU or no CUDA libraries")
    return ""


def require_cuda() -> None:
    """Skip the calling test unless CUDA really runs here."""
    reason = cuda_skip_reason()
    if reason:
        pytest.skip(reason)


def require_cupti() -> None:
    """Skip unless CUDA runs and cupti-python imports."""
    require_cuda()
    from hase.profiling.gpu.cupti import cupti_available

    if not cupti_available():
        pytest.skip("cupti-python not installed (pip install hase[gpu])")
