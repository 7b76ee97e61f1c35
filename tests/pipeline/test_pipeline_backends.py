"""The backend registry of the pipeline: registration, lookups that explain themselves, no import cycle."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hase.errors import HaseError
from hase.pipeline.backends import BackendRegistry, load_builtin_backends, open_executor
from hase.pipeline.devices import Device, OpenVinoCore, parse_device
from hase.pipeline.executors import ExecutorOptions, ExecutorRequest, InferResult


class _Echo:
    """A fake backend executor: returns its input, deterministic times."""

    device, input_shape, input_dtype, hw_sampled = "echo", None, None, False

    def __init__(self) -> None:
        self._x: np.ndarray | None = None

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        self._x = x

    def wait(self) -> InferResult:
        assert self._x is not None
        return InferResult(self._x, 0, 0)

    def finish(self) -> None:
        return None

    def close(self) -> None:
        pass


def _request(device: Device, **kw) -> ExecutorRequest:
    args = {"model": None, "fn": None, "threads": 1, "options": ExecutorOptions(), "core": OpenVinoCore()} | kw
    return ExecutorRequest(device, **args)


def test_registered_opener_opens_its_kind():
    registry = BackendRegistry()

    @registry.register("echo")
    def open_echo(request: ExecutorRequest) -> _Echo:
        return _Echo()

    ex = registry.open(_request(Device("e0", "echo")))
    ex.submit(np.ones(3))
    assert ex.wait().output.tolist() == [1.0, 1.0, 1.0]
    assert registry.kinds == ("echo",) and registry.opener("echo") is open_echo


def test_duplicate_registration_is_an_error():
    registry = BackendRegistry()
    registry.register("echo")(lambda request: _Echo())
    with pytest.raises(HaseError, match=r"backend 'echo' is already registered by .*cannot register"):
        registry.register("echo")(lambda request: _Echo())


def test_unknown_kind_lists_the_known_ones():
    registry = BackendRegistry()
    with pytest.raises(HaseError, match="unknown backend 'tpu': known backends are none"):
        registry.opener("tpu")
    with pytest.raises(HaseError, match="unknown backend 'tpu': known backends are host, openvino, ort"):
        open_executor(Device("tpu:0", "tpu"), model=None, fn=None, threads=1, options=ExecutorOptions(),
                      core=OpenVinoCore())


def test_builtin_backends_register_once():
    assert load_builtin_backends().kinds == ("host", "openvino", "ort")
    assert load_builtin_backends().kinds == ("host", "openvino", "ort")  # loading again registers nothing twice


def test_openers_check_what_they_run():
    registry = load_builtin_backends()
    with pytest.raises(HaseError, match="runs a Python function; give `function`"):
        registry.open(_request(parse_device("host")))
    with pytest.raises(HaseError, match="device cpu needs a model"):
        registry.open(_request(parse_device("cpu")))
    host = registry.open(_request(parse_device("host"), fn=lambda x: x * 2))
    host.submit(np.arange(3))
    assert host.wait().output.tolist() == [0, 2, 4] and host.finish() is None
    host.close()


def test_base_modules_import_no_backend():
    code = ("import sys; import hase.pipeline; import hase.pipeline.executors, hase.pipeline.backends; "
            "loaded = [m for m in ('hase.pipeline.ort_backend', 'hase.pipeline.ov_backend', "
            "'hase.pipeline.host_backend', 'openvino') if m in sys.modules]; "
            "from hase.pipeline.backends import load_builtin_backends; load_builtin_backends(); "
            "print(loaded, 'openvino' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False"  # and opening the backends' modules does not import OpenVINO itself
