"""Load and validate ONNX models, fix symbolic input shapes (`hase.kernels.shapes`), and build the kernel graph.

The kernel graph is the model as ONNX Runtime runs it: ORT's own optimizer (at the device config's
level, `extended` by default) fuses nodes (FusedConv, FusedGemm, com.microsoft Gelu/LayerNorm, ...)
and the saved optimized graph is what Hase splits. Tensor shapes and value ranges come from one ORT
run of that graph, since ONNX shape inference does not know the com.microsoft fused ops.

Prediction needs shapes, never values, and takes the cheap road (`with_weights=False`): the model is read
without its weights (`hase.kernels.lean`; ORT maps them from the file), the optimized weights are not
written out, and every shape comes from ORT's own type inference of the optimized graph (no run; a
shapes-only run where ORT leaves a shape open). The kernels, their ids and the prediction are the same.
"""
from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_model, uses_external_data

from hase.errors import HaseError
from hase.kernels import lean, probe
from hase.kernels.inputs import make_model_feeds
from hase.kernels.memory import check_model_memory
from hase.kernels.shapes import (  # noqa: F401 - the parsers stay importable from here, as before
    MAX_DIM,
    fix_input_shapes,
    parse_free_dims,
    parse_input_shapes,
)
from hase.kernels.types import TensorSpec
from hase.runtime import sessions
from hase.runtime.types import EPConfig

PathLike = str | os.PathLike[str]

log = logging.getLogger(__name__)

KNOWN_DOMAINS = {
    "", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc", "com.microsoft.experimental",
    "ai.onnx.preview.training", "ai.onnx.training", "ai.onnx.preview", "org.pytorch.aten", "com.ms.internal.nhwc",
}


def load_model(path: PathLike, input_shapes: Mapping[str, tuple[int, ...]] | None = None, *,
               weights: bool = True, free_dims: Mapping[str, int] | None = None) -> onnx.ModelProto:
    """Load and validate an ONNX file and give every input a static shape (`input_shapes` by input name,
    then `free_dims` by the name of a symbolic dimension, e.g. {"batch": 4}: see `fix_input_shapes`).

    weights=False reads the graph without its large weights (`hase.kernels.lean`): they stay in the file,
    referenced as external data that ONNX Runtime reads given `lean.EXTERNAL_FOLDER_CONFIG` = the file's folder.

    Raises HaseError for a missing or unreadable path (a directory, permission denied), a non-ONNX or truncated
    file, a missing external-data file, an op from a domain ONNX Runtime does not know, or an input whose shape
    is symbolic (and not given) or empty.
    """
    p = Path(path)
    _check_readable(p)
    model = _read_lean(p) if not weights else None
    if model is None:
        model = _read(p)
    if not model.graph.node:
        raise HaseError(f"{p} has no graph nodes: is it an ONNX model file?")
    check_domains(model)
    fix_input_shapes(model, input_shapes or {}, free_dims)
    name_nodes(model)
    return model


def _read(p: Path) -> onnx.ModelProto:
    """The whole model, external data loaded; a HaseError that names what is wrong with the file."""
    try:
        return onnx.load(str(p), load_external_data=True)
    except DecodeError as exc:
        raise HaseError(f"{p} is not a valid ONNX file (truncated or another format): re-export it") from exc
    except Exception as exc:  # onnx raises OSError/ValidationError/ValueError variants
        _check_external_data(p)  # names a missing external-data file, if that is the cause
        raise HaseError(f"{p} is not a valid ONNX file ({type(exc).__name__}): re-export it") from exc


def _read_lean(p: Path) -> onnx.ModelProto | None:
    """The model without its large weights, or None when the file is not well-formed (`_read` then names the
    problem exactly as for every other command)."""
    try:
        return lean.load_lean(p)
    except (lean.NotLeanError, DecodeError, OSError, ValueError) as exc:
        log.debug("%s: reading without weights failed (%s); reading it whole", p, exc)
        return None


def _check_readable(p: Path) -> None:
    """A missing path, a directory or a file the user may not read is named as such, not as a bad ONNX file."""
    try:
        if not p.exists():
            raise HaseError(f"model file not found: {p} (check the path)")
        if p.is_dir():
            raise HaseError(f"{p} is a directory, not an ONNX model file: give the .onnx file inside it")
        if not p.is_file():
            raise HaseError(f"{p} is not a regular file: give an .onnx model file")
        with p.open("rb") as f:
            f.read(1)
    except PermissionError as exc:
        raise HaseError(f"cannot read {p}: permission denied (check the file's permissions)") from exc
    except OSError as exc:
        raise HaseError(f"cannot read {p}: {exc.strerror or type(exc).__name__}") from exc


