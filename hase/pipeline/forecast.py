"""Predicted stage times, cycle latency and throughput of a pipeline, and predicted vs measured side by side.

The hook for Hase's latency predictors: pass any `model file -> latency (ms)` callable (or one per device).
A data-parallel stage is predicted as the slowest executor on its own partition's model; partition and
merge are CPU work no model predicts, so they are measured only (and the prediction says so).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import pandas as pd

from hase.errors import HaseError
from hase.pipeline import schema
from hase.pipeline.build import PreparedPipeline
from hase.pipeline.spec import PipelineSpec
from hase.pipeline.summary import PipelineSummary
from hase.predict.bundle import predictor_dir
from hase.predict.estimate import predict_model_latency

LatencyPredictor: TypeAlias = Callable[[Path], float]  # model file -> predicted latency of one inference, in ms
Predictors: TypeAlias = LatencyPredictor | Mapping[str, LatencyPredictor]  # one for all devices, or per device


@dataclass(frozen=True)
class PipelinePrediction:
    """Per-stage predictions (`stage, streams, predicted_ms, per_stream_ms, note`) and pipeline figures.

    `cycle_ms` is the largest predicted stage time; `throughput_per_s` the smallest stage capacity
    (streams / stage time), which is 1 / cycle when every stage has one stream. Both are over the stages that
    have a prediction, and those leave out the partition and merge of data-parallel stages: when `left_out`
    names anything, `cycle_ms` is a lower bound (the work left out can only lengthen the cycle) and
    `throughput_per_s` an upper bound (it can only lower the throughput).
    """

    stages: pd.DataFrame
    cycle_ms: float
    throughput_per_s: float
    bottleneck: str | None
    complete: bool  # every stage has a prediction (partition and merge of data-parallel stages never do)
    left_out: tuple[str, ...] = ()  # work the figures leave out: "stage <name>", "<name> partition and merge"


def predict_pipeline(target: PipelineSpec | PreparedPipeline, predictors: Predictors) -> PipelinePrediction:
    """Predict every stage's latency and the pipeline's cycle latency and throughput before running it.

    Pass a PreparedPipeline when stages use dummy models (their files are written while preparing).
    """
    models = _stage_models(target)
    spec = target.spec if isinstance(target, PreparedPipeline) else target
    rows = []
    for st, files in zip(spec.stages, models, strict=True):
        times = [_predict(predictors, ex.device, f) if f is not None else math.nan
                 for ex, f in zip(st.executors, files, strict=True)]
        pred = max(times) if times and not any(math.isnan(t) for t in times) else math.nan
        rows.append({schema.STAGE: st.name, schema.STREAMS: st.streams, schema.PREDICTED_MS: pred,
                     schema.PER_STREAM_MS: pred / st.streams, schema.NOTE: _note(st.data_parallel, times)})
    df = pd.DataFrame(rows,
                      columns=[schema.STAGE, schema.STREAMS, schema.PREDICTED_MS, schema.PER_STREAM_MS, schema.NOTE])
    known = df.dropna(subset=[schema.PREDICTED_MS])
    left_out = tuple(f"stage {name}" for name in df[schema.STAGE][df[schema.PREDICTED_MS].isna()])
    left_out += tuple(f"{st.name} partition and merge" for st in spec.stages if st.data_parallel)
    if known.empty:
        return PipelinePrediction(df, math.nan, math.nan, None, False, left_out)
    cycle = float(known[schema.PREDICTED_MS].max())
    throughput = float((1e3 * known[schema.STREAMS] / known[schema.PREDICTED_MS]).min())
    bottleneck = str(known[schema.STAGE].iat[int(known[schema.PER_STREAM_MS].to_numpy().argmax())])
    return PipelinePrediction(df, cycle, throughput, bottleneck, len(known) == len(df), left_out)


def stage_predictors(spec: PipelineSpec, device_config: str,
                     predictors_dir: str | Path | None = None) -> dict[str, LatencyPredictor]:
    """One `model -> ms` predictor per pipeline device: the trained predictor of `device_config` for the ORT CPU
    device, NaN (not predicted) for devices no predictor describes (OpenVINO, CUDA, host).

    Raises HaseError, before anything runs, when `device_config` has no trained predictor.
    """

    predictor_dir(device_config, predictors_dir)
    predict = functools.partial(predict_model_latency, device=device_config, predictors_dir=predictors_dir)
    return {ex.device: predict if ex.device == "cpu" else _not_predicted for st in spec.stages for ex in st.executors}


def _not_predicted(_model: Path) -> float:
    return math.nan


def _stage_models(target: PipelineSpec | PreparedPipeline) -> list[list[Path | None]]:
    if isinstance(target, PreparedPipeline):
        return [list(rt.models) for rt in target.stages]
    if any(ex.dummy is not None for st in target.stages for ex in st.executors):
        raise HaseError("this pipeline uses dummy models: prepare it first (hase.pipeline.prepare) and predict "
                        "the PreparedPipeline, whose dummy model files exist")
    return [[ex.model for ex in st.executors] for st in target.stages]


def _predict(predictors: Predictors, device: str, model: Path) -> float:
    if callable(predictors):
        return float(predictors(model))
    if device not in predictors:
        raise HaseError(f"no latency predictor for device {device!r} (have {sorted(predictors)}); "
                        f"add one or pass a single predictor for every device")
    return float(predictors[device](model))


def _note(data_parallel: bool, times: list[float]) -> str:
    if any(math.isnan(t) for t in times):
        return "not predicted: no model, or no predictor for its device (measured only)"
    if data_parallel:
        return "slowest executor on its partition; partition and merge not predicted (measured only)"
    return ""


def compare(prediction: PipelinePrediction, measured: PipelineSummary) -> pd.DataFrame:
    """Predicted vs measured, one row per figure: each stage's time (and a data-parallel stage's device
    part), cycle latency and throughput. Columns: `figure, predicted, measured, error_pct, note`."""
    rows = []
    stages = measured.stages.set_index(schema.STAGE) if len(measured.stages) else pd.DataFrame()
    dp = measured.data_parallel
    for r in prediction.stages.to_dict("records"):
        stage, predicted = str(r[schema.STAGE]), float(r[schema.PREDICTED_MS])
        meas = float(stages[schema.STAGE_MS].get(stage, math.nan)) if len(stages) else math.nan
        rows.append(_row(f"{stage} stage_ms", predicted, meas, str(r[schema.NOTE])))
        if len(dp) and stage in set(dp[schema.STAGE]):
            dev = dp[(dp[schema.STAGE] == stage) & dp["part"].str.startswith("executor")]["mean_ms"].max()
            rows.append(_row(f"{stage} slowest device_ms", predicted, float(dev), "device part only"))
    cycle_note, throughput_note = bound_notes(prediction)
    rows.append(_row(schema.CYCLE_MS, prediction.cycle_ms, measured.cycle_mean_ms, cycle_note))
    rows.append(_row("throughput_per_s", prediction.throughput_per_s, measured.throughput_per_s, throughput_note))
    return pd.DataFrame(rows, columns=["figure", "predicted", "measured", schema.ERROR_PCT, schema.NOTE])


def bound_notes(prediction: PipelinePrediction) -> tuple[str, str]:
    """The notes of the predicted cycle and throughput: when the prediction leaves work out, the cycle is a lower
    bound (more work can only lengthen it) and the throughput an upper bound; ("", "") when nothing is left out.

    Example: stage `classify` not predicted -> ("lower bound: leaves out stage classify",
    "upper bound: leaves out stage classify").
    """
    if not prediction.left_out:
        return "", ""
    what = "leaves out " + ", ".join(prediction.left_out)
    return f"lower bound: {what}", f"upper bound: {what}"


def _row(figure: str, predicted: float, measured: float, note: str) -> dict[str, object]:
    err = (predicted - measured) / measured * 100 if measured and not math.isnan(measured) else math.nan
    return {"figure": figure, "predicted": predicted, "measured": measured, schema.ERROR_PCT: err, schema.NOTE: note}
