"""A small ONNX graph builder with shape-tracked tensors: the layers every zoo family is assembled from.

Weights come from the builder's seeded numpy Generator, so a family function called twice with the same
generator state yields byte-identical models. Shapes are tracked as the graph grows, so a family can read
channel counts and an input resolution that is too small fails with a clear message.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hase import limits
from hase.errors import HaseError

# ONNX IR version per default-domain opset, kept at what onnxruntime >= 1.17 accepts.
IR_VERSIONS = {17: 8, 18: 8, 19: 9, 20: 9}
ACTIVATIONS = ("relu", "relu6", "hswish", "hsigmoid", "sigmoid", "tanh", "none")
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


@dataclass(frozen=True)
class Tensor:
    """A value in the graph under construction: its name, static shape and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: int = FLOAT

    @property
    def channels(self) -> int:
        """Channel count of an NCHW (or NC...) tensor."""
        return self.shape[1]


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of `divisor`, never losing more than 10 % (the MobileNet rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def pool_out(size: int, k: int, stride: int, pad: int, ceil: bool = False, dilation: int = 1) -> int:
    """Output length of a convolution or pooling window along one spatial axis."""
    span = size + 2 * pad - dilation * (k - 1) - 1
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input (PyTorch/ONNX rule)
    return out


class GraphBuilder:
    """Accumulates nodes and initializers of one ONNX graph; layers return shape-tracked `Tensor`s."""

    def __init__(self, name: str, rng: np.random.Generator, opset: int = 17) -> None:
        if opset not in IR_VERSIONS:
            raise HaseError(f"opset {opset} is not supported: use one of {sorted(IR_VERSIONS)}")
        self.name = name
        self.rng = rng
        self.opset = opset
        self._nodes: list[onnx.NodeProto] = []
        self._inits: list[onnx.TensorProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._consts: dict[tuple[str, tuple[int, ...], bytes], str] = {}
        self._scope: list[str] = []
        self._count = 0
        self._max_tensor = limits.max_tensor_bytes()  # every tensor is sized as the graph grows (hase.limits)
        self._weight_bytes = 0

    # ---- plumbing -------------------------------------------------------------------------------------
    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix node and weight names with `name/` inside the block (like PyTorch's exported names)."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _prefix(self) -> str:
        return "/".join(self._scope) + "/" if self._scope else ""

    def op(self, op_type: str, inputs: Sequence[str], shapes: Sequence[Sequence[int]],
           dtype: int = FLOAT, **attrs: Any) -> list[Tensor]:
        """Append one node with len(shapes) outputs of element type `dtype`."""
        self._count += 1
        node_name = f"{self._prefix()}{op_type}_{self._count}"
        for shape in shapes:
            self._check_size(f"{op_type} output", shape, dtype)
        outs = [f"{node_name}_output_{i}" for i in range(len(shapes))]
        self._nodes.append(helper.make_node(op_type, list(inputs), outs, name=node_name, **attrs))
        return [Tensor(o, tuple(int(d) for d in s), dtype) for o, s in zip(outs, shapes, strict=True)]

    def op1(self, op_type: str, inputs: Sequence[str], shape: Sequence[int], dtype: int = FLOAT,
            **attrs: Any) -> Tensor:
        """Append one single-output node."""
        return self.op(op_type, inputs, [shape], dtype, **attrs)[0]

    def _check_size(self, what: str, shape: Sequence[int], dtype: int, weight: bool = False) -> None:
        """Refuse a tensor over the per-tensor limit, or weights over what one ONNX file holds, before drawing it."""
        np_type = helper.tensor_dtype_to_np_dtype(dtype)
        nbytes = limits.check_tensor(f"zoo model {self.name}: {what}", shape, np_type, self._max_tensor)
        if weight:
            self._weight_bytes += nbytes
            if self._weight_bytes > limits.ONNX_FILE_BYTES:
                raise HaseError(f"zoo model {self.name}: its weights need over {limits.format_gb(self._weight_bytes)}, "
                                f"more than one ONNX file holds (2 GB): use a smaller width, hidden size or vocab")

    def initializer(self, kind: str, array: np.ndarray) -> str:
        """Add `array` as a named initializer and return its name."""
        self._count += 1
        name = f"{self._prefix()}{kind}_{self._count}"
        self._inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, shape: Sequence[int], std: float) -> str:
        """A float32 weight drawn from N(0, std^2)."""
        self._check_size("weight", shape, FLOAT, weight=True)
        data = self.rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(std)
        return self.initializer("weight", data)

    def uniform(self, shape: Sequence[int], low: float, high: float) -> str:
        """A float32 parameter drawn from U(low, high)."""
        self._check_size("parameter", shape, FLOAT, weight=True)
        return self.initializer("param", self.rng.uniform(low, high, tuple(shape)).astype(np.float32))

    def const(self, values: Any, dtype: Any = np.float32) -> str:
        """A shared constant initializer (scalars, shapes, axes); equal constants are stored once."""
        array = np.asarray(values, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._count += 1
            name = f"const_{self._count}"
            self._inits.append(numpy_helper.from_array(array, name))
            self._consts[key] = name
        return self._consts[key]

    def input(self, name: str, shape: Sequence[int], dtype: int = FLOAT) -> Tensor:
        """Declare a graph input with a static shape."""
        self._check_size(f"input {name!r}", shape, dtype)
        self._inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        return Tensor(name, tuple(shape), dtype)

    def image_input(self, batch: int, resolution: int, channels: int = 3) -> Tensor:
        """The NCHW image input every CNN family starts from."""
        return self.input("input", (batch, channels, resolution, resolution))

    def output(self, t: Tensor, name: str) -> None:
        """Declare `t` a graph output under `name` (renames the producing node's output)."""
        for node in self._nodes:
            for i, out in enumerate(node.output):
                if out == t.name:
                    node.output[i] = name
            for i, inp in enumerate(node.input):
                if inp == t.name:
                    node.input[i] = name
        self._outputs.append(helper.make_tensor_value_info(name, t.dtype, list(t.shape)))

    def to_model(self, doc: str = "", metadata: dict[str, str] | None = None) -> onnx.ModelProto:
        """The finished model at this builder's opset, with the matching IR version."""
        graph = helper.make_graph(self._nodes, self.name, self._inputs, self._outputs, self._inits)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            ir_version=IR_VERSIONS[self.opset],
            producer_name="hase.zoo",
            doc_string=doc,
        )
        for key, value in (metadata or {}).items():
            model.metadata_props.add(key=key, value=value)
        return model

    # ---- convolutional layers -------------------------------------------------------------------------
    def conv(self, x: Tensor, out_c: int, k: int, stride: int = 1, groups: int = 1, bias: bool = False,
             pad: int | None = None, dilation: int = 1) -> Tensor:
        """Conv2d with 'same'-style padding by default and He-initialised weights."""
        n, in_c, h, w = x.shape
        if in_c % groups or out_c % groups:
            raise HaseError(f"{self.name}: {in_c}->{out_c} channels do not divide into {groups} groups")
        pad = (k - 1) // 2 * dilation if pad is None else pad
        oh, ow = (pool_out(s, k, stride, pad, dilation=dilation) for s in (h, w))
        self._check_spatial(oh, f"{k}x{k} conv")
        fan_in = in_c // groups * k * k
        inputs = [x.name, self.weight((out_c, in_c // groups, k, k), math.sqrt(2.0 / fan_in))]
        if bias:
            inputs.append(self.weight((out_c,), 0.01))
        return self.op1("Conv", inputs, (n, out_c, oh, ow), kernel_shape=[k, k], strides=[stride, stride],
                        pads=[pad] * 4, dilations=[dilation, dilation], group=groups)

    def bn(self, x: Tensor, gamma: float = 1.0) -> Tensor:
        """Inference BatchNormalization with random statistics; `gamma` scales the learned scale."""
        c = x.channels
        scale = self.initializer("bn_scale", (self.rng.uniform(0.8, 1.2, c) * gamma).astype(np.float32))
        bias = self.initializer("bn_bias", (self.rng.standard_normal(c) * 0.05).astype(np.float32))
        mean = self.initializer("bn_mean", (self.rng.standard_normal(c) * 0.05).astype(np.float32))
        var = self.uniform((c,), 0.8, 1.2)
        return self.op1("BatchNormalization", [x.name, scale, bias, mean, var], x.shape, epsilon=1e-5)

    def act(self, x: Tensor, kind: str) -> Tensor:
        """Activation by name: relu, relu6 (Clip 0..6), hswish, hsigmoid, sigmoid, tanh or none."""
        if kind == "none":
            return x
        if kind == "relu6":
            return self.op1("Clip", [x.name, self.const(0.0), self.const(6.0)], x.shape)
        if kind == "hsigmoid":
            return self.op1("HardSigmoid", [x.name], x.shape, alpha=1.0 / 6.0, beta=0.5)
        ops = {"relu": "Relu", "hswish": "HardSwish", "sigmoid": "Sigmoid", "tanh": "Tanh"}
        if kind not in ops:
            raise ValueError(f"unknown activation {kind!r}: use one of {ACTIVATIONS}")
        return self.op1(ops[kind], [x.name], x.shape)

    def conv_bn(self, x: Tensor, out_c: int, k: int, stride: int = 1, groups: int = 1, act: str = "relu",
                gamma: float = 1.0, pad: int | None = None) -> Tensor:
        """Conv (no bias) -> BatchNormalization -> activation, the unit ORT fuses into one FusedConv."""
        return self.act(self.bn(self.conv(x, out_c, k, stride, groups, pad=pad), gamma), act)

    def maxpool(self, x: Tensor, k: int, stride: int, pad: int = 0, ceil: bool = False) -> Tensor:
        """MaxPool with a square window."""
        return self._pool("MaxPool", x, k, stride, pad, ceil)

    def avgpool(self, x: Tensor, k: int, stride: int, pad: int = 0, ceil: bool = False) -> Tensor:
        """AveragePool with a square window (padding excluded from the mean)."""
        return self._pool("AveragePool", x, k, stride, pad, ceil)

    def _pool(self, op: str, x: Tensor, k: int, stride: int, pad: int, ceil: bool) -> Tensor:
        n, c, h, w = x.shape
        oh, ow = (pool_out(s, k, stride, pad, ceil) for s in (h, w))
        self._check_spatial(oh, f"{k}x{k} {op}")
        return self.op1(op, [x.name], (n, c, oh, ow), kernel_shape=[k, k], strides=[stride, stride],
                        pads=[pad] * 4, ceil_mode=int(ceil))

    def _check_spatial(self, size: int, what: str) -> None:
        if size < 1:
            raise HaseError(f"{self.name}: the input resolution is too small for a {what}; raise `resolution`")

    def gap(self, x: Tensor) -> Tensor:
        """GlobalAveragePool: NCHW -> NC11."""
        return self.op1("GlobalAveragePool", [x.name], (*x.shape[:2], 1, 1))

    def reduce_mean(self, x: Tensor, axes: Sequence[int], keepdims: bool = False) -> Tensor:
        """ReduceMean over `axes` (attribute before opset 18, input from 18 on)."""
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
        shape = shape if keepdims else [d for i, d in enumerate(shape) if i not in axes]
        if self.opset >= 18:
            return self.op1("ReduceMean", [x.name, self.const(list(axes), np.int64)], shape, keepdims=int(keepdims))
        return self.op1("ReduceMean", [x.name], shape, axes=list(axes), keepdims=int(keepdims))

    def flatten(self, x: Tensor) -> Tensor:
        """Flatten everything after the batch axis."""
        return self.op1("Flatten", [x.name], (x.shape[0], int(np.prod(x.shape[1:]))), axis=1)

    # ---- dense and tensor-shuffling layers ------------------------------------------------------------
    def gemm(self, x: Tensor, out: int, std: float | None = None, act: str = "none") -> Tensor:
        """Fully connected layer as Gemm(x, W^T) + b with W stored [out, in], as PyTorch exports it."""
        n, fan_in = x.shape
        w = self.weight((out, fan_in), std if std is not None else math.sqrt(1.0 / fan_in))
        b = self.weight((out,), 0.01)
        return self.act(self.op1("Gemm", [x.name, w, b], (n, out), alpha=1.0, beta=1.0, transB=1), act)

    def binary(self, op: str, a: Tensor | str, b: Tensor | str, shape: Sequence[int] | None = None) -> Tensor:
        """Elementwise Add/Sub/Mul/Div/Pow; a plain string operand is a constant's name (broadcast)."""
        if shape is None:
            shapes = [t.shape for t in (a, b) if isinstance(t, Tensor)]
            shape = np.broadcast_shapes(*shapes)
        names = [t.name if isinstance(t, Tensor) else t for t in (a, b)]
        dtype = next(t.dtype for t in (a, b) if isinstance(t, Tensor))
        return self.op1(op, names, shape, dtype)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise Add with broadcasting."""
        return self.binary("Add", a, b)

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        """Elementwise Mul with broadcasting."""
        return self.binary("Mul", a, b)

    def concat(self, xs: Sequence[Tensor], axis: int = 1) -> Tensor:
        """Concat along `axis` (channels by default)."""
        shape = list(xs[0].shape)
        shape[axis] = sum(t.shape[axis] for t in xs)
        return self.op1("Concat", [t.name for t in xs], shape, xs[0].dtype, axis=axis)

    def split(self, x: Tensor, sizes: Sequence[int], axis: int = 1) -> list[Tensor]:
        """Split along `axis` into pieces of `sizes` (the sizes are an int64 input, opset >= 13)."""
        axis = axis % len(x.shape)
        shapes = [(*x.shape[:axis], s, *x.shape[axis + 1:]) for s in sizes]
        return self.op("Split", [x.name, self.const(list(sizes), np.int64)], shapes, x.dtype, axis=axis)

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """Reshape to a static shape given as an int64 constant."""
        if int(np.prod(shape)) != int(np.prod(x.shape)):
            raise ValueError(f"cannot reshape {x.shape} to {tuple(shape)}")
        return self.op1("Reshape", [x.name, self.const(list(shape), np.int64)], shape, x.dtype)

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """Transpose by `perm`."""
        return self.op1("Transpose", [x.name], [x.shape[i] for i in perm], x.dtype, perm=list(perm))

    def unsqueeze(self, x: Tensor, axes: Sequence[int]) -> Tensor:
        """Unsqueeze with the axes as an int64 input (opset >= 13)."""
        shape = list(x.shape)
        for a in sorted(axes):
            shape.insert(a, 1)
        return self.op1("Unsqueeze", [x.name, self.const(list(axes), np.int64)], shape, x.dtype)

    def matmul(self, a: Tensor, b: Tensor | str, b_shape: Sequence[int] | None = None) -> Tensor:
        """MatMul with numpy broadcasting rules; `b` may be an initializer name with its `b_shape`."""
        bs = b.shape if isinstance(b, Tensor) else tuple(b_shape or ())
        batch = np.broadcast_shapes(a.shape[:-2], bs[:-2])
        shape = (*batch, a.shape[-2], bs[-1])
        return self.op1("MatMul", [a.name, b.name if isinstance(b, Tensor) else b], shape)

    def layer_norm(self, x: Tensor, eps: float = 1e-5) -> Tensor:
        """LayerNormalization over the last axis (opset 17), scale ~ 1 and bias ~ 0."""
        h = x.shape[-1]
        scale = self.initializer("ln_scale", (1.0 + self.rng.standard_normal(h) * 0.05).astype(np.float32))
        bias = self.initializer("ln_bias", (self.rng.standard_normal(h) * 0.02).astype(np.float32))
        return self.op1("LayerNormalization", [x.name, scale, bias], x.shape, axis=-1, epsilon=eps)

    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """Softmax along `axis`."""
        return self.op1("Softmax", [x.name], x.shape, axis=axis)
