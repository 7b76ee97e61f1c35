"""Size limits, in one place: a small file must never make Hase ask for terabytes.

Every tensor Hase generates, or that a model, zoo variant or pipeline declares, is sized from its shape and
dtype *before* anything is allocated, and refused past a limit with a one-line HaseError giving the number.
Two limits can be raised (or lowered) with environment variables, read when a check runs:

- ``HASE_MAX_TENSOR_GB`` (default 4): the most one tensor may take (model inputs, declared outputs and
  intermediates, zoo inputs and activations, pipeline inputs and dummy-model weights).
- ``HASE_MAX_PROBE_GB`` (default 16): the most all tensors of one value probe may take together (the probe
  that `hase split` / `collect` run keeps every intermediate tensor alive at once).

The zoo's parameter maxima and grid size, and the pipeline's stream/thread/queue counts, are fixed bounds below.
GB here is 10^9 bytes.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from hase.errors import HaseError

GB = 10**9
MAX_TENSOR_GB = 4.0  # default of HASE_MAX_TENSOR_GB
MAX_PROBE_GB = 16.0  # default of HASE_MAX_PROBE_GB
TENSOR_ENV = "HASE_MAX_TENSOR_GB"
PROBE_ENV = "HASE_MAX_PROBE_GB"
ONNX_FILE_BYTES = 2 * 1024**3 - 1  # protobuf's hard limit on one serialized ONNX model (weights inline)

# zoo: upper bounds of the family parameters, and of the variants one config may expand to
ZOO_MAX_BATCH = 256
ZOO_MAX_RESOLUTION = 2048
ZOO_MAX_WIDTH = 4.0
ZOO_MAX_SEQ = 8192
ZOO_MAX_HIDDEN = 8192
ZOO_MAX_HEADS = 128
ZOO_MAX_LAYERS = 128
ZOO_MAX_VOCAB = 262_144
ZOO_MAX_GROWTH = 256
ZOO_MAX_MLP_RATIO = 16
ZOO_MAX_VARIANTS = 2000  # zoo_full.toml has 358

# pipeline: counts that open sessions or threads, or hold batches
PIPELINE_MAX_STREAMS = 64
PIPELINE_MAX_EXECUTORS = 64  # per stage
PIPELINE_MAX_THREADS = 1024
PIPELINE_MAX_QUEUE_DEPTH = 1024
PIPELINE_MAX_DUMMY_LAYERS = 1000


def _limit_bytes(env: str, default_gb: float) -> int:
    """The limit an environment variable sets (in GB), else the default; a bad value is a HaseError."""
    text = os.environ.get(env, "").strip()
    if not text:
        return int(default_gb * GB)
    try:
        gb = float(text)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb <= 0:
        raise HaseError(f"{env}={text!r} is not a size: set it to a number of GB > 0, e.g. {default_gb:g}")
    return int(gb * GB)


def max_tensor_bytes() -> int:
    """The most bytes one tensor may take (HASE_MAX_TENSOR_GB, default 4 GB)."""
    return _limit_bytes(TENSOR_ENV, MAX_TENSOR_GB)


def max_probe_bytes() -> int:
    """The most bytes all tensors of one value probe may take together (HASE_MAX_PROBE_GB, default 16 GB)."""
    return _limit_bytes(PROBE_ENV, MAX_PROBE_GB)


def tensor_nbytes(shape: Sequence[int], dtype: str | np.dtype[np.generic]) -> int:
    """Bytes of a dense tensor of `shape` and numpy `dtype`, in exact integers (never overflows)."""
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def format_gb(nbytes: int | float) -> str:
    """`120.0 GB`; small sizes keep significant digits (`0.0012 GB`)."""
    gb = nbytes / GB
    return f"{gb:.1f} GB" if gb >= 0.1 else f"{gb:.2g} GB"


def format_shape(shape: Sequence[int | str | None]) -> str:
    """`[1, 3, 224, 224]`, symbolic dims by name (`[batch, 3, 224, 224]`), unknown ones as `?`."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def check_tensor(what: str, shape: Sequence[int], dtype: str | np.dtype[np.generic],
                 limit: int | None = None) -> int:
    """Refuse a tensor over the per-tensor limit before it is allocated; returns its bytes.

    `what` names it for the message, e.g. "input 'x'". Raises HaseError with the size and the limit.
    """
    nbytes = tensor_nbytes(shape, dtype)
    limit = max_tensor_bytes() if limit is None else limit
    if nbytes > limit:
        raise HaseError(f"{what} of shape {format_shape(shape)} {np.dtype(dtype).name} needs {format_gb(nbytes)}, "
                        f"over the {format_gb(limit)} limit per tensor (set {TENSOR_ENV} to change it)")
    return nbytes


def check_total(what: str, nbytes: int, limit: int | None = None) -> None:
    """Refuse a set of tensors held at once (a probe run) over HASE_MAX_PROBE_GB."""
    limit = max_probe_bytes() if limit is None else limit
    if nbytes > limit:
        raise HaseError(f"{what} needs {format_gb(nbytes)}, over the {format_gb(limit)} limit "
                        f"(set {PROBE_ENV} to change it)")


def check_count(key: str, value: int, bound: int, fix: str = "") -> None:
    """Refuse a count over a fixed bound, naming the key, the value and the bound."""
    if value > bound:
        raise HaseError(f"{key} = {value} is over the limit of {bound}" + (f": {fix}" if fix else ""))
