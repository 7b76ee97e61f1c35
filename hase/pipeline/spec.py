"""What a pipeline is: stages in order, each on one executor or data-parallel over several (frozen records).

These records are checked on construction, so a bad pipeline fails before anything is loaded. The Python
API builds them directly (`single_stage`, `data_parallel_stage`); `hase.pipeline.config` builds them from TOML.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hase import limits
from hase.errors import HaseError

DEFAULT_HW_PROFILE_EVENTS = 20_000
# Backend profiling on one batch in 16, in blocks of 32 consecutive batches, the first 8 of each block not
# kept (cold second copy of the weights): see docs/pipeline.md "Overhead" for the measurements behind them.
DEFAULT_HW_SAMPLE_EVERY = 16
DEFAULT_HW_SAMPLE_BLOCK = 32
DEFAULT_HW_SAMPLE_WARMUP = 8
DEFAULT_MAX_EVENTS = 1_000_000


@dataclass(frozen=True)
class DummyModel:
    """A generated MatMul(+Relu) chain `[rows, in] -> [rows, width]`, so a pipeline runs without user models."""

    width: int = 256
    layers: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if self.width < 1 or self.layers < 1:
            raise HaseError(f"dummy model needs width >= 1 and layers >= 1 (got {self.width}, {self.layers})")
        limits.check_count("dummy model layers", self.layers, limits.PIPELINE_MAX_DUMMY_LAYERS)
        # each layer after the first holds a [width, width] float32 weight (sized exactly when it is built)
        limits.check_tensor(f"dummy model (width={self.width}): a weight", (self.width, self.width), "float32")


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor: a device and what runs on it (an ONNX file, a dummy model, or a Python function).

    Devices: `cpu` (ONNX Runtime CPU EP), `cuda:N` (ORT CUDA EP), `ov:CPU` / `ov:GPU` / `ov:NPU`
    (OpenVINO), `host` (a Python function on the calling CPU).
    """

    device: str = "cpu"
    model: Path | None = None
    dummy: DummyModel | None = None
    fn: Callable[[np.ndarray], np.ndarray] | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        given = [k for k, v in (("model", self.model), ("dummy", self.dummy), ("function", self.fn)) if v is not None]
        if len(given) != 1:
            raise HaseError(f"an executor needs exactly one of model, dummy or function (got {given or 'none'})")
        if self.model is not None:
            object.__setattr__(self, "model", Path(self.model))
        if self.fn is not None and self.device != "host":
            raise HaseError(f"a Python-function executor runs on device 'host', not {self.device!r}")
        if self.fn is None and self.device == "host":
            raise HaseError("device 'host' runs a Python function: give `function`, or pick a model device")
        if self.threads < 1:
            raise HaseError(f"threads must be >= 1 (got {self.threads})")
        limits.check_count("threads", self.threads, limits.PIPELINE_MAX_THREADS)

    @property
    def label(self) -> str:
        """A short name for messages: the model file, 'dummy' or the function's name."""
        if self.model is not None:
            return self.model.name
        if self.dummy is not None:
            return f"dummy(width={self.dummy.width}, layers={self.dummy.layers})"
        return getattr(self.fn, "__name__", "function")


@dataclass(frozen=True)
class Partition:
    """How a data-parallel stage splits its input: along `axis`, one ratio per executor (summing to 1)."""

    axis: int = 0
    ratios: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ratios", tuple(float(r) for r in self.ratios))
        if any(r <= 0 for r in self.ratios):
            raise HaseError(f"partition ratios must be > 0 (got {list(self.ratios)})")
        if self.ratios and abs(sum(self.ratios) - 1.0) > 1e-6:
            raise HaseError(f"partition ratios must sum to 1 (got {list(self.ratios)}, sum {sum(self.ratios):g})")


@dataclass(frozen=True)
class StageSpec:
    """A logical stage: one executor, or a data-parallel stage over two or more with partition/merge.

    `streams` is the number of batches the stage works on at once; every stream has its own executors.
    """

    name: str
    executors: tuple[ExecutorSpec, ...]
    streams: int = 1
    partition: Partition | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "executors", tuple(self.executors))
        if not self.name:
            raise HaseError("every stage needs a name")
        if not self.executors:
            raise HaseError(f"stage {self.name!r} has no executor")
        if self.streams < 1:
            raise HaseError(f"stage {self.name!r}: streams must be >= 1 (got {self.streams})")
        k = len(self.executors)
        limits.check_count(f"stage {self.name!r}: streams", self.streams, limits.PIPELINE_MAX_STREAMS)
        limits.check_count(f"stage {self.name!r}: executors", k, limits.PIPELINE_MAX_EXECUTORS)
        if k > 1:
            part = self.partition or Partition()
            ratios = part.ratios or tuple([1.0 / k] * k)
            if len(ratios) != k:
                raise HaseError(f"stage {self.name!r}: {len(ratios)} partition ratios for {k} executors; "
                                f"give one ratio per executor")
            object.__setattr__(self, "partition", Partition(part.axis, ratios))
        elif self.partition is not None:
            raise HaseError(f"stage {self.name!r} has one executor: drop `partition` or add executors")

    @property
    def data_parallel(self) -> bool:
        """True when the stage splits each batch over several executors."""
        return len(self.executors) > 1

    def require_partition(self) -> Partition:
        """The partition of a data-parallel stage (complete after construction); HaseError for a single one."""
        if self.partition is None:
            raise HaseError(f"stage {self.name!r} has one executor: it has no partition")
        return self.partition


