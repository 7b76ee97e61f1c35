"""Records the kernels stage hands to measurement and prediction: tensors, kernel signatures, node occurrences.

They import only numpy and the standard library, so features, datasets and predictors can use them without
loading the split -> graph -> probe -> runtime chain.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    """A tensor of a kernel or model: its exact shape, numpy dtype name, whether it is a constant
    (initializer) and the value range [low, high] that valid data has (inclusive)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    const: bool = False
    low: float = -1.0
    high: float = 1.0

    @property
    def nbytes(self) -> int:
        """Size of the tensor's data in bytes."""
        return self.numel * np.dtype(self.dtype).itemsize

    @property
    def numel(self) -> int:
        """Number of elements (1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, as stored inside a kernel signature."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "const": self.const,
                "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TensorSpec:
        """Inverse of `to_dict`."""
        return cls(**{**d, "shape": tuple(d["shape"])})


@dataclass(frozen=True)
class KernelSpec:
    """What a kernel is, independent of which model it came from; `kernel_id` hashes all of it."""

    kernel_id: str
    op_type: str
    domain: str
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def to_json(self) -> str:
        """The signature as JSON (stored with every kernel; the feature extractors read it)."""
        return json.dumps({
            "kernel_id": self.kernel_id, "op_type": self.op_type, "domain": self.domain,
            "attrs": dict(self.attrs),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KernelSpec:
        """Inverse of `to_json` (attributes come back sorted by name, as `node_spec` makes them)."""
        d = json.loads(text)
        return cls(d["kernel_id"], d["op_type"], d["domain"], tuple(sorted(d["attrs"].items())),
                   tuple(TensorSpec.from_dict(t) for t in d["inputs"]),
                   tuple(TensorSpec.from_dict(t) for t in d["outputs"]))


@dataclass(frozen=True)
class KernelNode:
    """One node occurrence in a model: position, name, and the kernel it is an instance of."""

    node_idx: int
    node_name: str
    spec: KernelSpec
