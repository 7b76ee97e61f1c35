"""A predictor on a folder of real exported models: predicted vs robustly measured, scored by group and against
the FLOPs baselines (`hase evaluate --devset DIR`).

Each model (`models.tsv`'s `file` column when the folder has one, else every `*.onnx`) is predicted with
`estimate_model` and measured by `hase.evaluate.measured.check_prediction` in the predictor's own configuration (EP,
threads, optimization level from its manifest; minimum of block medians, spread and noisy flag kept). A model
whose first input dimension is symbolic is evaluated at each batch size of `BATCHES` (`--free-dim`); its other
symbolic dimensions take the size `models.tsv` lists for that input, else `DEFAULT_DIM`. Rows are written to a
CSV after every (model, batch), atomically, so an interrupted run resumes where it stopped:

    model         | group | batch | predicted_ms | measured_ms | spread | noisy | n_kernels | model_flops | ...
    resnet10t.onnx| CNN   | 1     | 25.1         | 22.4        | 0.03   | False | 36        | 1.8e9       | ...

`devset_scores` scores the rows by group (`group_of`: `CNN`, `transformer`, `other`, and `all`) for Hase and for the
FLOPs and FLOPs+bytes straight lines fitted leave-one-model-out on the same rows.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
from numpy.typing import NDArray

from hase.errors import HaseError
from hase.evaluate import worst
from hase.evaluate.measured import check_prediction, kernel_times_ms
from hase.files import write_atomic
from hase.kernels import graph, split
from hase.kernels.graph import resolve_input_shapes
from hase.predict import features
from hase.predict.baselines import BASELINES, MODEL_BYTES, MODEL_FLOPS
from hase.predict.bundle import PredictorBundle
from hase.predict.calibration import relative_lstsq
from hase.predict.estimate import estimate_model
from hase.predict.metrics import score
from hase.predict.predictor import CLAMPED
from hase.runtime.gate import Gate, gate_for
from hase.runtime.robust import BlockPolicy

log = logging.getLogger(__name__)

BATCHES = (1, 2, 4, 8)  # batch sizes of a model whose batch dimension is symbolic
DEFAULT_DIM = 128  # any other symbolic dimension (a sequence length) models.tsv does not size
MODELS_TSV = "models.tsv"
GROUPS = ("CNN", "transformer", "other")
MIN_CONVS = 3  # convolution kernels that make a model without attention a CNN (a patch embedding is one)
ALL = "all"
HASE = "hase"

MODEL, GROUP, BATCH, FREE_DIMS = "model", "group", "batch", "free_dims"
PREDICTED_MS, MEASURED_MS, SPREAD, NOISY = "predicted_ms", "measured_ms", "spread", "noisy"
N_KERNELS, ERROR_PCT, N_RUNS, ERROR = "n_kernels", "error_pct", "n_runs", "error"
METHOD, MEDIAN_ERROR_PCT = "method", "median_error_pct"
META = ("device", "cpu_model", "ort_version", "execution_provider", "intra_op_threads", "opt_level")
ROW_COLUMNS = (MODEL, GROUP, BATCH, FREE_DIMS, PREDICTED_MS, MEASURED_MS, ERROR_PCT, SPREAD, NOISY, N_RUNS,
               N_KERNELS, MODEL_FLOPS, MODEL_BYTES, *META, ERROR)
SCORE_TABLE = (GROUP, METHOD, "n", "acc10", "acc5", "rmspe", MEDIAN_ERROR_PCT)
CONFIG = ("device", "execution_provider", "intra_op_threads", "opt_level")  # a resumed CSV must match these
GATE_WAITED_S = "gate_waited_s"  # seconds the core gate waited for cores (hase.runtime.gate); absent before it
COLUMNS = (*ROW_COLUMNS, GATE_WAITED_S)  # what a run writes; ROW_COLUMNS is what a resumed table must have


@dataclass(frozen=True)
class Job:
    """One (model, batch) to evaluate: the file, its free dimensions (empty for a static model)."""

    path: Path
    batch: int
    free_dims: dict[str, int]

    @property
    def key(self) -> tuple[str, int]:
        """(model file name, batch): the row's identity in the CSV."""
        return self.path.name, self.batch


