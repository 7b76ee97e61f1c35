"""The report's glossary: what every column and every source of the evaluation report means.

`hase.evaluate.report` refuses to render a column that has no entry here, so the pages never show an
unexplained name.
"""
from __future__ import annotations

from hase.evaluate import devset
from hase.evaluate.evaluation import TARGET_ACC10, TARGET_RMSPE
from hase.evaluate.plots import SOURCES
from hase.evaluate.ratios import CALIBRATED_HELD_OUT_MS, SCOPE, SOURCE_COLUMN
from hase.evaluate.sweep_curves import MEASURED_PER_S, PREDICTED_PER_S, SWEEP, WORST_ERROR_PCT, WORST_SWEEP
from hase.evaluate.worst import FINAL, HELD_OUT, IN_MODEL_MS, KERNEL_DIFF_MS, KERNEL_PRED_MS, PRED_FROM
from hase.predict import dataset
from hase.predict.baselines import BASELINE, MODEL_BYTES, MODEL_FLOPS
from hase.predict.crossval import CALIBRATION, SPLIT, TARGET
from hase.predict.predictor import CLAMPED, KEY

CHOSEN = "chosen"
MEASURED_MIN_MS = "measured_min_ms"  # the devset's robust measured_ms, shown apart from the store's median
SOURCE_DOCS = {  # summary `source` value (a latency column) -> what it is
    "sum_kernel_time_ms": "sum of the `kernel_time` events ORT's profiler records in a profiled run of the "
                          "whole model (measured)",
    "sum_span_ms": "sum of each node's span in the profiled whole-model run (measured)",
    "sum_warm_ms": "sum of each kernel timed alone as a one-kernel model, warm cache (measured)",
    "sum_cold_ms": "sum of each kernel timed alone, weights cold (measured)",
    "sum_pred_held_out_ms": "sum of the per-op forests' kernel predictions, the model's family left out of "
                            "training, before calibration",
    "calibrated_held_out_ms": "the calibrated prediction α·Σ+β (+γ per kernel), the model's family left out of "
                              "training: what `hase predict` gives for a model unlike its training set",
    "calibrated_train_ms": "the same calibrated prediction from the predictor trained on every model (in-sample)",
}
COLUMNS: dict[str, str] = {
    dataset.MODEL_ID: "the model's name in the store",
    dataset.FAMILY: "the model family (one architecture swept over sizes); `exported` are real models exported with "
              "torch.onnx. Held-out figures leave a whole family out of training",
    dataset.MEASURED_MS: "measured latency of the whole model (ms): the minimum of the block medians of "
                         "`session.run` wall times (the plain median for stores collected before Hase measured in "
                         "blocks)",
    CALIBRATED_HELD_OUT_MS: "predicted latency (ms) with the model's family left out of training",
    SOURCE_COLUMN: "which sum of kernel times, or which prediction, the row compares with the measured latency "
                   "(see Sources below)",
    SPLIT: "`measured`: a sum of measured kernel times, no predictor involved; `held_out`: predicted with the "
           "model's family left out of training; `train`: predicted in-sample",
    SCOPE: "which models the row scores: `all`, the generated `zoo` families, or the real `exported` models",
    "n": "how many models the row scores (kernels, in the kernel table)",
    "rmse_ms": "root mean squared error of the sum or prediction against the measured latency (ms)",
    "rmspe": f"root mean squared percentage error (%), lower is better; the target is ≤ {TARGET_RMSPE:g} %",
    "acc5": "share of models whose sum or prediction is within ±5 % of the measured latency",
    "acc10": f"share of models whose sum or prediction is within ±10 % of the measured latency; the target is "
             f"≥ {TARGET_ACC10:.0%}",
    "mean_ratio": "mean of (sum or prediction) / measured latency: 1 is exact, below 1 under-estimates",
    "median_ratio": "median of (sum or prediction) / measured latency",
    TARGET: "which kernel time the per-op forests learnt: " + "; ".join(f"`{k}`, {v}" for k,
                                                                        v in dataset.TARGET_DOC.items()),
    CALIBRATION: "how the sum Σ of kernel predictions becomes a model latency: `raw` is Σ itself, `scale` α·Σ+β, "
                 "`per_kernel` α·Σ+γ·kernels+β, `size` (α+δ·ln Σ)·Σ+γ·kernels+β (a scale that grows with the model); "
                 "fitted by least squares (`ols`), least relative squares "
                 "(`relative`) or the robust Huber loss (`huber`)",
    CHOSEN: "`yes` for the target and calibration this predictor uses",
    BASELINE: "a straight-line fit of latency on model FLOPs (`flops`) or on FLOPs and bytes moved "
              "(`flops+bytes`), held out by family like the predictor",
    KEY: "the forest that predicted the kernels: an op type's own (`Conv`), else a `family:NAME` or the "
         "`generic` fallback",
    **{col: f"{label} / measured latency" for col, label in SOURCES.items()},
    devset.MODEL: "the model's file in the models folder",
    devset.GROUP: "`transformer` when the model has attention (a Softmax; conv/attention hybrids included), `CNN` when "
             "it has convolutions (three or more), else `other`; `all` scores every row",
    devset.BATCH: "the batch size the row was predicted and measured at (a static model's own, or 1, 2, 4, 8 set "
             "through the symbolic batch dimension)",
    devset.METHOD: "`hase`: this predictor; `flops` / `flops+bytes`: a straight line in model FLOPs (and bytes moved) "
              "fitted by relative least squares on every other model's rows (leave-one-model-out)",
    devset.PREDICTED_MS: "latency predicted by `hase predict` (ms)",
    MEASURED_MIN_MS: "latency measured on this host in the predictor's configuration: the minimum of the block "
                     "medians of IOBinding runs (ms), robust to a busy host",
    devset.ERROR_PCT: "(predicted - measured) / measured, in %",
    devset.MEDIAN_ERROR_PCT: "median over the rows of (predicted - measured) / measured, in %: the typical bias",
    devset.SPREAD: "(largest - smallest block median) / smallest: how much the host's speed moved while measuring",
    devset.NOISY: "`yes` when the spread is over the noise bound: the measured figure is less certain",
    SWEEP: "one model at several batch sizes: a model with a symbolic batch, or exports whose names differ only in "
           "their `_bN` suffix (the name without it)",
    PREDICTED_PER_S: "predicted throughput: batch size × 1000 / predicted latency (samples per second)",
    MEASURED_PER_S: "measured throughput: batch size × 1000 / measured latency (samples per second)",
    WORST_ERROR_PCT: "the error (%) of the row furthest from its measured latency at this batch size",
    WORST_SWEEP: "the sweep that row belongs to",
    dataset.N_KERNELS: "nodes in ONNX Runtime's optimized graph that the predictor summed",
    MODEL_FLOPS: "the model's floating-point operations, summed over its kernels (what the baselines fit on)",
    MODEL_BYTES: "bytes the model's kernels read and write, summed (the second input of the FLOPs+bytes line)",
    dataset.NODE_NAME: "the node of ONNX Runtime's optimized graph (one kernel run)",
    dataset.OP_TYPE: "the node's op type",
    KERNEL_PRED_MS: "the kernel's predicted time (ms), before calibration",
    IN_MODEL_MS: "the node's measured time inside the model (ms): its span in the profiled run (store models), or "
                 "its ORT kernel_time in a profiled run on this host (real exported models)",
    KERNEL_DIFF_MS: "predicted - in-model time of the node (ms): what it adds to the model's error, before "
                    "calibration",
    CLAMPED: "`low` / `high` when the forest's prediction lay outside its family's physical band around the "
             "roofline and was clamped to it (see docs/predictor.md)",
    PRED_FROM: f"`{HELD_OUT}`: predicted by the leave-family-out fold that never saw the kernel; `{FINAL}`: by the "
               "saved predictor (which trained on it)",
}
