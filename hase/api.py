"""Hase's Python API: load a predictor, predict models, profile a measured run, run a pipeline.

A thin layer over the functions the CLI runs, so a figure from Python and from `hase` is the same figure:

    >>> import hase
    >>> predictor = hase.load_predictor("cpu-1t")              # doctest: +SKIP
    >>> pred = predictor.predict("model.onnx", free_dims={"batch": 1})  # doctest: +SKIP
    >>> pred.latency_ms, pred.low_ms, pred.high_ms             # doctest: +SKIP
    >>> pred.kernels                                            # doctest: +SKIP
    >>> predictor.predict_many(["a.onnx", "b.onnx"])            # doctest: +SKIP

Every result is a frozen dataclass whose tables are pandas DataFrames (`to_frame()` gives its main one). A model
is a path or an `onnx.ModelProto`; symbolic input dimensions are set by name (`free_dims={"batch": 4}`) or per
input (`input_shapes={"x": (4, 3, 224, 224)}`), as `--free-dim` and `--input-shape` do. A user error (a missing
file, a symbolic shape left open, no such predictor) is a `hase.errors.HaseError` with a one-line message.
"""
from __future__ import annotations

import dataclasses
import logging
import operator
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import onnx
import pandas as pd

from hase import paths
from hase.errors import HaseError
from hase.files import check_output_dir, check_output_file, removed_on_error
from hase.kernels.graph import resolve_input_shapes
from hase.kernels.shapes import MAX_DIM
from hase.pipeline.config import load_pipeline_config
from hase.pipeline.session import PipelineSession, SessionOptions, profile_pipeline
from hase.pipeline.summary import PipelineSummary
from hase.predict.bundle import load_bundle, manifest_ep_config, predictor_dir, read_manifest
from hase.predict.estimate import ModelEstimate, PredictFailure, estimate_models
from hase.predict.identity import (
    PredictorIdentity,
    UsedPredictor,
    describe,
    host_info,
    host_mismatches,
    installed,
    open_predictor,
    predictor_identity,
)
from hase.predict.locate import EXPLICIT, FoundPredictor, devices_in
from hase.predict.manifest import MANIFEST
from hase.profiling import decompose
from hase.profiling.perfetto import to_chrome_trace, write_chrome_trace
from hase.profiling.run import ProfileAnalysis, analyze, profile_model
from hase.runtime.types import EPConfig, Timing

log = logging.getLogger(__name__)

Model: TypeAlias = str | Path | onnx.ModelProto  # an .onnx file, or a model in memory
Shapes: TypeAlias = Mapping[str, Sequence[int]]  # input name -> static shape
PREDICTION_COLUMNS = ("model", "device", "target", "latency_ms", "low_ms", "high_ms", "sum_ms", "n_kernels",
                      "n_fallback")


# ---------------------------------------------------------------- predictors


