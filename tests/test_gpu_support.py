"""tests/gpu_support.py: the CUDA probe of the `gpu`-marked tests turns every failure into a skip reason."""
from __future__ import annotations

from typing import Any

import onnx
import pytest
from gpu_support import probe_model, probe_reason

from hase.runtime import sessions


class FakeOrt:
    """An onnxruntime module whose CUDA session does what the test says (`session` raises or returns it)."""

    def __init__(self, providers: list[str], session: Any) -> None:
        self.providers, self.session = providers, session

    def get_available_providers(self) -> list[str]:
        return self.providers

    def InferenceSession(self, data: bytes, providers: list[str]) -> Any:  # noqa: N802 - onnxruntime's own name
        if isinstance(self.session, Exception):
            raise self.session
        return self.session


class Session:
    def __init__(self, providers: list[str]) -> None:
        self.providers = providers

    def get_providers(self) -> list[str]:
        return self.providers

    def run(self, outputs: Any, feeds: Any) -> list[Any]:
        return [feeds["x"]]


CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_probe_model_sets_the_suite_ir_version_and_runs_on_the_cpu() -> None:
    data = probe_model()
    assert onnx.load_from_string(data).ir_version == 8
    sess = sessions.ort().InferenceSession(data, providers=["CPUExecutionProvider"])
    assert sess.run(None, {"x": [1.0, -1.0, 2.0, -2.0]})[0].tolist() == [1.0, 0.0, 2.0, 0.0]


@pytest.mark.parametrize("fail", [RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Unsupported model IR version: 14"),
                                  OSError("libcudnn.so.9: cannot open shared object file")])
def test_an_exception_in_the_session_is_the_skip_reason(fail: Exception) -> None:
    reason = probe_reason(FakeOrt(CUDA, fail), lambda: None)
    assert reason.startswith("the CUDA probe session failed") and str(fail).split(":")[0] in reason


def test_an_exception_in_preload_is_the_skip_reason() -> None:
    def preload() -> None:
        raise ImportError("preload_dlls: no nvidia package")

    assert "ImportError: preload_dlls: no nvidia package" in probe_reason(FakeOrt(CUDA, Session(CUDA)), preload)


def test_probe_reasons_without_cuda_and_with_a_silent_cpu_fallback() -> None:
    assert "the CPU wheel" in probe_reason(FakeOrt(["CPUExecutionProvider"], None), lambda: None)
    assert "no GPU or no CUDA libraries" in probe_reason(FakeOrt(CUDA, Session(["CPUExecutionProvider"])),
                                                          lambda: None)
    assert probe_reason(FakeOrt(CUDA, Session(CUDA)), lambda: None) == ""
