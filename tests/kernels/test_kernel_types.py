"""hase.kernels.types: the records kernels hand to measurement and prediction, and how light they are to import."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hase.kernels.types import KernelNode, KernelSpec, TensorSpec


def test_tensor_spec_sizes():
    assert TensorSpec("x", (2, 3, 4), "float32").numel == 24
    assert TensorSpec("x", (2, 3, 4), "float16").nbytes == 48
    assert TensorSpec("s", (), "int64").nbytes == 8  # a scalar has one element
    assert TensorSpec("e", (0, 5), "float32").nbytes == 0


def test_tensor_spec_dict_round_trip():
    t = TensorSpec("ids", (2, 7), "int64", const=False, low=0.0, high=49.0)
    d = t.to_dict()
    assert d == {"name": "ids", "shape": [2, 7], "dtype": "int64", "const": False, "low": 0.0, "high": 49.0}
    assert TensorSpec.from_dict(json.loads(json.dumps(d))) == t


def test_kernel_spec_json_round_trip_sorts_attributes():
    spec = KernelSpec("abc", "Conv", "", (("group", 1), ("dilations", [1, 1])),
                      (TensorSpec("x", (1, 3, 8, 8), "float32"), TensorSpec("w", (4, 3, 3, 3), "float32", const=True)),
                      (TensorSpec("y", (1, 4, 6, 6), "float32"),))
    text = spec.to_json()
    assert json.loads(text)["attrs"] == {"dilations": [1, 1], "group": 1}
    back = KernelSpec.from_json(text)
    assert back.attrs == (("dilations", [1, 1]), ("group", 1))
    assert back.inputs == spec.inputs and back.outputs == spec.outputs
    assert KernelSpec.from_json(back.to_json()) == back
    assert KernelNode(3, "conv1", back).spec.kernel_id == "abc"


@pytest.mark.parametrize("module", ["hase.kernels.types", "hase.measure.types", "hase.predict.features"])
def test_record_types_do_not_drag_the_measuring_chain(module):
    code = (f"import sys, {module}; "
            "print(sorted(m for m in sys.modules if m in ('onnxruntime', 'hase.kernels.split', "
            "'hase.kernels.graph', 'hase.kernels.probe', 'hase.runtime.sessions')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