@dataclass(frozen=True)
class Predictor:
    """A device configuration's trained predictor, loaded once to predict any number of models.

    `host_mismatches` lists how this host differs from the machine it was trained on (each a reason its
    predictions may be off here; none when it matches); `identity` holds what it is (hardware, ONNX Runtime,
    threads, training date, held-out accuracy).
    """

    device: str
    target: str
    path: Path
    source: str  # where it was found: "--predictors" (a directory given), "user" or "shipped"
    host_mismatches: tuple[str, ...]
    identity: PredictorIdentity = field(repr=False)
    used: UsedPredictor = field(repr=False, compare=False)

    def describe(self) -> str:
        """One line naming the predictor, as `hase predict` prints it above its figures."""
        return describe(self.identity)

    def predict(self, model: Model, *, free_dims: Mapping[str, int] | None = None,
                input_shapes: Shapes | None = None) -> Prediction:
        """The model's calibrated latency on this predictor's device configuration, never running it.

        Args:
            model: an .onnx file or an `onnx.ModelProto` (with its weights).
            free_dims: sizes of symbolic input dimensions by name, e.g. {"batch": 4}.
            input_shapes: whole input shapes by input name (win over `free_dims` for their input).

        Raises:
            HaseError: the model cannot be read or split, or an input shape is left symbolic.
        """
        result = self._predict([model], free_dims, input_shapes)[0]
        if isinstance(result, PredictFailure):
            raise HaseError(result.error)
        return result

    def predict_many(self, models: Model | Sequence[Model], *, free_dims: Mapping[str, int] | None = None,
                     input_shapes: Shapes | None = None) -> pd.DataFrame:
        """`predict` for many models (a directory stands for its .onnx files, sorted), one row per model.

        A model that cannot be predicted keeps its row, with NaN figures and the reason in `error` ("" for the
        others), as `hase predict DIR` lists it and goes on; the kernel graphs are built ahead in the background.

        Returns:
            DataFrame with columns model, device, target, latency_ms, low_ms, high_ms, sum_ms, n_kernels,
            n_fallback, error.
        """
        items = [models] if isinstance(models, (str, os.PathLike, onnx.ModelProto)) else list(models)
        rows = [{**r.row(), "error": ""} if isinstance(r, Prediction)
                else {"model": r.model, "device": self.device, "target": self.target, "error": r.error}
                for r in self._predict(_expand_dirs(items), free_dims, input_shapes)]
        frame = pd.DataFrame(rows, columns=[*PREDICTION_COLUMNS, "error"])
        counts = ["n_kernels", "n_fallback"]
        frame[counts] = frame[counts].astype("Int64")  # whole numbers, <NA> where a model failed
        return frame

    def predict_threads(self, model: Model, threads: Sequence[int], *, thread_model: str | Path | None = None,
                        free_dims: Mapping[str, int] | None = None, input_shapes: Shapes | None = None
                        ) -> pd.DataFrame:
        """The model's latency at each intra-op thread count, as `hase predict MODEL --threads` gives it: this
        (one-thread) predictor's kernels moved to each count by a thread model (`thread_model`, else this host's
        own, else the one trained with this predictor on this host, else the shipped one of this host or of the
        nearest core count; docs/predictor.md, 4b).

        Returns:
            DataFrame with one row per count: model, threads, latency_ms, sum_ms, n_kernels, thread_model.

        Raises:
            HaseError: a multi-thread or GPU predictor, a count under 1, a model that cannot be split.
        """
        from hase.predict.thread_estimate import estimate_threads, pick_thread_model  # noqa: PLC0415 - this mode
        from hase.runtime.host import host_fingerprint  # noqa: PLC0415

        tm, which = pick_thread_model(host_fingerprint(), thread_model, bundle=self.used.bundle)
        with _model_files([model]) as (files, names):
            est = estimate_threads(files[0], self.used.bundle, tm, list(threads), which, self.target,
                                   _input_shapes(input_shapes), _free_dims(free_dims))
        return pd.DataFrame({"model": names[0], "threads": list(est.threads), "latency_ms": list(est.latency_ms),
                             "sum_ms": list(est.sum_ms), "n_kernels": est.n_kernels, "thread_model": which})

    def _predict(self, models: Sequence[Model], free_dims: Mapping[str, int] | None,
                 input_shapes: Shapes | None) -> list[Prediction | PredictFailure]:
        """`estimate_models` (what `hase predict` runs) on the models, ModelProtos written to a temporary folder."""
        shapes, free = _input_shapes(input_shapes), _free_dims(free_dims)
        with _model_files(models) as (files, names):
            results = estimate_models(files, self.used.bundle, self.target, shapes, free)
            renamed = {str(f): name for f, name in zip(files, names, strict=True) if str(f) != name}
            out: list[Prediction | PredictFailure] = []
            for r in results:
                name = renamed.get(r.model, r.model)
                if isinstance(r, PredictFailure):
                    out.append(PredictFailure(name, r.error.replace(r.model, name)))
                else:
                    out.append(Prediction.of(dataclasses.replace(r, model=name)))
        return out