def _check_external_data(p: Path) -> None:
    """Name the missing external-data file before onnx fails with a generic validation error."""
    try:
        bare = onnx.load(str(p), load_external_data=False)
    except Exception:
        return  # not parseable: load_model reports it

    for t in bare.graph.initializer:
        try:
            loc = ExternalDataInfo(t).location if uses_external_data(t) else ""
            missing = bool(loc) and not (p.parent / loc).is_file()
        except (ValueError, OSError):  # a location that is no path at all: load_model reports the file
            continue
        if missing:
            raise HaseError(f"{p}: external data file is missing ({loc}): put it next to the model, "
                            f"as when it was exported")


def check_domains(model: onnx.ModelProto) -> None:
    """Reject ops from domains no ONNX Runtime build provides kernels for."""
    local = {f.domain for f in model.functions}
    for node in model.graph.node:
        if node.domain not in KNOWN_DOMAINS and node.domain not in local:
            raise HaseError(
                f"node {node.name or node.op_type!r} uses op {node.op_type!r} from unknown domain "
                f"{node.domain!r}: ONNX Runtime has no kernel for it; export without custom ops"
            )


RENAMED = "_hase"  # infix of node names load_model made up


def name_nodes(model: onnx.ModelProto) -> None:
    """Give unnamed nodes a unique name so ORT's profile events can be mapped back to them."""
    seen: set[str] = set()
    for i, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}{RENAMED}{i}"
        seen.add(node.name)