@dataclass(frozen=True)
class PipelineSpec:
    """The whole pipeline plus run settings.

    Args:
        batch: rows per batch entering the first stage (axis 0 of its input).
        features: input width when the first stage is a dummy model (ignored otherwise).
        queue_depth: capacity of the bounded queue in front of every stage.
        hw_profile_events: ORT profiler budget per executor (events); profiling stops there (memory bound).
        hw_sample_every, hw_sample_block, hw_sample_warmup: backend profiling (ORT profiler, OpenVINO
            PERF_COUNT) on one batch in `hw_sample_every` only, in blocks of `hw_sample_block` consecutive
            batches (see `hw_sampled`), the first `hw_sample_warmup` runs of each block on each executor not
            kept; hw_sample_every = 1: every run, no warm-up.
        max_events: trace events kept in memory; later ones are counted as dropped (memory bound).
    """

    stages: tuple[StageSpec, ...]
    name: str = "pipeline"
    batch: int = 8
    features: int = 256
    input_shape: tuple[int, ...] | None = None
    queue_depth: int = 2
    seed: int = 0
    hw_profile_events: int = DEFAULT_HW_PROFILE_EVENTS
    hw_sample_every: int = DEFAULT_HW_SAMPLE_EVERY
    hw_sample_block: int = DEFAULT_HW_SAMPLE_BLOCK
    hw_sample_warmup: int = DEFAULT_HW_SAMPLE_WARMUP
    max_events: int = DEFAULT_MAX_EVENTS

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        if not self.stages:
            raise HaseError("a pipeline needs at least one stage")
        names = [s.name for s in self.stages]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise HaseError(f"stage names must be unique (repeated: {dupes})")
        if self.batch < 1 or self.features < 1 or self.queue_depth < 1:
            raise HaseError("batch, features and queue_depth must be >= 1")
        limits.check_count("queue_depth", self.queue_depth, limits.PIPELINE_MAX_QUEUE_DEPTH)
        if self.hw_profile_events < 0 or self.max_events < 1:
            raise HaseError("hw_profile_events must be >= 0 and max_events >= 1")
        if self.hw_sample_every < 1 or self.hw_sample_block < 1:
            raise HaseError(f"hw_sample_every and hw_sample_block must be >= 1 (hw_sample_every = 1: hardware "
                            f"time for every run; got {self.hw_sample_every}, {self.hw_sample_block})")
        if self.hw_sample_warmup < 0 or (self.hw_sample_every > 1 and self.hw_sample_warmup >= self.hw_sample_block):
            raise HaseError(f"hw_sample_warmup={self.hw_sample_warmup} must be >= 0 and below hw_sample_block="
                            f"{self.hw_sample_block}, or no sampled run would be kept: set both (defaults "
                            f"{DEFAULT_HW_SAMPLE_BLOCK} and {DEFAULT_HW_SAMPLE_WARMUP})")
        if self.input_shape is not None:
            object.__setattr__(self, "input_shape", tuple(int(d) for d in self.input_shape))
            if not self.input_shape or min(self.input_shape) < 1:
                raise HaseError(f"input_shape {list(self.input_shape)} must be a list of sizes >= 1")
            if self.input_shape[0] != self.batch:
                raise HaseError(f"input_shape {list(self.input_shape)} must start with batch={self.batch}")
        shape = self.input_shape or (self.batch, self.features)
        limits.check_tensor("the pipeline's input batch", shape, "float32")  # float32 or the first model's dtype

    def hw_sampled(self, batch_id: int) -> bool:
        """Whether backends profile this batch: block `batch_id // hw_sample_block` is a multiple of
        `hw_sample_every`. Example: every 4, block 2 -> batches 0, 1, 8, 9, 16, 17, ..."""
        return (batch_id // self.hw_sample_block) % self.hw_sample_every == 0

    def stage(self, name: str) -> StageSpec:
        """The stage called `name`; an unknown name is a HaseError listing the stages."""
        for s in self.stages:
            if s.name == name:
                return s
        raise HaseError(f"no stage {name!r}: stages are {[s.name for s in self.stages]}")


def single_stage(name: str, device: str = "cpu", *, model: str | Path | None = None, dummy: DummyModel | None = None,
                 fn: Callable[[np.ndarray], np.ndarray] | None = None, threads: int = 1,
                 streams: int = 1) -> StageSpec:
    """A stage with one executor (Python API shorthand)."""
    ex = ExecutorSpec(device=device, model=Path(model) if model is not None else None, dummy=dummy, fn=fn,
                      threads=threads)
    return StageSpec(name, (ex,), streams=streams)


def data_parallel_stage(name: str, executors: Sequence[ExecutorSpec], *, axis: int = 0,
                        ratios: Sequence[float] | None = None, streams: int = 1) -> StageSpec:
    """A data-parallel stage: partition along `axis` by `ratios` (default equal), run all, concatenate."""
    if len(executors) < 2:
        raise HaseError(f"data-parallel stage {name!r} needs two or more executors (got {len(executors)})")
    return StageSpec(name, tuple(executors), streams=streams, partition=Partition(axis, tuple(ratios or ())))
