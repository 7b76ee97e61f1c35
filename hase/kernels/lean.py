"""Read an ONNX file's graph without reading its weights into memory.

Predicting a model needs ORT's optimized graph and every tensor's shape, never the weight values Hase
would copy into Python. `load_lean` walks the file's protobuf encoding (memory-mapped, so only the pages
holding graph structure are touched) and turns every large initializer stored inline (`raw_data`) into an
*external-data reference to the file itself*: same name, dtype and dims, with `location` = the file's name
and `offset`/`length` = where its bytes already sit. ONNX Runtime, given the lean model with
`EXTERNAL_FOLDER_CONFIG` set to the file's folder, reads (memory-maps) the very same bytes, so its
optimizer sees exactly the original constants and makes exactly the same fusions, while this process never
holds them. Initializers a model already keeps in external files are checked (inside the model's folder,
present, within the file's size) and left as they are.

    >>> model = load_lean("gpt2.onnx")            # 500 MB file: a few hundred KB of graph in memory
    >>> ort_session(model.SerializeToString(), config={EXTERNAL_FOLDER_CONFIG: "models/"})

Wire format used (https://protobuf.dev/programming-guides/encoding/): ModelProto.graph is field 7,
GraphProto.initializer field 5, TensorProto.dims 1, raw_data 9, external_data 13, data_location 14.
"""
from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor, uses_external_data

from hase.errors import HaseError

#: ORT session config entry naming the folder of external data when the model is given as bytes.
EXTERNAL_FOLDER_CONFIG = "session.model_external_initializers_file_folder_path"
#: Initializers with more elements than this are referenced, not copied (the same bound below which
#: `hase.kernels.memory` keeps values for shape inference, so a referenced tensor is never needed there).
MIN_ELEMENTS = 4096

_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_TENSOR_RAW_DATA = 9
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class NotLeanError(ValueError):
    """The file's encoding could not be walked (not protobuf, truncated, or an unsupported wire type)."""


def load_lean(path: str | os.PathLike[str], min_elements: int = MIN_ELEMENTS) -> onnx.ModelProto:
    """The model in `path` with inline initializers of more than `min_elements` elements as references
    into `path` itself (see the module docstring); everything else exactly as `onnx.load` reads it.

    Raises:
        NotLeanError: the bytes are not a well-formed protobuf message (the caller reports the file as `onnx.load`
            would); google.protobuf's DecodeError when the walked message does not parse as a ModelProto.
        HaseError: an external-data reference the model already had is missing, outside its folder or too short.
    """
    p = Path(path)
    with open(p, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise NotLeanError("empty file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            data = _lean_model(buf, p.name, min_elements)
    model: onnx.ModelProto = onnx.ModelProto.FromString(data)
    check_external_data(model, p)
    for t in model.graph.initializer:  # small tensors kept in external files are read, as onnx.load would
        if uses_external_data(t) and _numel(t) <= min_elements:
            load_external_data_for_tensor(t, str(p.parent))
    return model


def _numel(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= int(d)
    return n


def _lean_model(buf: mmap.mmap, location: str, min_elements: int) -> bytes:
    """The ModelProto's bytes with the graph's large inline initializers replaced by references; everything
    else is copied in runs of untouched bytes."""
    out = bytearray()
    for field, wire, start, value, end in _fields(buf, 0, len(buf)):
        if field == _MODEL_GRAPH and wire == _LEN:
            graph = bytearray()
            copied = value  # bytes before this offset are in `graph`
            for gfield, gwire, gstart, gvalue, gend in _fields(buf, value, end):
                # fewer payload bytes than elements cannot hold a large tensor: not worth a look
                if gfield == _GRAPH_INITIALIZER and gwire == _LEN and gend - gvalue > min_elements:
                    tensor = _lean_tensor(buf, gvalue, gend, location, min_elements)
                    if tensor is not None:
                        graph += buf[copied:gstart]
                        graph += _length_delimited(_GRAPH_INITIALIZER, tensor)
                        copied = gend
            graph += buf[copied:end]
            out += _length_delimited(_MODEL_GRAPH, bytes(graph))
        else:
            out += buf[start:end]
    return bytes(out)


def _lean_tensor(buf: mmap.mmap, start: int, end: int, location: str, min_elements: int) -> bytes | None:
    """A large TensorProto with one raw_data field as a reference to that field's bytes; None to keep it as is."""
    raw = [(fstart, value, fend) for field, wire, fstart, value, fend in _fields(buf, start, end)
           if field == _TENSOR_RAW_DATA and wire == _LEN]
    if len(raw) != 1:
        return None
    fstart, value, fend = raw[0]
    tensor = onnx.TensorProto.FromString(bytes(buf[start:fstart]) + bytes(buf[fend:end]))
    if _numel(tensor) <= min_elements or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    tensor.data_location = onnx.TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, v in (("location", location), ("offset", str(value)), ("length", str(fend - value))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, v
    out: bytes = tensor.SerializeToString()
    return out


def _fields(buf: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of the tag, start of the value, end) of each field in buf[start:end]."""
    pos = start
    while pos < end:
        tag_start = pos
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise NotLeanError(f"field number 0 at byte {tag_start}")
        if wire == _VARINT:
            value = pos
            _, pos = _varint(buf, pos, end)
        elif wire in (_I64, _I32):
            value, pos = pos, pos + (8 if wire == _I64 else 4)
        elif wire == _LEN:
            n, value = _varint(buf, pos, end)
            pos = value + n
        else:
            raise NotLeanError(f"wire type {wire} at byte {tag_start}")
        if pos > end:
            raise NotLeanError(f"field {field} at byte {tag_start} runs past its message")
        yield field, wire, tag_start, value, pos


def _varint(buf: mmap.mmap, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise NotLeanError(f"bad varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _encode_varint(field << 3 | _LEN) + _encode_varint(len(payload)) + payload


def _location(t: onnx.TensorProto) -> str:
    return next((e.value for e in t.external_data if e.key == "location"), "")


def check_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Every external-data reference of the graph's initializers names a file inside the model's folder that
    holds its bytes (what `onnx.load` checks when it reads them); a HaseError names the first that does not.
    References into the model file itself are the ones `load_lean` made, at offsets it read from the file."""
    folder = path.parent.resolve()
    for t in model.graph.initializer:
        if not uses_external_data(t) or _location(t) == path.name:  # none, or a reference load_lean made
            continue
        try:
            info = ExternalDataInfo(t)
            loc = str(info.location)
            target = (folder / loc).resolve()
            inside = bool(loc) and not os.path.isabs(loc) and target.is_relative_to(folder)
        except (ValueError, OSError) as exc:
            raise HaseError(f"{path} is not a valid ONNX file ({type(exc).__name__}): re-export it") from exc
        if not inside:
            raise HaseError(f"{path}: external data of {t.name!r} is outside the model's folder ({loc!r}): "
                            f"re-export it")
        if not target.is_file():
            raise HaseError(f"{path}: external data file is missing ({loc}): put it next to the model, "
                            f"as when it was exported")
        size = target.stat().st_size
        offset, length = int(info.offset or 0), int(info.length or 0)
        if offset + length > size:
            raise HaseError(f"{path}: external data file {loc} is shorter than tensor {t.name!r} needs: "
                            f"re-export it")