def resolve_input_shapes(path: PathLike, input_shapes: Mapping[str, tuple[int, ...]],
                         free_dims: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """`input_shapes` plus the full static shape of every input `free_dims` sets in the model at `path`, for
    functions that take input shapes only; a HaseError when a free dimension or an input is not the model's
    or an input stays symbolic. Reads the graph, not the weights."""
    if not free_dims:
        return dict(input_shapes)
    model = load_model(path, input_shapes, weights=False, free_dims=free_dims)
    inits = {i.name for i in model.graph.initializer}
    shapes = dict(input_shapes)
    for vi in model.graph.input:
        if vi.name not in inits and vi.name not in shapes:
            shapes[vi.name] = tuple(int(d.dim_value) for d in vi.type.tensor_type.shape.dim)  # load_model checked
    return shapes


@dataclass
class KernelGraph:
    """ORT's optimized graph of a model, with every tensor's spec (shape, dtype, observed value range)."""

    model: onnx.ModelProto
    values: dict[str, TensorSpec]
    opt_level: str
    feeds: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    has_weights: bool = True
    _initializers: dict[str, onnx.TensorProto] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def nodes(self) -> list[onnx.NodeProto]:
        """The graph's nodes in execution (topological) order."""
        return list(self.model.graph.node)

    @property
    def initializers(self) -> dict[str, onnx.TensorProto]:
        """Constant tensors by name (built once, and again when initializers were added or removed; read-only:
        `split` asks for it once per node)."""
        inits = self.model.graph.initializer
        if len(self._initializers) != len(inits):
            self._initializers = {t.name: t for t in inits}
        return self._initializers


WEIGHTS_FILE = "weights.bin"
# Initializers up to this size stay inside the optimized model: ONNX Runtime cannot load a model whose shape
# inference needs an external tensor's values ("Cannot parse data from external tensors"), and its fusions write
# such inputs, e.g. the split sizes of a Split that fuses 200-500 Gather slices of a Mamba layer (4 KB of int64):
# Zamba's and Jamba's optimized graphs could not be read back at 1 KB. Weights are far larger than this.
INLINE_BYTES = 64 << 10


def optimize_to(model: onnx.ModelProto | None, ep: EPConfig, directory: PathLike,
                source: PathLike | None = None, *, external_folder: PathLike | None = None,
                discard_weights: bool = False) -> Path:
    """Save the model as ONNX Runtime optimizes it at the config's level (ORT's own fusions) into
    `directory`, with initializers over `INLINE_BYTES` in an external `weights.bin`; returns the model path.

    Args:
        source: the model's file, when `model` is exactly its content (ORT then reads it directly).
        external_folder: the folder of the model's external data, for a model read without its weights
            (`load_model(weights=False)`): ORT gets the (small) model from memory and reads the weights there.
        discard_weights: for callers that read back the graph only (shapes and structure, never values):
            `weights.bin` is a link to the null device, so ORT does not write the weights out again (for a large
            model, most of the cost of optimizing). Where no such link can be made they are written.
    """
    out = Path(directory) / "optimized.onnx"
    src = Path(directory) / "source.onnx"
    config = {**probe.NO_PREPACK,
              "session.optimized_model_external_initializers_file_name": WEIGHTS_FILE,
              "session.optimized_model_external_initializers_min_size_in_bytes": str(INLINE_BYTES)}
    if discard_weights:
        with contextlib.suppress(OSError):  # no symlinks here (e.g. Windows without the privilege): write them
            os.symlink(os.devnull, Path(directory) / WEIGHTS_FILE)
    model_src: PathLike | bytes
    if external_folder is not None:
        if model is None:
            raise ValueError("optimize_to needs the model when its weights are in external_folder")
        config[lean.EXTERNAL_FOLDER_CONFIG] = os.fspath(external_folder)
        model_src = model.SerializeToString()  # small: the weights stay in their file
    elif source is None:
        if model is None:
            raise ValueError("optimize_to needs the model or the file it was loaded from")
        onnx.save(model, str(src))  # ORT reads the file: no serialized copy held alongside the session
        model_src = src
    else:
        model_src = source
    sess = sessions.make_session(model_src, ep, optimized_model_path=str(out), config=config)
    del sess
    src.unlink(missing_ok=True)
    return out


def kernel_graph(model: onnx.ModelProto, ep: EPConfig, seed: int = 0, with_weights: bool = True,
                 source: PathLike | None = None) -> KernelGraph:
    """Optimize with ORT, then run the optimized graph once on the CPU to learn every tensor's spec.

    with_weights=False (prediction) keeps large weights on disk only and takes every shape from ORT's type
    inference of the optimized graph (no run; a shapes-only run where ORT leaves a shape open), so the kernels
    can be described but not built.
    `source`: the file `model` was loaded from, if load_model changed nothing (saves a copy).
    """
    check_model_memory(model, probe=with_weights)  # before ORT's optimizer (constant folding) or the probe run
    feeds = make_model_feeds(model, seed)
    if source is not None and any(RENAMED in n.name for n in model.graph.node):
        source = None  # load_model named some nodes: the file is not what `model` holds
    return _optimized_kernel_graph(model if source is None else None, feeds, ep, with_weights, source)


def file_kernel_graph(path: PathLike, ep: EPConfig, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                      with_weights: bool = True, free_dims: Mapping[str, int] | None = None) -> KernelGraph:
    """`kernel_graph` of a model file; when loading changed nothing, the parsed model is dropped before
    ORT reads the file itself, so a large model is never held twice.

    with_weights=False (what `hase predict` needs) never reads the large weights into this process: the
    model is read without them (`load_model(weights=False)`), ORT reads them from the file while it
    optimizes, and the optimized graph's weights are not written out again.
    """
    if not with_weights:
        model = load_model(path, input_shapes, weights=False, free_dims=free_dims)
        check_model_memory(model, probe=False)
        feeds = make_model_feeds(model)
        return _optimized_kernel_graph(model, feeds, ep, False, None, Path(path).parent)
    model = load_model(path, input_shapes, free_dims=free_dims)
    if input_shapes or free_dims or any(RENAMED in n.name for n in model.graph.node):
        return kernel_graph(model, ep, with_weights=with_weights)
    check_model_memory(model, probe=with_weights)
    feeds = make_model_feeds(model)
    del model
    return _optimized_kernel_graph(None, feeds, ep, with_weights, path)


def _optimized_kernel_graph(model: onnx.ModelProto | None, feeds: dict[str, np.ndarray], ep: EPConfig,
                            with_weights: bool, source: PathLike | None,
                            external_folder: PathLike | None = None) -> KernelGraph:
    """Optimize (from `model`, or from the file `source` when `model` is None), then learn every tensor's spec:
    without weights from ORT's type inference where it gives every shape, else from a run."""
    if not with_weights:
        kg = _inferred_kernel_graph(model, feeds, ep, source, external_folder)
        if kg is not None:
            return kg
    with tempfile.TemporaryDirectory(prefix="hase_kg_") as tmp:
        path = optimize_to(model, ep, tmp, source, external_folder=external_folder)
        opt = onnx.load(str(path), load_external_data=False)
        values = None
        if not with_weights:
            try:
                values = probe.observe_shapes(opt, path, feeds, ep)
            except probe.ShapesUnavailableError as exc:
                log.debug("shapes-only probe failed (%s); running the full probe", exc)
        if values is None:
            load_external_data_for_model(opt, tmp)
            values = probe.observe_values(opt, feeds, ep)
            with_weights = True
    return KernelGraph(opt, values, ep.opt_level, feeds, with_weights)


def _inferred_kernel_graph(model: onnx.ModelProto | None, feeds: dict[str, np.ndarray], ep: EPConfig,
                           source: PathLike | None, external_folder: PathLike | None) -> KernelGraph | None:
    """The kernel graph without weights, every shape from ORT's type inference (`probe.infer_shapes`): no run,
    and the optimized weights are discarded, never written. None when ORT leaves a shape open or this fails in
    any way: the caller then optimizes again and runs the graph, which reports a real problem as it always has."""
    with tempfile.TemporaryDirectory(prefix="hase_kg_") as tmp:
        try:
            path = optimize_to(model, ep, tmp, source, external_folder=external_folder, discard_weights=True)
            opt = onnx.load(str(path), load_external_data=False)
            values = probe.infer_shapes(opt, feeds, ep)
        except HaseError as exc:  # ShapesUnavailableError included
            log.debug("no shapes from ORT's type inference (%s); probing with a run", exc)
            return None
    return KernelGraph(opt, values, ep.opt_level, feeds, has_weights=False)
