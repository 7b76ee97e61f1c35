"""The kernel graph ONNX Runtime's CUDA EP runs, built on a host without a GPU: the CPU EP's graph at level
`extended` (the fusions both EPs share, no NCHWc layout), rewritten where the two EPs differ.

The rules are the differences found on the first GPU run (H200, onnxruntime-gpu 1.31.1, level `all`, 2026-11-28):
of the 90 zoo models it measured, the CPU `extended` graph held the CUDA graph's kernels op for op once
  1. FusedConv(activation=A) is split back into Conv + A (ORT's CUDA EP kept Conv and Relu/Clip apart: 74 models),
  2. FusedGemm(activation=A) into Gemm + A (AlexNet, VGG: 10 models),
  3. x · HardSigmoid(x) is one HardSwish (CUDA fuses it; the CPU EP at `extended` does not: 6 MobileNetV3s).
`benchmarks/gpu_graph_map.py` re-checks them against a GPU store. What the rules do not know (the run skipped its
BERTs, see docs/gpu.md): CUDA-only fusions of transformer graphs such as BiasSoftmax (Add + Softmax), left as
the CPU graph has them.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hase.kernels.graph import KernelGraph
from hase.kernels.types import TensorSpec
from hase.runtime.types import EPConfig

#: the level at which the CPU EP's graph is built before the rules: what ORT fuses for every EP
CPU_LEVEL = "extended"
FUSED_WITH_ACTIVATION = {"FusedConv": "Conv", "FusedGemm": "Gemm"}
MS_DOMAIN = "com.microsoft"


def cpu_config(ep: EPConfig) -> EPConfig:
    """The CPU configuration whose graph `to_cuda` rewrites for the CUDA configuration `ep`."""
    return EPConfig(name=f"{ep.name}-on-cpu", ep="cpu", intra_op_threads=1, opt_level=CPU_LEVEL)


def to_cuda(kg: KernelGraph, opt_level: str) -> KernelGraph:
    """The CUDA EP's kernel graph from the CPU EP's `extended` one (`kg`), by the module's three rules."""
    model = onnx.ModelProto()
    model.CopyFrom(kg.model)
    values = dict(kg.values)
    consumers = Counter(name for n in kg.model.graph.node for name in n.input if name)
    nodes: list[onnx.NodeProto] = []
    fused_mul: set[str] = set()  # outputs of the Muls a HardSwish replaced
    for node in kg.model.graph.node:
        if node.op_type == "Mul" and node.output[0] in fused_mul:
            continue
        if node.op_type in FUSED_WITH_ACTIVATION and node.domain == MS_DOMAIN:
            nodes += _unfuse(node, model.graph, values)
            continue
        if node.op_type == "HardSigmoid" and consumers[node.output[0]] == 1:
            mul = _x_times(node, kg.model.graph.node)
            if mul is not None and _is_hard_swish(node):
                out = mul.output[0]  # ORT's inlined HardSwish function: unnamed nodes
                nodes.append(helper.make_node("HardSwish", [node.input[0]], [out], name=mul.name or f"{out}/HardSwish"))
                fused_mul.add(out)
                continue
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return dataclasses.replace(kg, model=model, values=values, opt_level=opt_level)


def _unfuse(node: onnx.NodeProto, graph: onnx.GraphProto, values: dict[str, TensorSpec]) -> list[onnx.NodeProto]:
    """FusedConv/FusedGemm -> the plain op into a new tensor, then its activation node."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    activation = attrs.pop("activation", b"")
    params = [float(p) for p in attrs.pop("activation_params", [])]
    act = activation.decode() if isinstance(activation, bytes) else str(activation)
    plain = FUSED_WITH_ACTIVATION[node.op_type]
    if not act:
        return [helper.make_node(plain, list(node.input), list(node.output), name=node.name, **attrs)]
    out = node.output[0]
    pre = f"{out}_pre_{act.lower()}"
    spec = values[out]
    values[pre] = TensorSpec(pre, spec.shape, spec.dtype)
    first = helper.make_node(plain, list(node.input), [pre], name=node.name, **attrs)
    return [first, _activation(act, params, pre, out, f"{node.name}/{act}", graph, values, spec.dtype)]


def _activation(act: str, params: list[float], x: str, y: str, name: str, graph: onnx.GraphProto,
                values: dict[str, TensorSpec], dtype: str) -> onnx.NodeProto:
    """The standalone activation node `act` with the fused node's `activation_params`."""
    if act == "Clip":  # opset >= 11: min and max are inputs
        names = []
        for which, v in zip(("min", "max"), params or [-np.inf, np.inf], strict=True):
            cname = f"{name}_{which}"
            graph.initializer.append(numpy_helper.from_array(np.array(v, dtype=dtype), cname))
            values[cname] = TensorSpec(cname, (), dtype, const=True)
            names.append(cname)
        return helper.make_node("Clip", [x, *names], [y], name=name)
    keys = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta")}.get(act, ())
    node = helper.make_node(act, [x], [y], name=name)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in zip(keys, params, strict=False))
    return node


def _x_times(hs: onnx.NodeProto, nodes: Iterable[onnx.NodeProto]) -> onnx.NodeProto | None:
    """The Mul that multiplies the HardSigmoid's output by its own input, if that is its consumer."""
    x, s = hs.input[0], hs.output[0]
    for n in nodes:
        if n.op_type == "Mul" and not n.domain and set(n.input) == {x, s} and len(n.input) == 2:
            return n
    return None


def _is_hard_swish(hs: onnx.NodeProto) -> bool:
    """HardSwish is x · HardSigmoid(x) with alpha 1/6 and beta 1/2 (ONNX's definition)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in hs.attribute}
    return bool(np.isclose(attrs.get("alpha", 0.2), 1 / 6, atol=1e-4) and np.isclose(attrs.get("beta", 0.5), 0.5))
