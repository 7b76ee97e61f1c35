"""Which of a CUDA session's CPU nodes ONNX Runtime prefers on the CPU on purpose: shape computations.

ORT's partitioner (`GetCpuPreferredNodes`, onnxruntime/core/framework/fallback_cpu_capability.cc) moves to the
CPU every node that only computes on small CPU tensors: starting from the outputs the CUDA kernels leave in host
memory (`Shape`, `Size`), it walks the consumers in topological order and places a node on the CPU when each of
its inputs is a CPU tensor, a small initializer (at most 100 elements; `Constant` outputs count, ORT turns them
into initializers) or a graph input, none is float16/bfloat16, and the CUDA kernel does not read that input from
host memory anyway (Reshape's shape, Slice's starts/ends, ...). Those nodes are not CPU *fallbacks* (ops without
a CUDA kernel): counting them as such blamed every exported transformer for its shape subgraph.
This is a re-implementation from the source, not ORT's own answer: `split_cpu_nodes` applies it only to the
nodes a real profile placed on the CPU. Pure functions over an `onnx.GraphProto`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx

SMALL_INITIALIZER_ELEMENTS = 100  # ORT's kSmallInitializerThreshold
CPU_OUTPUT_OPS = frozenset({"Shape", "Size"})  # CUDA kernels whose output lives in host memory
#: op type -> inputs the CUDA kernel reads from host memory (InputMemoryType<OrtMemTypeCPUInput>)
CPU_INPUTS_OF_CUDA_KERNELS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}), "Expand": frozenset({1}), "Unsqueeze": frozenset({1}), "Squeeze": frozenset({1}),
    "Slice": frozenset({1, 2, 3, 4}), "ConstantOfShape": frozenset({0}), "Tile": frozenset({1}),
    "Range": frozenset({0, 1, 2}), "TopK": frozenset({1}), "Resize": frozenset({1, 2, 3}),
    "Upsample": frozenset({1}), "Pad": frozenset({1, 2, 3}), "OneHot": frozenset({1}),
}
_HALF_TYPES = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})


@dataclass(frozen=True)
class CpuPlacement:
    """A CUDA session's CPU nodes split by cause: `shape` (ORT's deliberate placement of shape computations)
    and `fallback` (everything else: ops with no CUDA kernel, or placements this rule does not explain)."""

    shape: frozenset[str]
    fallback: frozenset[str]


def split_cpu_nodes(graph: onnx.GraphProto, cpu_nodes: Iterable[str]) -> CpuPlacement:
    """Split the nodes a profile shows on CPUExecutionProvider (`cpu_nodes`, by node name) into shape-subgraph
    placements and true fallbacks. Names not in `graph` count as fallbacks.

    Example: Shape(x) -> Gather(., 0) -> Unsqueeze -> Concat -> Reshape(y, .), with Gather, Unsqueeze and Concat
    on the CPU -> shape {Gather, Unsqueeze, Concat}, fallback {}.
    """
    on_cpu = set(cpu_nodes)
    shape = shape_subgraph_nodes(graph, on_cpu)
    return CpuPlacement(shape=frozenset(on_cpu & shape), fallback=frozenset(on_cpu - shape))


def shape_subgraph_nodes(graph: onnx.GraphProto, on_cpu: set[str]) -> set[str]:
    """Names of the nodes ORT's rule places on the CPU; a node of `on_cpu` the rule does not explain is a
    fallback, and its outputs are CPU tensors for the nodes after it (as in ORT)."""
    small = _small_constants(graph)
    graph_inputs = {i.name for i in graph.input}
    half = _half_tensors(graph)
    cpu_tensors: set[str] = set()
    placed: set[str] = set()
    for node in graph.node:  # ONNX graphs are topologically sorted
        if node.op_type in CPU_OUTPUT_OPS and node.name not in on_cpu:
            cpu_tensors.update(node.output)
            continue
        if _prefers_cpu(node, cpu_tensors, small | graph_inputs, half):
            placed.add(node.name)
            cpu_tensors.update(node.output)
        elif node.name in on_cpu:
            cpu_tensors.update(node.output)
    return placed


def _prefers_cpu(node: onnx.NodeProto, cpu_tensors: set[str], free: set[str], half: set[str]) -> bool:
    """ORT's test for one candidate: some input is a CPU tensor, every input is one or free (small initializer,
    graph input), none is half precision, and none is an input the CUDA kernel already reads from the host."""
    inputs = [(i, name) for i, name in enumerate(node.input) if name]
    if not any(name in cpu_tensors for _, name in inputs):
        return False
    host_inputs = CPU_INPUTS_OF_CUDA_KERNELS.get(node.op_type, frozenset())
    for i, name in inputs:
        if name in half:
            return False
        if name in free:
            continue
        if name not in cpu_tensors or i in host_inputs:
            return False
    return True


def _small_constants(graph: onnx.GraphProto) -> set[str]:
    """Initializers and Constant-node outputs of at most SMALL_INITIALIZER_ELEMENTS elements."""
    small = {t.name for t in graph.initializer if int(np.prod(t.dims, dtype=np.int64)) <= SMALL_INITIALIZER_ELEMENTS}
    for node in graph.node:
        if node.op_type != "Constant":
            continue
        value = next((a for a in node.attribute if a.name == "value"), None)
        n = int(np.prod(value.t.dims, dtype=np.int64)) if value is not None and value.HasField("t") else 1
        if n <= SMALL_INITIALIZER_ELEMENTS:
            small.update(node.output)
    return small


def _half_tensors(graph: onnx.GraphProto) -> set[str]:
    """Tensors whose declared type (inputs, value_info, initializers) is float16 or bfloat16."""
    out = {t.name for t in graph.initializer if t.data_type in _HALF_TYPES}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.tensor_type.elem_type in _HALF_TYPES:
            out.add(vi.name)
    return out