@dataclass(frozen=True)
class DevsetEvaluation:
    """The rows (one per model and batch) and their scores by group, Hase beside the baselines."""

    rows: pd.DataFrame
    scores: pd.DataFrame
    predictor_device: str
    host_mismatches: tuple[str, ...] = ()
    left_out: Mapping[str, str] = field(default_factory=dict)  # batch sweep: models with no symbolic copy, why
    worst: pd.DataFrame = field(default_factory=pd.DataFrame)  # `explain_worst`: the worst rows' kernels
    families: Mapping[str, str] = field(default_factory=dict)  # model file -> models.tsv's `family`, where listed


# ---------------------------------------------------------------------- which models, at which shapes


def list_models(models_dir: str | Path) -> tuple[list[Path], dict[str, dict[str, str]]]:
    """The folder's models in models.tsv's order (else sorted `*.onnx`) and models.tsv's rows by file name."""
    d = Path(models_dir)
    if not d.is_dir():
        raise HaseError(f"models folder {str(d)!r} does not exist: build one with `make devset`")
    tsv = d / MODELS_TSV
    info: dict[str, dict[str, str]] = {}
    if tsv.is_file():
        table = pd.read_csv(tsv, sep="\t", dtype=str, keep_default_na=False)
        if "file" not in table.columns:
            raise HaseError(f"{tsv} has no `file` column (has {list(table.columns)})")
        info = {str(r["file"]): {str(k): str(v) for k, v in r.items()} for r in table.to_dict("records")}
        paths = [d / f for f in info if (d / f).is_file()]
        missing = [f for f in info if not (d / f).is_file()]
        if missing:
            log.warning("%s lists %d models that are not in the folder: %s", tsv, len(missing), missing[:5])
    else:
        paths = sorted(d.glob("*.onnx"))
    if not paths:
        raise HaseError(f"no ONNX models in {str(d)!r}")
    return paths, info


def tsv_dims(inputs: str) -> dict[str, tuple[int, ...]]:
    """models.tsv's `inputs` cell as shapes: "ids:int64[1x128];mask:int64[1x128]" -> {"ids": (1, 128), ...}."""
    out = {}
    for m in re.finditer(r"([^;:\s]+):\w+\[([\dx]*)\]", inputs):
        out[m.group(1)] = tuple(int(v) for v in m.group(2).split("x") if v)
    return out


def jobs_for(path: Path, info: Mapping[str, str] | None = None, batches: Sequence[int] = BATCHES) -> list[Job]:
    """The (model, batch) jobs of one model: one at its own batch when static, one per batch size when its batch
    dimension (the first of an input) is symbolic; other symbolic dimensions from models.tsv, else DEFAULT_DIM."""

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, OSError, ...: all mean "not a model Hase can read"
        raise HaseError(f"{path} is not a readable ONNX model: {str(exc).splitlines()[0] if str(exc) else exc}") \
            from exc
    inits = {i.name for i in model.graph.initializer}
    listed = tsv_dims((info or {}).get("inputs", ""))
    batch_dims: set[str] = set()
    other: dict[str, int] = {}
    static_batch = 1
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and i == 0:
                static_batch = int(d.dim_value)
            elif not d.HasField("dim_value") and i == 0:
                batch_dims.add(d.dim_param)
            elif not d.HasField("dim_value"):
                sizes = listed.get(vi.name, ())
                other.setdefault(d.dim_param, sizes[i] if i < len(sizes) else DEFAULT_DIM)
    if not batch_dims:
        return [Job(path, static_batch, other)]
    return [Job(path, b, {**other, **dict.fromkeys(batch_dims, b)}) for b in batches]


# ---------------------------------------------------------------------- one row


def group_of(costs: pd.DataFrame, op_types: set[str]) -> str:
    """`transformer` when the model has attention (a Softmax; hybrids such as MobileViT count here), `CNN` when it
    has at least MIN_CONVS convolution kernels, else `other` (MLP-only models with a patch-embedding Conv)."""
    if op_types & {"Softmax", "Attention", "MultiHeadAttention"}:
        return "transformer"
    if int((costs[features.FAMILY] == "conv").sum()) >= MIN_CONVS:
        return "CNN"
    return "other"


