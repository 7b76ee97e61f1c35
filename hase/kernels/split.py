"""Split a kernel graph into single-kernel ONNX models, with signatures that dedupe identical kernels.

A kernel is one node of ORT's optimized graph. Its constant inputs stay initializers (weights are
part of what it costs), its other inputs become graph inputs of the exact shapes and dtypes.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hase.errors import HaseError
from hase.files import write_atomic  # not at import time: `hase predict` splits without writing
from hase.kernels.graph import KernelGraph, kernel_graph, load_model
from hase.kernels.inputs import random_tensor
from hase.kernels.types import KernelNode, KernelSpec, TensorSpec
from hase.runtime.types import EPConfig

SMALL_CONST = 64  # constant inputs with at most this many elements are hashed by value (shapes, axes)
# ops whose CPU kernel branches on the value of a float scalar constant: that value is part of the kernel (its id,
# and the constant's [low, high] in the signature). ORT's Pow squares and cubes by multiplication and calls
# std::pow for any other exponent, 12x the time per element (1M floats: 0.27 ms for x^2 or x^3, 3.2 ms for x^-1)
VALUE_OPS = frozenset({"Pow"})
OPTIMIZED_FILE = "optimized.onnx"  # ORT's optimized graph (the kernel graph), written by split_to_dir
OPTIMIZED_WEIGHTS = "optimized.weights.bin"  # its initializers over 1 KB, only when it is over protobuf's 2 GB
PROTOBUF_MAX_BYTES = 2**31 - 1  # the largest message protobuf serializes


def _attr_value(attr: onnx.AttributeProto) -> Any:
    """A JSON-able, canonical form of an attribute value (tensors and graphs by shape/hash)."""
    v = helper.get_attribute_value(attr)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.TensorProto):
        arr = numpy_helper.to_array(v)
        return {"tensor": list(arr.shape), "dtype": arr.dtype.name, "sha": _sha(arr.tobytes())[:12]}
    if isinstance(v, onnx.GraphProto):
        return {"graph_sha": _sha(v.SerializeToString())[:12]}
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else (round(x, 7) if isinstance(x, float) else x)
                for x in v if not isinstance(x, (onnx.GraphProto, onnx.TensorProto))]
    if isinstance(v, float):
        return round(v, 7)
    return v


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def node_spec(kg: KernelGraph, node: onnx.NodeProto) -> KernelSpec:
    """The kernel signature of one node: op, domain, attributes, exact input/output tensor specs."""
    inits = kg.initializers
    ins: list[TensorSpec] = []
    sig_ins: list[list[Any] | None] = []
    for name in node.input:
        if not name:
            ins.append(TensorSpec("", (), "float32", const=True))
            sig_ins.append(None)
            continue
        spec = _known_spec(kg, node, name, "the ORT probe run did not produce it")
        spec = TensorSpec(name, spec.shape, spec.dtype, name in inits, spec.low, spec.high)
        value = _scalar_value(spec, inits) if node.op_type in VALUE_OPS else None
        if value is not None:
            spec = TensorSpec(name, spec.shape, spec.dtype, True, value, value)
        ins.append(spec)
        sig_ins.append(_input_signature(spec, inits) + ([round(value, 7)] if value is not None else []))
    outs = [kg.values[o] if o in kg.values else TensorSpec(o, (), "float32") for o in node.output]
    attrs = tuple(sorted((a.name, _attr_value(a)) for a in node.attribute))
    sig = {"op": node.op_type, "domain": node.domain, "attrs": attrs, "in": sig_ins,
           "out": [[list(o.shape), o.dtype] for o in outs if o.name]}
    kid = _sha(json.dumps(sig, sort_keys=True, default=str).encode())[:16]
    return KernelSpec(kid, node.op_type, node.domain, attrs, tuple(ins), tuple(outs))


def _known_spec(kg: KernelGraph, node: onnx.NodeProto, name: str, why: str = "") -> TensorSpec:
    """The spec the probe run observed for tensor `name`; a HaseError when it has none."""
    spec = kg.values.get(name)
    if spec is None:
        raise HaseError(f"no shape known for tensor {name!r} of node {node.name!r}" + (f": {why}" if why else ""))
    return spec


def _scalar_value(spec: TensorSpec, inits: Mapping[str, onnx.TensorProto]) -> float | None:
    """The value of a one-element float constant stored in the graph, else None."""
    init = inits.get(spec.name)
    if not spec.const or spec.numel != 1 or init is None or init.data_location == onnx.TensorProto.EXTERNAL:
        return None
    if spec.dtype not in ("float32", "float16", "float64"):
        return None
    return float(numpy_helper.to_array(init).reshape(-1)[0])


def _input_signature(spec: TensorSpec, inits: Mapping[str, onnx.TensorProto]) -> list[Any]:
    """What an input adds to a kernel id: shape, dtype, constness, and the value of a small integer constant."""
    entry: list[Any] = [list(spec.shape), spec.dtype, spec.const]
    if spec.const and spec.numel <= SMALL_CONST and spec.dtype not in ("float32", "float16", "float64"):
        entry.append(_sha(numpy_helper.to_array(inits[spec.name]).tobytes())[:12])
    return entry


def split(kg: KernelGraph) -> list[KernelNode]:
    """Every node of the kernel graph with its kernel signature, in execution (topological) order."""
    return [KernelNode(i, n.name, node_spec(kg, n)) for i, n in enumerate(kg.nodes)]


def unique_kernels(nodes: list[KernelNode]) -> dict[str, KernelNode]:
    """First occurrence of each distinct kernel, keyed by kernel id."""
    out: dict[str, KernelNode] = {}
    for kn in nodes:
        out.setdefault(kn.spec.kernel_id, kn)
    return out


def _outer_refs(node: onnx.NodeProto) -> list[str]:
    """Names a control-flow node's subgraphs read from the enclosing graph."""
    refs: list[str] = []

    def walk(g: onnx.GraphProto, defined: set[str]) -> None:
        defined = defined | {i.name for i in g.input} | {t.name for t in g.initializer}
        for n in g.node:
            for name in n.input:
                if name and name not in defined and name not in refs:
                    refs.append(name)
            for a in n.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    walk(sub, defined)
            defined |= set(n.output)

    for a in node.attribute:
        for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            walk(sub, set())
    return refs