def load_predictor(device: str | Path = paths.DEFAULT_DEVICE, *,
                   predictors_dir: str | Path | None = None, target: str | None = None) -> Predictor:
    """Load a trained predictor, verified, as `hase predict` does.

    Args:
        device: a device configuration's name (e.g. "cpu-1t"), looked up in `predictors_dir` when given, else
            the user directory (where `hase train` writes), else the predictors shipped with Hase; or the path
            of a predictor directory (the folder holding its manifest.json, e.g. "data/predictors/cpu-1t").
        predictors_dir: a folder of predictors, one per device (`--predictors DIR`), e.g. "data/predictors".
        target: the target to predict (default: the predictor's own default, as `--target`).

    A host that differs from the predictor's machine is logged as a warning (see `Predictor.host_mismatches`).

    Raises:
        HaseError: no such predictor, or one that fails verification (edited, damaged, another feature schema).
    """
    used = _open(device, predictors_dir, target)
    if used.mismatches:
        log.warning("this host differs from the machine predictor %r was trained on: %s", used.identity.device,
                    "; ".join(used.mismatches))
    ident = used.identity
    return Predictor(ident.device, ident.target, Path(ident.path), ident.source, used.mismatches, ident, used)


def _open(device: str | Path, predictors_dir: str | Path | None, target: str | None) -> UsedPredictor:
    """`open_predictor` (what `hase predict` runs) for a device name; a predictor directory is opened as it is, as
    `open_predictor` does after its lookup (which could prefer another folder: an adaptation to this host)."""
    text = os.fspath(device)
    d = Path(text)
    if (d / MANIFEST).is_file():
        if predictors_dir is not None:
            raise HaseError(f"{text!r} is a predictor directory: give either it or predictors_dir, not both")
        found = FoundPredictor(d.resolve().name, d.resolve(), EXPLICIT)
        bundle = load_bundle(found.path, [target or "default"])
        ident = predictor_identity(bundle.manifest, found, bundle.target(target))
        return UsedPredictor(bundle, ident, tuple(host_mismatches(ident, host_info(gpu=ident.is_cuda))))
    if isinstance(device, os.PathLike) or os.sep in text or "/" in text:
        have = devices_in(d)
        if have:
            raise HaseError(f"{text} is a folder of predictors ({', '.join(have)}): name one, e.g. "
                            f"load_predictor({have[0]!r}, predictors_dir={text!r})")
        raise HaseError(f"{text} is not a predictor directory (no {MANIFEST} in it): give a device name such as "
                        f"{paths.DEFAULT_DEVICE!r} or a predictor's folder (see hase.predictors())")
    return open_predictor(text, predictors_dir, target)


