"""What ONNX Runtime says every tensor of an optimized graph is: shape, dtype and value range.

ONNX shape inference does not know the com.microsoft fused ops, so Hase asks ORT by running the graph.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from hase.errors import HaseError, first_line
from hase.kernels.inputs import np_dtype
from hase.kernels.types import TensorSpec
from hase.runtime import profile, sessions
from hase.runtime.types import EPConfig

_CPU = EPConfig(name="shape-probe", ep="cpu", intra_op_threads=1, opt_level="disabled")
# ORT profile type names -> numpy dtype names
_PROFILE_DTYPES = {"float": "float32", "double": "float64", "float16": "float16", "bfloat16": "bfloat16",
                   "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
                   "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool"}
_ORT_TENSOR = re.compile(r"tensor\((\w+)\)")  # a tensor NodeArg's type as ORT's Python API names it

class ShapesUnavailableError(HaseError):
    """ORT's type inference or profile does not give every node's output shapes (e.g. data-dependent shapes,
    unnamed nodes)."""


# Sessions that only optimize or probe shapes never run weights through GEMM/conv kernels for real
# timing, so they skip pre-packing (a second, packed copy of every weight).
NO_PREPACK = {"session.disable_prepacking": "1"}


def probe_ep(ep: EPConfig | None) -> EPConfig:
    """Where a graph optimized for `ep` is probed: the CPU EP (one thread, no further optimization) for a CPU
    config or none; the config's own provider otherwise, since a graph ORT optimized for CUDA may hold fusions
    only CUDA implements (`BiasSoftmax`: the first GPU run's split failed on every BERT probed on the CPU)."""
    if ep is None or ep.ep == "cpu":
        return _CPU
    return EPConfig(name="shape-probe", ep=ep.ep, intra_op_threads=1, opt_level="disabled", device_id=ep.device_id)


def observe_values(opt: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                   ep: EPConfig | None = None) -> dict[str, TensorSpec]:
    """Shape, dtype and [min, max] of every tensor in the graph, from a real ORT run (on `probe_ep(ep)`)."""
    values = _const_and_feed_specs(opt, feeds)
    for name, arr in run_all_values(opt, feeds, ep).items():
        values[name] = _spec_of(name, arr)
    return values


def _const_and_feed_specs(opt: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, TensorSpec]:
    """Specs of the initializers (constants) and the feeds (with their value ranges)."""
    values = {t.name: TensorSpec(t.name, tuple(t.dims), np_dtype(t.data_type), const=True)
              for t in opt.graph.initializer}
    values.update({name: _spec_of(name, arr) for name, arr in feeds.items()})
    return values


def run_all_values(opt: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                   ep: EPConfig | None = None) -> dict[str, np.ndarray]:
    """Run an (already optimized) graph on `probe_ep(ep)` with every node output exposed as a graph output."""
    n_outputs = len(opt.graph.output)
    have = {o.name for o in opt.graph.output}
    for node in opt.graph.node:
        for out in node.output:
            if out and out not in have:
                opt.graph.output.append(onnx.ValueInfoProto(name=out))
                have.add(out)
    try:
        probe_bytes = opt.SerializeToString()
    finally:
        del opt.graph.output[n_outputs:]  # the caller's graph is left as it was (no copy of the weights)
    sess = sessions.make_session(probe_bytes, probe_ep(ep), config=NO_PREPACK)
    del probe_bytes
    names = [o.name for o in sess.get_outputs()]
    try:
        arrays = sess.run(names, dict(feeds))
    except Exception as exc:
        raise HaseError(f"ONNX Runtime failed to run the model: {first_line(exc)}") from exc
    return dict(zip(names, arrays, strict=True))


def _spec_of(name: str, arr: np.ndarray) -> TensorSpec:
    """Shape, dtype and observed [min, max] of finite values ([-1, 1] when there are none)."""
    arr = np.asarray(arr)
    low, high = -1.0, 1.0
    if arr.size and arr.dtype != object:
        vals = arr.astype(np.float64) if arr.dtype == np.bool_ else arr
        finite = vals[np.isfinite(vals)] if np.issubdtype(vals.dtype, np.floating) else vals
        if finite.size:
            low, high = float(finite.min()), float(finite.max())
    return TensorSpec(name, tuple(int(d) for d in arr.shape), arr.dtype.name, False, low, high)


def infer_shapes(opt: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                 ep: EPConfig | None = None) -> dict[str, TensorSpec]:
    """Shape and dtype of every tensor as ONNX Runtime's own type inference gives them when it loads the
    optimized graph (it knows the fused com.microsoft ops), with no run and no weights: the initializers ORT
    stored externally become graph inputs of their type. What `observe_shapes` learns from a run, at a
    fraction of the cost (no value ranges either).

    Raises:
        ShapesUnavailableError: ORT leaves a node output without a static shape (data-dependent shapes), or
            cannot load the graph this way; a run (`observe_shapes`) then tells.
    """
    values = _const_and_feed_specs(opt, feeds)
    try:
        sess = sessions.make_session(_weightless(opt).SerializeToString(), probe_ep(ep), config=NO_PREPACK,
                                     log_severity=4)
    except HaseError as exc:
        raise ShapesUnavailableError(f"ORT cannot load the graph without its weights ({first_line(exc)})") from exc
    inferred = {o.name: (str(o.type), o.shape) for o in sess.get_outputs()}
    for node in opt.graph.node:
        for name in node.output:
            if not name:
                continue
            ort_type, shape = inferred.get(name, ("", None))
            match = _ORT_TENSOR.fullmatch(ort_type)
            if match is None or shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ShapesUnavailableError(f"ORT infers no static shape for {name!r} of node {node.name!r} "
                                        f"({ort_type or 'no type'} {shape})")
            values[name] = TensorSpec(name, tuple(shape), _PROFILE_DTYPES.get(match[1], match[1]))
    return values


def _weightless(opt: onnx.ModelProto) -> onnx.ModelProto:
    """The graph with its externally stored initializers as graph inputs and every node output as a graph
    output: what ORT needs to infer every shape, without a byte of weights."""
    light = onnx.ModelProto(ir_version=opt.ir_version, opset_import=opt.opset_import, functions=opt.functions)
    g, src = light.graph, opt.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    declared = {vi.name for vi in src.input}
    for t in src.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            g.initializer.append(t)
        elif t.name not in declared:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    have = {o.name for o in src.output}
    for node in src.node:
        for out in node.output:
            if out and out not in have:
                g.output.append(onnx.ValueInfoProto(name=out))
                have.add(out)
    return light


def observe_shapes(opt: onnx.ModelProto, path: str | os.PathLike[str],
                   feeds: Mapping[str, np.ndarray], ep: EPConfig | None = None) -> dict[str, TensorSpec]:
    """Shape and dtype of every tensor from one profiled ORT run of the optimized model file (no value
    ranges); cheaper than `observe_values` since no tensor is kept alive for inspection."""
    values = _const_and_feed_specs(opt, feeds)
    with tempfile.TemporaryDirectory(prefix="hase_probe_") as tmp:
        sess = sessions.make_session(str(path), probe_ep(ep), profile_prefix=str(Path(tmp) / "probe"),
                                     config=NO_PREPACK)
        try:
            sess.run(None, dict(feeds))
        except Exception as exc:
            raise HaseError(f"ONNX Runtime failed to run the model: {first_line(exc)}") from exc
        shapes = _output_shapes(sess.end_profiling())
    for node in opt.graph.node:
        outs = shapes.get(node.name)
        if outs is None or len(outs) != len(node.output):
            raise ShapesUnavailableError(f"ORT's profile has no output shapes for node {node.name!r}")
        for name, entry in zip(node.output, outs, strict=True):
            if name:
                (dtype, shape), = entry.items()
                values[name] = TensorSpec(name, tuple(int(d) for d in shape), _PROFILE_DTYPES.get(dtype, dtype))
    return values


def _output_shapes(profile_path: str | os.PathLike[str]) -> dict[str, list[dict[str, list[int]]]]:
    """Node name -> ORT's `output_type_shape` (one `{dtype: shape}` per output) from a profile's kernel_time
    events; the last run of a node wins."""
    records = profile.profile_events(profile.read_trace(profile_path), source=str(profile_path))
    return {ev.node_name: list(ev.args.get(profile.OUTPUT_TYPE_SHAPE,
                                           [])) for ev in records if ev.kind == profile.KERNEL_TIME}