def kernel_model(kg: KernelGraph, node: onnx.NodeProto) -> onnx.ModelProto:
    """A standalone ONNX model holding exactly this node; constant inputs stay initializers."""
    if not kg.has_weights:
        raise HaseError("this kernel graph was built without weights (with_weights=False): rebuild it with weights")
    inits = kg.initializers
    graph_inputs, initializers, seen = [], [], set()
    for name in list(node.input) + _outer_refs(node):
        if not name or name in seen:
            continue
        seen.add(name)
        if name in inits:
            initializers.append(inits[name])
        else:
            graph_inputs.append(_value_info(name, _known_spec(kg, node, name)))
    outputs = [_value_info(name, kg.values[name]) for name in node.output if name]
    g = helper.make_graph([node], f"kernel_{node.name}"[:200], graph_inputs, outputs, initializer=initializers)
    m = helper.make_model(g, opset_imports=list(kg.model.opset_import), producer_name="hase")
    m.ir_version = kg.model.ir_version
    return m


def _value_info(name: str, spec: TensorSpec) -> Any:
    """An ONNX ValueInfoProto named `name`, of the tensor's exact shape and dtype."""
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(spec.dtype)), spec.shape)


def kernel_feeds(spec: KernelSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """Valid random inputs for a kernel's non-constant inputs, within the values seen in the full model."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in spec.inputs:
        if t.name and not t.const and t.name not in out:
            out[t.name] = random_tensor(t, rng)
    return out


def iter_kernel_models(kg: KernelGraph) -> Iterator[tuple[onnx.NodeProto, onnx.ModelProto]]:
    """Each node with its single-kernel model, built lazily (kernel models hold copies of weights)."""
    for node in kg.nodes:
        yield node, kernel_model(kg, node)


def split_to_dir(model_path: str | os.PathLike[str], out: str | os.PathLike[str], ep: EPConfig,
                 input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """Split a model file and write `<kernel_id>.onnx` per unique kernel plus `kernels.csv`,
    `signatures.jsonl` and `optimized.onnx` (ORT's optimized graph, whose nodes kernels.csv names); each file
    appears only complete (written atomically).

    Returns a summary: node and unique-kernel counts, and per op type (nodes, unique kernels).
    """

    kg = kernel_graph(load_model(model_path, input_shapes), ep)
    nodes = split(kg)
    uniq = unique_kernels(nodes)
    folder = Path(out)
    for kid, kn in uniq.items():
        write_atomic(folder / f"{kid}.onnx", kernel_model(kg, kg.nodes[kn.node_idx]).SerializeToString())
    write_atomic(folder / "kernels.csv", _kernels_csv(nodes))
    write_atomic(folder / "signatures.jsonl", "".join(kn.spec.to_json() + "\n" for kn in uniq.values()))
    _write_optimized(kg.model, folder)  # last: over 2 GB it moves the model's weights out
    by_op: dict[str, list[int]] = {}
    for n in nodes:
        by_op.setdefault(n.spec.op_type, [0, 0])[0] += 1
    for kn in uniq.values():
        by_op[kn.spec.op_type][1] += 1
    return {"model": str(model_path), "out": str(folder), "n_nodes": len(nodes), "n_unique": len(uniq),
            "optimized": str(folder / OPTIMIZED_FILE), "by_op": by_op}


def _write_optimized(model: onnx.ModelProto, folder: Path) -> None:
    """ORT's optimized graph as `optimized.onnx`, weights inline; over protobuf's 2 GB, its initializers over
    1 KB go to `optimized.weights.bin` beside it (ONNX external data), which changes `model` in place."""

    if model.ByteSize() <= PROTOBUF_MAX_BYTES:
        write_atomic(folder / OPTIMIZED_FILE, model.SerializeToString())
        return
    onnx.save_model(model, str(folder / OPTIMIZED_FILE), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=OPTIMIZED_WEIGHTS, size_threshold=1024)


def _kernels_csv(nodes: list[KernelNode]) -> str:
    """kernels.csv: one row per node in execution order, naming its kernel's file."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["node_idx", "node_name", "op_type", "domain", "kernel_id", "file"])
    for n in nodes:
        w.writerow([n.node_idx, n.node_name, n.spec.op_type, n.spec.domain, n.spec.kernel_id,
                    f"{n.spec.kernel_id}.onnx"])
    return buf.getvalue()