def predictors(predictors_dir: str | Path | None = None) -> pd.DataFrame:
    """Every installed predictor, one row each, in lookup order (as `hase predictors` lists them): user-trained
    and shipped, or those of `predictors_dir`.

    Returns:
        DataFrame: device, path, source, shadowed (a shipped predictor hidden by a user-trained one of the same
        device), what it is (cpu_model, ort_version, execution_provider, threads, opt_level, created_at,
        default_target, acc10, rmspe, ...), host_mismatches (how this host differs) and error (why a directory
        cannot be used; "" when it can).
    """
    found = [f.name for f in dataclasses.fields(FoundPredictor)]
    columns = [*found, *(c for c in PredictorIdentity.columns() if c not in found),
               "host_mismatches", "error"]
    rows = [{**d, "error": d["error"] or ""} for d in (p.to_dict() for p in installed(predictors_dir))]
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class Prediction:
    """A model's predicted latency (ms) on a device configuration, with its interval and what it is made of.

    `latency_ms` is the calibrated prediction; `low_ms`–`high_ms` the calibrated p10–p90 of the forests' trees
    summed over the model (a spread of the forest, not a measurement's confidence interval); `sum_ms` the raw
    sum of the kernels before calibration; `n_fallback` the kernels predicted by a fallback forest (no forest
    of their own op type).
    """

    model: str
    device: str
    target: str
    latency_ms: float
    low_ms: float
    high_ms: float
    sum_ms: float
    n_kernels: int
    n_fallback: int
    record: ModelEstimate = field(repr=False, compare=False)  # the full record: calibration, kernels, timings

    @classmethod
    def of(cls, est: ModelEstimate) -> Prediction:
        """The prediction of a `ModelEstimate` (what `estimate_models` returns)."""
        return cls(est.model, est.device, est.target, est.latency_ms, est.low_ms, est.high_ms, est.sum_ms,
                   est.n_kernels, len(est.fallback), est)

    @property
    def kernels(self) -> pd.DataFrame:
        """One row per node of ONNX Runtime's kernel graph, in execution order: node_name, kernel_id, op_type,
        key (the forest used), source (its own op's, its family's or the generic forest) and pred_ms."""
        return self.record.frame()

    @property
    def by_op(self) -> pd.DataFrame:
        """Predicted time per op type, largest first: op_type, n (kernels), pred_ms, share (of `sum_ms`)."""
        return pd.DataFrame([dataclasses.asdict(t) for t in self.record.by_op()],
                            columns=["op_type", "n", "pred_ms", "share"])

    def row(self) -> dict[str, Any]:
        """The headline figures as one flat record (a row of `predict_many`)."""
        return {name: getattr(self, name) for name in PREDICTION_COLUMNS}

    def to_frame(self) -> pd.DataFrame:
        """The headline figures as a one-row DataFrame (the columns of `predict_many`, without `error`)."""
        return pd.DataFrame([self.row()], columns=list(PREDICTION_COLUMNS))

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """What `hase predict --json` prints for the model (its `top` slowest kernels), without the predictor."""
        return self.record.to_dict(top)


# ---------------------------------------------------------------- measured runs


@dataclass(frozen=True, eq=False)
class Profile:
    """A model run under ONNX Runtime's profiler (`hase profile`): where a measured run's time goes.

    Times in the tables are in µs, as ORT reports them (columns `*_us`); `wall` is session.run's wall clock in ms
    (profiler on). Only the runs after the warm-up count.
    """

    model: str
    device: str
    runs: int
    warmup: int
    wall: Timing
    summary: pd.Series = field(repr=False)  # medians over runs of the decomposition of a run (model_run_us, ...)
    nodes: pd.DataFrame = field(repr=False)  # per node: op_type, provider, n_runs, median span_us, kernel_time_us
    per_run: pd.DataFrame = field(repr=False)  # the decomposition, one row per run
    op_types: pd.DataFrame = field(repr=False)  # per (op_type, provider): nodes, summed node medians, share
    providers: pd.DataFrame = field(repr=False)  # per execution provider: nodes and kernel time
    findings: tuple[str, ...]  # plain-language findings: warm-up, noise, gaps, placement
    events: pd.DataFrame = field(repr=False)  # ORT's profile events, warm-up runs included
    metadata: dict[str, Any] = field(repr=False)  # ONNX Runtime version, provider, threads, ...
    analysis: ProfileAnalysis = field(repr=False)

    @property
    def model_run_ms(self) -> float:
        """Median time of one InferenceSession.run inside ORT, in ms."""
        return float(self.summary[decompose.MODEL_RUN_US]) / 1e3

    def to_frame(self) -> pd.DataFrame:
        """The per-node table (`nodes`)."""
        return self.nodes

    def write_trace(self, path: str | Path) -> Path:
        """Write the run as a Perfetto / Chrome trace with Hase's derived spans (`hase profile --out-trace`)."""
        return write_chrome_trace(to_chrome_trace(self.events, gpu=self.analysis.gpu), path)


