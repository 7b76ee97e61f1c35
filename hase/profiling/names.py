"""Which node of a kernel graph a profiled node is, when ONNX Runtime names some nodes anew in every session.

Hase builds a model's kernel graph in one session and profiles the model in another, and joins the two by node
name. ORT's NCHWc transformer names the `ReorderOutput` nodes it adds from a counter that differs from one
session to the next, even for the same model in the same process: `ReorderOutput_token_382` is a
[2, 64, 7, 7] reorder in one session and a [2, 512, 56, 56] one in the next (PVT-v2-B1; 79 of GhostNetV2's 82
ReorderOutputs moved). Joined by name, those spans went to the wrong kernels. Here a profiled node keeps its name
where that name's node in the kernel graph has its output shape, and otherwise takes a node of the kernel graph
with the same op type and output shape that no other profiled node took.

    >>> align_names({"R_7": ("ReorderOutput", (1, 8, 4, 4))},
    ...             {"R_3": ("ReorderOutput", (1, 8, 4, 4)), "R_7": ("ReorderOutput", (1, 16, 2, 2))})
    {'R_7': 'R_3'}
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hase.kernels.types import KernelSpec
from hase.runtime import profile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Signature", "align_names", "kernel_signature", "profiled_signatures"]

#: a node's op type and the shape of its first output (None where the profile recorded no shape)
Signature = tuple[str, tuple[int, ...] | None]


def _first_shape(text: str) -> tuple[int, ...] | None:
    """The shape of the first entry of ORT's `output_type_shape` (`[{"float": [2, 64, 7, 7]}, ...]`)."""
    try:
        entries = json.loads(text) if text else []
        (shape,) = entries[0].values()
        return tuple(int(d) for d in shape)
    except (ValueError, TypeError, IndexError, AttributeError):
        return None


def kernel_signature(spec: KernelSpec) -> Signature:
    """A kernel graph node's signature: its op type and first output shape."""
    return spec.op_type, tuple(spec.outputs[0].shape) if spec.outputs else None


def profiled_signatures(events: pd.DataFrame) -> dict[str, Signature]:
    """Node name -> signature of every node with a kernel_time event in a profile's events DataFrame."""
    kt = events[events[profile.EVENT_KIND] == profile.KERNEL_TIME].drop_duplicates(profile.NODE_NAME, keep="last")
    return {str(n): (str(op), _first_shape(str(s))) for n, op, s in
            zip(kt[profile.NODE_NAME], kt[profile.OP_TYPE], kt[profile.OUTPUT_TYPE_SHAPE], strict=True)}


def align_names(profiled: Mapping[str, Signature], known: Mapping[str, Signature]) -> dict[str, str]:
    """Profiled node name -> the kernel graph's (`known`) name of the same node (module docstring). A profiled
    node whose name's node differs and that finds no free node of its signature keeps its own name unless a
    matched node took that name; then it is left out (it has no node in the kernel graph to stand for)."""
    out: dict[str, str] = {}
    pending = []
    for name, sig in profiled.items():
        mine = known.get(name)
        if mine is not None and (sig[1] is None or mine[1] is None or mine[1] == sig[1]):
            out[name] = name
        else:
            pending.append(name)
    free: dict[Signature, list[str]] = defaultdict(list)
    taken = set(out.values())
    for name, sig in known.items():
        if name not in taken:
            free[sig].append(name)
    for name in pending:
        spare = free.get(profiled[name])
        if spare:
            out[name] = spare.pop(0)
            taken.add(out[name])
    for name in pending:
        if name not in out and name not in taken:
            out[name] = name
    return out
