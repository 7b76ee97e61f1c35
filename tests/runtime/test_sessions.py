"""hase.runtime.sessions: what a user without the right ONNX Runtime wheel is told to install."""
from __future__ import annotations

import sys

import pytest

from hase.errors import HaseError
from hase.runtime import sessions
from hase.runtime.types import EPConfig


def test_a_missing_onnxruntime_names_the_extra_to_install(monkeypatch):
    """A wheel installed without an extra has no onnxruntime: the fix is pip's, not the checkout's `make setup`."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    with pytest.raises(HaseError, match=r'onnxruntime is not installed: `pip install "hase\[cpu\]"`') as err:
        sessions.ort()
    assert 'pip install "hase[gpu]"' in str(err.value) and "\n" not in str(err.value)


def test_a_missing_provider_names_the_gpu_extra():
    cuda = EPConfig(name="cuda-x", ep="cuda")
    if cuda.provider in sessions.ort().get_available_providers():
        pytest.skip("this onnxruntime build has the CUDA provider")
    with pytest.raises(HaseError, match=r'not available in this onnxruntime build .*`pip install "hase\[gpu\]"`'):
        sessions.check_provider(cuda)