def profile(model: Model, device: str | EPConfig = paths.DEFAULT_DEVICE, *,
            predictors_dir: str | Path | None = None, runs: int = 10, warmup: int = 3,
            free_dims: Mapping[str, int] | None = None, input_shapes: Shapes | None = None) -> Profile:
    """Run the model here under ONNX Runtime's profiler and decompose where its time goes (`hase profile`).

    Args:
        model: an .onnx file or an `onnx.ModelProto`.
        device: the configuration to run it in: a predictor's device name (its execution provider, threads and
            optimization level, found as `load_predictor` finds it), or an `EPConfig`.
        runs, warmup: profiled runs that count, after `warmup` runs that are profiled but left out.
        free_dims, input_shapes: as for `Predictor.predict`.

    ORT's profile file goes to a temporary folder, removed before this returns (`Profile.events` holds it).
    """
    ep = device if isinstance(device, EPConfig) else manifest_ep_config(
        read_manifest(predictor_dir(device, predictors_dir)))
    shapes, free = _input_shapes(input_shapes), _free_dims(free_dims)
    with _model_files([model]) as (files, names), tempfile.TemporaryDirectory(prefix="hase_profile_") as tmp:
        path = files[0]
        full = resolve_input_shapes(path, shapes, free) if free else shapes
        result = profile_model(path, ep, runs=runs, warmup=warmup, input_shapes=full, workdir=tmp)
    a = analyze(result.events, skip_runs=result.skip_runs, gpu=result.gpu)
    return Profile(model=names[0], device=ep.name, runs=runs, warmup=warmup, wall=result.wall, summary=a.summary,
                   nodes=decompose.node_summary(result.events, result.skip_runs), per_run=a.per_run,
                   op_types=a.op_types, providers=a.providers, findings=tuple(a.findings), events=result.events,
                   metadata=result.metadata, analysis=a)


# ---------------------------------------------------------------- pipelines


@dataclass(frozen=True, eq=False)
class PipelineResult:
    """A multi-stage pipeline run (`hase pipeline run`): throughput, end-to-end latency, the bottleneck stage.

    `summary` holds every figure and table (stages, tracks, devices, data-parallel, cycles); `comparison` the
    predicted vs measured figures when the run was predicted first; `files` what was written ("trace", "csv").
    """

    name: str
    batches: int
    completed: int
    throughput_per_s: float
    latency_p50_ms: float
    latency_p95_ms: float
    bottleneck: str | None
    summary: PipelineSummary = field(repr=False)
    comparison: pd.DataFrame | None = field(repr=False)
    files: dict[str, Path] = field(repr=False)
    session: PipelineSession = field(repr=False)

    @property
    def stages(self) -> pd.DataFrame:
        """Per stage: streams, runs, stage time (mean, p50, p95, ms), inference wall and hardware time."""
        return self.summary.stages

    def to_frame(self) -> pd.DataFrame:
        """The per-stage table (`stages`)."""
        return self.stages

    def to_dict(self) -> dict[str, Any]:
        """What `hase pipeline run --json` prints."""
        return self.session.to_dict()


def run_pipeline(config: str | Path, *, batches: int | None = None, warmup: int | None = None,
                 trace_path: str | Path | None = None, csv_path: str | Path | None = None,
                 workdir: str | Path | None = None, predict_device: str | None = None,
                 predictors_dir: str | Path | None = None) -> PipelineResult:
    """Stream batches through the pipeline a TOML config describes (`hase pipeline run CONFIG`).

    A config is code: a `function` stage imports the module it names (see docs/pipeline.md).

    Args:
        config: the pipeline's TOML file (e.g. configs/pipeline_example.toml).
        batches, warmup: override the config's `batches` and warm-up runs per executor.
        trace_path, csv_path: write a Perfetto trace / every event as CSV there.
        workdir: keep the dummy models and ORT profiles there (default: a temporary folder).
        predict_device: predict every ONNX Runtime CPU stage with this device's predictor first
            (`predictors_dir` as for `load_predictor`); `PipelineResult.comparison` then holds predicted vs
            measured.

    Raises:
        HaseError: a bad config or option, checked before anything runs; `hase.pipeline.runner.PipelineFailedError`
            (a HaseError, with the partial run as `.run`) when a stage fails mid-run, after the files are written.
    """
    cfg = load_pipeline_config(config)
    warm = cfg.warmup if warmup is None else warmup
    if warm < 0:
        raise HaseError(f"warm-up runs must be >= 0 (got {warm})")
    for what, path in (("trace_path", trace_path), ("csv_path", csv_path)):
        if path:
            check_output_file(path, what)
    options = SessionOptions(warmup=warm, workdir=workdir, trace_path=trace_path, csv_path=csv_path,
                             predict_device=predict_device, predictors_dir=predictors_dir)
    n = cfg.batches if batches is None else batches
    if workdir:
        check_output_dir(workdir, "workdir")
        with removed_on_error(workdir):
            session = profile_pipeline(cfg.spec, n, options)
    else:
        session = profile_pipeline(cfg.spec, n, options)
    if session.error is not None:
        raise session.error
    s = session.summary
    return PipelineResult(s.name, s.batches, s.completed, s.throughput_per_s, s.latency_p50_ms, s.latency_p95_ms,
                          s.bottleneck, s, session.comparison, session.files, session)


