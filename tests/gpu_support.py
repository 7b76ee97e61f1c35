"""Shared by the `gpu`-marked tests: skip (with the reason) unless a real CUDA session runs here."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from hase.errors import first_line
from hase.runtime.types import EPConfig

CUDA_EP = EPConfig(name="cuda0", ep="cuda", opt_level="all")


def probe_model() -> bytes:
    """One Relu on 4 floats, at opset 17 and IR version 8 like the rest of the suite: left to itself, the GPU
    machine's onnx 1.23 writes IR 14, which its onnxruntime-gpu 1.31.1 refuses (`Unsupported model IR version`)."""
    from onnx import TensorProto, helper

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def probe_reason(ort: Any, preload: Callable[[], None]) -> str:
    """'' when a real session of `probe_model` runs on CUDAExecutionProvider with onnxruntime module `ort`, else
    why not; any exception of the probe (preloading the CUDA libraries, creating or running the session) is
    the reason, never raised."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return "CUDAExecutionProvider not in this onnxruntime build (the CPU wheel)"
    try:
        preload()
        sess = ort.InferenceSession(probe_model(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
        providers = list(sess.get_providers())
        sess.run(None, {"x": np.ones(4, dtype=np.float32)})
    except Exception as exc:  # the probe must never error a test: any failure is why CUDA is not usable here
        return f"the CUDA probe session failed: {type(exc).__name__}: {first_line(exc)}"
    if providers[0] != "CUDAExecutionProvider":
        return f"CUDAExecutionProvider not in a real session's providers ({providers}): no GPU or no CUDA libraries"
    return ""


@functools.cache
def cuda_skip_reason() -> str:
    """'' when a real session runs on CUDAExecutionProvider, else why not (never raises on a CPU machine)."""
    from hase.runtime import sessions

    try:
        ort = sessions.ort()
    except Exception as exc:  # no onnxruntime at all
        return f"onnxruntime cannot be imported: {exc}"
    return probe_reason(ort, lambda: sessions.preload_cuda(CUDA_EP))


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