def evaluate_job(job: Job, bundle: PredictorBundle, info: Mapping[str, str] | None = None,
                 policy: BlockPolicy | None = None, gate: Gate | None = None) -> dict[str, Any]:
    """One row: the prediction, the robust measurement in the predictor's configuration (through the core `gate`
    when one is given), kernels, FLOPs, bytes."""

    shapes = resolve_input_shapes(job.path, {}, job.free_dims)
    kg = graph.file_kernel_graph(job.path, bundle.ep_config(), shapes, with_weights=False)
    specs = [n.spec for n in split.split(kg)]
    costs = features.cost_frame(specs)
    est = estimate_model(job.path, bundle, None, shapes)
    check = check_prediction(job.path, bundle, input_shapes=shapes, policy=policy, estimate=est, profile_runs=0,
                             gate=gate)
    group = (info or {}).get("group") or group_of(costs, {s.op_type for s in specs})
    m = check.measured
    return {MODEL: job.path.name, GROUP: group, BATCH: job.batch,
            FREE_DIMS: ";".join(f"{k}={v}" for k, v in sorted(job.free_dims.items())),
            PREDICTED_MS: est.latency_ms, MEASURED_MS: m.latency_ms, ERROR_PCT: check.error_pct, SPREAD: m.spread,
            NOISY: m.noisy, N_RUNS: m.n_runs, N_KERNELS: est.n_kernels, MODEL_FLOPS: float(costs[features.FLOPS].sum()),
            MODEL_BYTES: float(costs[features.BYTES].sum()), **{k: check.device_meta.get(k) for k in META}, ERROR: "",
            GATE_WAITED_S: m.gate_waited_s}


# ---------------------------------------------------------------------- the run, resumable


