"""Multi-stage pipeline profiler: stages on ONNX Runtime / OpenVINO / Python executors, streamed with real
overlap, traced per inference, analysed with pandas, exported to Chrome trace / CSV / JSON.

Typical use::

    from hase.pipeline import load_pipeline_config, pipeline_trace, run_pipeline, summarize, write_chrome_trace
    cfg = load_pipeline_config("configs/pipeline_example.toml")
    run = run_pipeline(cfg.spec, batches=200)
    print(summarize(run).bottleneck)
    write_chrome_trace(pipeline_trace(run), "pipeline_trace.json")

`profile_pipeline(spec, batches, SessionOptions(...))` is what `hase pipeline run|simulate` calls: it also
predicts the stages first (with a trained predictor), writes trace/CSV files and compares predicted vs measured.
Backends register themselves by device kind (`hase.pipeline.backends.register_backend`). A config's `function`
stage names a Python function marked with `@stage_function` (`hase.pipeline.functions`: a config is code).
"""
from hase.pipeline.analysis import (
    cycle_table,
    data_parallel_batches,
    data_parallel_table,
    device_table,
    stage_times,
    track_table,
    union_ns,
)
from hase.pipeline.backends import register_backend
from hase.pipeline.build import PreparedPipeline, prepare, prepared
from hase.pipeline.chrome import pipeline_trace
from hase.pipeline.config import PipelineConfig, load_pipeline_config, pipeline_from_dict, simulation_spec
from hase.pipeline.dummy import matmul_chain, write_matmul_chain
from hase.pipeline.export import read_events_csv, write_events_csv
from hase.pipeline.forecast import PipelinePrediction, compare, predict_pipeline, stage_predictors
from hase.pipeline.functions import stage_function
from hase.pipeline.runner import PipelineFailedError, PipelineRun, StageFailure, run_pipeline, stream
from hase.pipeline.session import PipelineSession, SessionOptions, profile_pipeline
from hase.pipeline.spec import (
    DummyModel,
    ExecutorSpec,
    Partition,
    PipelineSpec,
    StageSpec,
    data_parallel_stage,
    single_stage,
)
from hase.pipeline.summary import PipelineSummary, headline_lines, summarize, summary_dict, summary_text
from hase.profiling.perfetto import write_chrome_trace

__all__ = [
    "DummyModel",
    "ExecutorSpec",
    "Partition",
    "PipelineConfig",
    "PipelineFailedError",
    "PipelinePrediction",
    "PipelineRun",
    "PipelineSession",
    "PipelineSpec",
    "PipelineSummary",
    "PreparedPipeline",
    "SessionOptions",
    "StageFailure",
    "StageSpec",
    "compare",
    "cycle_table",
    "data_parallel_batches",
    "data_parallel_stage",
    "data_parallel_table",
    "device_table",
    "headline_lines",
    "load_pipeline_config",
    "matmul_chain",
    "pipeline_from_dict",
    "pipeline_trace",
    "predict_pipeline",
    "prepare",
    "prepared",
    "profile_pipeline",
    "read_events_csv",
    "register_backend",
    "run_pipeline",
    "simulation_spec",
    "single_stage",
    "stage_function",
    "stage_predictors",
    "stage_times",
    "stream",
    "summarize",
    "summary_dict",
    "summary_text",
    "track_table",
    "union_ns",
    "write_chrome_trace",
    "write_events_csv",
    "write_matmul_chain",
]