# ---------------------------------------------------------------- models and shapes


@contextmanager
def _model_files(models: Sequence[Model]) -> Iterator[tuple[list[Path], list[str]]]:
    """The models as files (paths as given; each ModelProto saved into a temporary folder, removed afterwards)
    and the name each result carries (the path, or `<ModelProto NAME>`)."""
    files: list[Path] = []
    names: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hase_api_") as tmp:
        for i, m in enumerate(models):
            if isinstance(m, onnx.ModelProto):
                files.append(_save_proto(m, Path(tmp) / f"model{i}.onnx"))
                names.append(f"<ModelProto {m.graph.name or i}>")
            elif isinstance(m, (str, os.PathLike)):
                files.append(Path(m))
                names.append(os.fspath(m))
            else:
                raise TypeError(f"a model is a path or an onnx.ModelProto, not {type(m).__name__}")
        yield files, names


PROTOBUF_LIMIT = 2**31 - 1  # bytes: a larger ModelProto is saved with its weights as external data


def _save_proto(model: onnx.ModelProto, path: Path) -> Path:
    """Save a model held in memory for the functions that read files; one over protobuf's 2 GB limit with its
    weights beside it (a copy is converted: the caller's model is left as it is)."""
    if model.ByteSize() <= PROTOBUF_LIMIT:
        onnx.save_model(model, str(path))
        return path
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    onnx.save_model(copy, str(path), save_as_external_data=True, location=f"{path.name}.data")
    return path


def _expand_dirs(models: Sequence[Model]) -> list[Model]:
    """A directory stands for the .onnx files in it (sorted), as `hase predict DIR`; none is a HaseError."""
    out: list[Model] = []
    for m in models:
        if isinstance(m, (str, os.PathLike)) and Path(m).is_dir():
            found = sorted(Path(m).glob("*.onnx"))
            if not found:
                raise HaseError(f"{os.fspath(m)} holds no .onnx files")
            out += found
        else:
            out.append(m)
    return out


def _free_dims(free_dims: Mapping[str, int] | None) -> dict[str, int]:
    """`free_dims` checked as `--free-dim` is: every size an int >= 1."""
    out: dict[str, int] = {}
    for name, size in (free_dims or {}).items():
        value = _size(size)
        if value is None:
            raise HaseError(f"free_dims[{name!r}] = {size!r}: a dimension is a size, an int >= 1")
        out[str(name)] = value
    return out


def _input_shapes(input_shapes: Shapes | None) -> dict[str, tuple[int, ...]]:
    """`input_shapes` checked as `--input-shape` is: every dimension an int >= 1."""
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in (input_shapes or {}).items():
        dims = [_size(d) for d in shape] if not isinstance(shape, (str, bytes)) else []
        if not dims or None in dims:
            raise HaseError(f"input_shapes[{name!r}] = {shape!r}: a shape is a sequence of ints >= 1, "
                            f"e.g. (1, 3, 224, 224)")
        out[str(name)] = tuple(d for d in dims if d is not None)
    return out


def _size(value: object) -> int | None:
    """A dimension's size (an int or numpy integer from 1 to `MAX_DIM`), else None."""
    if isinstance(value, bool):
        return None
    try:
        size = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
    return size if 1 <= size <= MAX_DIM else None