def read_rows(csv: Path) -> pd.DataFrame:
    """The rows a previous run wrote (an empty table when there is no file yet)."""
    if not csv.is_file():
        return pd.DataFrame(columns=list(ROW_COLUMNS))
    rows = pd.read_csv(csv, keep_default_na=False, na_values=[""], dtype={ERROR: str, MODEL: str, GROUP: str})
    missing = [c for c in ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise HaseError(f"{csv} lacks columns {missing}: not a devset table, or from an older Hase; move it away")
    rows[ERROR] = rows[ERROR].fillna("").astype(str)
    return rows


def _config_text(value: Any) -> str:
    """A config value as text, whole numbers without a decimal point: a thread count a table read back as a float
    column (1.0, where other rows had none) is the same configuration as 1."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _check_same_config(rows: pd.DataFrame, bundle: PredictorBundle, csv: Path) -> None:
    ep = bundle.ep_config()
    want = {"device": ep.name, "execution_provider": ep.provider, "intra_op_threads": ep.intra_op_threads,
            "opt_level": ep.opt_level}
    measured = rows[rows[ERROR] == ""]
    for k in CONFIG:
        seen = {_config_text(v) for v in measured[k].dropna()}
        if seen and seen != {_config_text(want[k])}:
            raise HaseError(f"{csv} was measured with {k}={sorted(seen)}, this predictor runs {k}={want[k]}: "
                            f"write to another folder (--out) or remove the file")


def evaluate_devset(models_dir: str | Path, bundle: PredictorBundle, csv_path: str | Path, *,
                    batches: Sequence[int] = BATCHES, policy: BlockPolicy | None = None,
                    progress: Callable[[Job, int, int], None] | None = None, gated: bool = True) -> DevsetEvaluation:
    """Predict and measure every model of `models_dir` (each batch of a symbolic one) into `csv_path`, resuming a
    run that stopped: rows already in the CSV are kept, not redone. A model that cannot be predicted or measured
    gets a row with its `error` (and is not retried on resume). `progress(job, i, n)` is called before each job.
    A many-thread CPU predictor's models are timed through one core gate (`hase.runtime.gate`) unless `gated` is
    False: on a VM whose cores come and go, the truth is the speed with all of them."""
    paths, info = list_models(models_dir)
    csv = Path(csv_path)
    rows = read_rows(csv)
    _check_same_config(rows, bundle, csv)
    done = {(str(m), int(b)) for m, b in zip(rows[MODEL], rows[BATCH], strict=True)}
    jobs = [j for p in paths for j in _jobs_or_error(p, info.get(p.name), batches)]
    records: list[dict[str, Any]] = [{str(k): v for k, v in r.items()} for r in rows.to_dict("records")]
    todo = [j for j in jobs if not isinstance(j, dict) and j.key not in done]
    gate = gate_for(bundle.ep_config()) if gated and todo else None
    records += [j for j in jobs if isinstance(j, dict) and (j[MODEL], j[BATCH]) not in done]
    for i, job in enumerate(todo):
        if progress is not None:
            progress(job, i, len(todo))
        try:
            records.append(evaluate_job(job, bundle, info.get(job.path.name), policy, gate))
        except HaseError as exc:
            log.warning("%s (batch %d): %s", job.path.name, job.batch, exc)
            records.append(_error_row(job.path.name, job.batch, str(exc)))
        write_atomic(csv, pd.DataFrame(records, columns=list(COLUMNS)).to_csv(index=False))
    table = pd.DataFrame(records, columns=list(COLUMNS))
    if not todo:
        write_atomic(csv, table.to_csv(index=False))
    worst_rows = explain_worst(table, [j for j in jobs if isinstance(j, Job)], bundle, kernels_csv(csv))
    return DevsetEvaluation(table, devset_scores(table), bundle.device, worst=worst_rows, families=families_of(info))


def families_of(info: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """models.tsv's `family` of each model file that has one (the batch sweep's plots are one per family)."""
    return {Path(f).name: str(r["family"]) for f, r in info.items() if r.get("family")}


WORST_COLUMNS = (MODEL, BATCH, PREDICTED_MS, MEASURED_MS, ERROR_PCT, *worst.KERNEL_COLUMNS)


def kernels_csv(csv: Path) -> Path:
    """Where the worst rows' kernels are kept, beside the rows' CSV (`devset.csv` -> `devset_kernels.csv`)."""
    return csv.with_name(f"{csv.stem}_kernels.csv")


def explain_worst(table: pd.DataFrame, jobs: Sequence[Job], bundle: PredictorBundle, csv: Path,
                  n: int = worst.WORST_MODELS) -> pd.DataFrame:
    """The `n` rows furthest from their measured latency, each with the nodes whose prediction is furthest from
    their in-model kernel_time (one profiled run on this host per row, kept in `csv`, so a rerun reuses it)."""
    ok = table[(table[ERROR].fillna("") == "") & table[ERROR_PCT].notna()]
    worst_rows = ok.loc[ok[ERROR_PCT].astype(float).abs().sort_values(ascending=False).index[:n]]
    have = pd.read_csv(csv, keep_default_na=False, na_values=[""], dtype={MODEL: str, CLAMPED: str}) \
        if csv.is_file() else pd.DataFrame(columns=list(WORST_COLUMNS))
    have[CLAMPED] = have[CLAMPED].fillna("")
    by_key = {j.key: j for j in jobs}
    parts = []
    for _, row in worst_rows.iterrows():
        key = (str(row[MODEL]), int(row[BATCH]))
        kept = have[(have[MODEL].astype(str) == key[0]) & (have[BATCH].astype(int) == key[1])]
        if len(kept) or key not in by_key:
            parts.append(kept)
            continue
        job = by_key[key]
        try:
            shapes = resolve_input_shapes(job.path, {}, job.free_dims)
            est = estimate_model(job.path, bundle, None, shapes)
            kernels = worst.estimate_kernel_rows(est, kernel_times_ms(job.path, bundle.ep_config(), shapes, est=est))
        except HaseError as exc:
            log.warning("%s (batch %d): its kernels could not be profiled: %s", key[0], key[1], exc)
            continue
        parts.append(kernels.assign(**{MODEL: key[0], BATCH: key[1], PREDICTED_MS: row[PREDICTED_MS],
                                       MEASURED_MS: row[MEASURED_MS], ERROR_PCT: row[ERROR_PCT]}))
    out = pd.concat([p[list(WORST_COLUMNS)] for p in parts], ignore_index=True) if parts else \
        pd.DataFrame(columns=list(WORST_COLUMNS))
    if len(out):
        write_atomic(csv, out.to_csv(index=False))
    return out


def _jobs_or_error(path: Path, info: Mapping[str, str] | None, batches: Sequence[int]) -> list[Job | dict[str, Any]]:
    try:
        return list(jobs_for(path, info, batches))
    except HaseError as exc:
        return [_error_row(path.name, 1, f"could not read the model's inputs: {exc}")]


def _error_row(model: str, batch: int, error: str) -> dict[str, Any]:
    return {**dict.fromkeys(ROW_COLUMNS), MODEL: model, BATCH: batch, ERROR: error.splitlines()[0] if error else "?"}


# ---------------------------------------------------------------------- scores


def sweep_name(model: str) -> str:
    """The model a row belongs to, its batch left out: `timm_resnet18d_224_b8.onnx` -> `timm_resnet18d_224`,
    `deit.dynbatch.onnx` -> `deit` (static exports of one model at several batch sizes share it)."""
    stem = re.sub(r"(\.dynbatch)?\.onnx$", "", model)
    return re.sub(r"_b\d+$", "", stem)


def loo_baseline(rows: pd.DataFrame, cols: Sequence[str]) -> NDArray[np.float64]:
    """Each row's latency from a straight line in `cols` (+ intercept) fitted by relative least squares on the
    rows of every other model (leave-one-model-out, a model's every batch size left out with it: `sweep_name`, so
    neither a symbolic model's other batches nor the same net's other static exports train its own line)."""
    out = np.full(len(rows), np.nan)
    y = rows[MEASURED_MS].to_numpy(dtype=np.float64)
    X = np.column_stack([rows[c].to_numpy(dtype=np.float64) for c in cols] + [np.ones(len(rows))])
    models = rows[MODEL].astype(str).map(sweep_name).to_numpy()
    for m in np.unique(models):
        train, test = models != m, models == m
        if train.sum() < X.shape[1]:
            continue
        out[test] = X[test] @ relative_lstsq(X[train], y[train])
    return out


def with_baselines(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured rows (no error, finite latency), with each baseline's leave-one-model-out prediction."""
    ok = rows[(rows[ERROR].fillna("") == "")].copy()
    ok = ok[np.isfinite(ok[MEASURED_MS].astype(float)) & (ok[MEASURED_MS].astype(float) > 0)]
    cost = {"flops": MODEL_FLOPS, "bytes": MODEL_BYTES}
    for name, cols in BASELINES.items():
        ok[name] = loo_baseline(ok, [cost[c] for c in cols]) if len(ok) else []
    return ok.reset_index(drop=True)


def devset_scores(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group (and `all`; `batch B` per batch size when the rows hold several), per method (`hase`, then each
    baseline): n, ±10 %, ±5 %, RMSPE, median error."""
    data = with_baselines(rows)
    out = []
    groups = [ALL, *(g for g in GROUPS if (data[GROUP] == g).any()),
              *sorted({str(g) for g in data[GROUP]} - set(GROUPS))]
    batches = sorted({int(b) for b in data[BATCH]}) if len(data) else []
    parts = {g: data if g == ALL else data[data[GROUP] == g] for g in groups}
    if len(batches) > 1:  # a batch sweep: each batch size scored on its own too
        parts |= {f"{BATCH} {b}": data[data[BATCH].astype(int) == b] for b in batches}
    for g, part in parts.items():
        for method, col in [(HASE, PREDICTED_MS), *((b, b) for b in BASELINES)]:
            s = score(part[MEASURED_MS], part[col])
            out.append({GROUP: g, METHOD: method, "n": s.n, "acc10": s.acc10, "acc5": s.acc5, "rmspe": s.rmspe,
                        MEDIAN_ERROR_PCT: (s.median_ratio - 1) * 100})
    return pd.DataFrame(out, columns=list(SCORE_TABLE))
