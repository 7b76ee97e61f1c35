"""Symbolic-batch variants of static exports, for the devset's batch sweep (`hase evaluate --devset DIR
--batch-sweep`).

The development set's exports are static (batch 1, 2 or 4 baked in). To evaluate predictions of models whose
shapes are symbolic, as users export them, and at batch sizes 1-8, each quick model (models.tsv's measured
batch-1 latency at most `SWEEP_MAX_MS`) is copied with its inputs' first dimension renamed `batch` (and an
integer input's second dimension `sequence`, a token count), its outputs' first dimension `batch`, and its
intermediate shapes dropped. The copy is kept only if ONNX Runtime runs it at batch 1 and `VERIFY_BATCH` with
every output's first dimension following the batch: an export that baked the batch into a Reshape fails here
and is listed with the reason instead. The sweep then predicts each copy at `--free-dim batch=B` for B in
1, 2, 4, 8 (and `sequence` at the size models.tsv lists), exactly as a user would.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import pandas as pd

from hase.errors import HaseError
from hase.evaluate.devset import tsv_dims
from hase.files import write_atomic
from hase.kernels.graph import load_model
from hase.kernels.inputs import make_model_feeds
from hase.runtime.sessions import make_session
from hase.runtime.types import EPConfig

log = logging.getLogger(__name__)

BATCH_DIM, SEQUENCE_DIM = "batch", "sequence"
SWEEP_MAX_MS = 15.0  # models.tsv's batch-1 latency (ms) at most this: batch 8 then stays about 0.1 s a run
DEFAULT_SEQUENCE = 128  # token count of a symbolic `sequence` that models.tsv does not size (as devset.DEFAULT_DIM)
VERIFY_BATCH = 3  # a batch no export bakes in, so a hard-coded batch cannot pass the check by accident
SUFFIX = ".dynbatch.onnx"
LATENCY_COLUMN = "ort_cpu_1t_median_ms"  # what shared/models/devset/build.sh measured for each model


@dataclass(frozen=True)
class SweepModels:
    """The symbolic-batch copies written to `folder` (with its models.tsv) and the models left out, with why."""

    folder: Path
    made: tuple[str, ...]
    left_out: dict[str, str] = field(default_factory=dict)


def symbolic_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose inputs and outputs take a symbolic first dimension `batch` (integer inputs of rank 2, token
    ids and masks, also a symbolic second dimension `sequence`), with the intermediate shapes dropped so that
    nothing still states the old batch."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {i.name for i in out.graph.initializer}
    for vi in out.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            dims[0].dim_param = BATCH_DIM
    for vi in _token_inputs(out):
        vi.type.tensor_type.shape.dim[1].dim_param = SEQUENCE_DIM
    for vi in out.graph.output:
        dims = vi.type.tensor_type.shape.dim
        for i, d in enumerate(dims):
            d.Clear()
            if i == 0:
                d.dim_param = BATCH_DIM
    del out.graph.value_info[:]
    return out


def _token_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The rank-2 integer inputs (token ids, masks): their second dimension is a token count."""
    return [vi for vi in model.graph.input if len(vi.type.tensor_type.shape.dim) == 2
            and vi.type.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)]


def sequence_of(model: onnx.ModelProto) -> int:
    """The static second dimension of the model's first token input (its token count), 0 if none or symbolic."""
    return next((int(vi.type.tensor_type.shape.dim[1].dim_value) for vi in _token_inputs(model)), 0)


def runs_with_batch(path: Path, sequence: int) -> str:
    """Empty when ONNX Runtime runs the symbolic copy at `path` at batch 1 and VERIFY_BATCH with every output's
    first dimension equal to the batch; otherwise the reason, in one line."""

    for batch in (1, VERIFY_BATCH):
        free = {BATCH_DIM: batch, **({SEQUENCE_DIM: sequence} if sequence else {})}
        try:
            model = load_model(path, free_dims=free)
            sess = make_session(model.SerializeToString(), EPConfig(name="check", opt_level="basic"), log_severity=4)
            outs = sess.run(None, make_model_feeds(model))
        except HaseError as exc:
            return f"at batch {batch}: {str(exc).splitlines()[0]}"
        except Exception as exc:  # ORT raises its own exception types for a shape it cannot take
            return f"ONNX Runtime cannot run it at batch {batch}: {str(exc).splitlines()[0][:160]}"
        wrong = [tuple(o.shape) for o in outs if not o.shape or o.shape[0] != batch]
        if wrong:
            return f"at batch {batch} an output has shape {wrong[0]}: the export fixed its batch"
    return ""


def make_sweep_models(models_dir: str | Path, out_dir: str | Path, info: Mapping[str, Mapping[str, str]],
                      paths: Sequence[Path], max_ms: float = SWEEP_MAX_MS) -> SweepModels:
    """Write the symbolic-batch copy of every model of `paths` whose models.tsv latency is at most `max_ms` (or not
    listed: exports already symbolic, `benchmarks/export_dynamic.py`) into
    `out_dir` with a models.tsv of its own (resumable: a copy already there is kept); the rest are left out with
    the reason. Each file is written atomically, so an interrupted run leaves no half-written model."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    left_out: dict[str, str] = {}
    rows: list[dict[str, str]] = []
    for p in paths:
        row = dict(info.get(p.name, {}))
        ms = pd.to_numeric(row.get(LATENCY_COLUMN, ""), errors="coerce")
        if not pd.isna(ms) and float(ms) > max_ms:
            left_out[p.name] = f"batch-1 latency {float(ms):.1f} ms > {max_ms:g} ms"
            continue
        target = out / (p.name.removesuffix(".onnx") + SUFFIX)
        reason = "" if target.is_file() else _write_copy(p, target, _listed_sequence(row.get("inputs", "")))
        if reason:
            left_out[p.name] = reason
            continue
        made.append(target.name)
        rows.append({**row, "file": target.name, "source_file": p.name})
    if not made:
        raise HaseError(f"no model of {models_dir} can be swept over batch sizes ({len(left_out)} left out, e.g. "
                        f"{next(iter(left_out.items()), ('', 'none listed'))}): raise --sweep-max-ms")
    write_atomic(out / "models.tsv", pd.DataFrame(rows).to_csv(sep="\t", index=False))
    return SweepModels(out, tuple(made), left_out)


def _listed_sequence(inputs: str) -> int:
    """The token count models.tsv's `inputs` cell gives a rank-2 integer input ("ids:int64[1x128]" -> 128), else 0."""

    return next((dims[1] for dims in tsv_dims(inputs).values() if len(dims) == 2), 0)


def _write_copy(src: Path, target: Path, listed_sequence: int) -> str:
    """Write the verified symbolic copy of `src` to `target`; the reason when it cannot be made."""
    model = onnx.load(str(src))
    copy = symbolic_copy(model)
    tmp = target.with_suffix(".tmp")
    onnx.save(copy, str(tmp))
    sequence = (sequence_of(model) or listed_sequence or DEFAULT_SEQUENCE) if _token_inputs(copy) else 0
    reason = runs_with_batch(tmp, sequence)
    if reason:
        tmp.unlink()
        log.info("%s left out of the batch sweep: %s", src.name, reason)
        return reason
    tmp.replace(target)
    return ""
