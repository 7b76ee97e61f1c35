"""Everything that must hold before a pipeline runs: devices present, models loaded, shapes that chain.

`prepare` checks devices, writes dummy models, opens every executor of every stream, and pushes warm-up
batches through the stages in order. That warm-up pass is also the validation: a stage whose model does
not accept the previous stage's output, a partition that does not divide the batch, or a model that fails
to load is a HaseError here, before any timed run.
"""
from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from hase import limits
from hase.errors import HaseError, first_line
from hase.kernels.inputs import fill_chunked
from hase.pipeline import devices
from hase.pipeline.backends import open_executor
from hase.pipeline.dummy import write_matmul_chain
from hase.pipeline.event_log import Track
from hase.pipeline.executors import Executor, ExecutorOptions
from hase.pipeline.partition import merge, normalize_axis, partition, split_sizes
from hase.pipeline.spec import ExecutorSpec, PipelineSpec, StageSpec

INPUT_POOL = 4  # distinct random input batches the source cycles through


@dataclass
class StageRuntime:
    """A stage ready to run: executors and tracks per stream, and how its input is partitioned."""

    spec: StageSpec
    index: int
    executors: list[list[Executor]]          # [stream][executor]
    device_tracks: list[list[Track]]         # [stream][executor]
    host_tracks: list[Track | None]          # [stream]; None unless data-parallel
    sizes: tuple[int, ...] = ()
    axis: int = 0
    in_shape: tuple[int, ...] = ()
    out_shape: tuple[int, ...] = ()
    models: list[Path | None] = field(default_factory=list)  # per executor: the ONNX file it runs

    def host_track(self, stream: int) -> Track:
        """The partition/merge track of one stream of a data-parallel stage."""
        track = self.host_tracks[stream]
        if track is None:
            raise HaseError(f"stage {self.spec.name!r} is not data-parallel: it has no partition/merge track")
        return track


@dataclass
class PreparedPipeline:
    """Open executors of a validated pipeline; close it (or use `with`) to release sessions and threads."""

    spec: PipelineSpec
    stages: list[StageRuntime] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    trace: bool = True
    streamed: bool = False  # a prepared pipeline streams once: its ORT profiles are read at the end

    @property
    def tracks(self) -> list[Track]:
        """Every host and device track of every stage, by track id."""
        out: list[Track] = []
        for st in self.stages:
            out.extend(t for t in st.host_tracks if t is not None)
            for stream in st.device_tracks:
                out.extend(stream)
        return sorted(out, key=lambda t: t.track_id)

    def close(self) -> None:
        """Close every executor (sessions, infer requests, worker threads)."""
        for st in self.stages:
            for stream in st.executors:
                for ex in stream:
                    ex.close()

    def __enter__(self) -> PreparedPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prepare(spec: PipelineSpec, workdir: str | Path, *, trace: bool = True, hardware: bool = True,
            warmup: int = 2) -> PreparedPipeline:
    """Check devices, open and validate every stage in order, warm every executor up; HaseError if anything is off.

    `trace` records trace events; `hardware` (only with `trace`) turns on backend profiling for hardware time.
    """
    workdir = Path(workdir)
    (workdir / "profiles").mkdir(parents=True, exist_ok=True)
    core = devices.OpenVinoCore()
    devs = _check_devices(spec, core)
    prep = PreparedPipeline(spec, trace=trace)
    base = ExecutorOptions(hardware=trace and hardware, hw_profile_events=spec.hw_profile_events,
                           hw_sample_every=spec.hw_sample_every, hw_sample_warmup=spec.hw_sample_warmup)
    try:
        prep.metadata = _metadata(spec, devs, core, base.hardware)
        x: np.ndarray | None = None
        for i, st in enumerate(spec.stages):
            shape = tuple(x.shape) if x is not None else _pipeline_input_shape(spec)
            rt = StageRuntime(st, i, [], [], [], in_shape=shape)
            prep.stages.append(rt)  # before opening, so a failure half-way still closes what was opened
            _open_stage(rt, devs, core, workdir, base, len(prep.tracks))
            if x is None:
                prep.inputs = _make_inputs(spec, shape, rt)
                x = prep.inputs[0]
            x = _warm_up(rt, x, warmup, spec.stages[i - 1].name if i else None)
            rt.out_shape = tuple(x.shape)
    except BaseException:
        prep.close()
        raise
    return prep


@contextlib.contextmanager
def prepared(spec: PipelineSpec, workdir: str | Path | None = None, *, trace: bool = True, hardware: bool = True,
             warmup: int = 2) -> Iterator[PreparedPipeline]:
    """`prepare` in `workdir`, or in a temporary directory removed on exit; the executors are closed on exit."""
    with (tempfile.TemporaryDirectory(prefix="hase-pipeline-") as tmp,
          prepare(spec, Path(workdir or tmp), trace=trace, hardware=hardware, warmup=warmup) as prep):
        yield prep


def _check_devices(spec: PipelineSpec, core: devices.OpenVinoCore) -> dict[str, devices.Device]:
    """Every device string parsed and present, checked once, errors naming the first stage that uses it."""
    devs: dict[str, devices.Device] = {}
    for st in spec.stages:
        for ex in st.executors:
            if ex.device not in devs:
                try:
                    devs[ex.device] = devices.check_devices([ex.device], core)[0]
                except HaseError as exc:
                    raise HaseError(f"stage {st.name!r}: {exc}") from exc
    return devs


def _metadata(spec: PipelineSpec, devs: dict[str, devices.Device], core: devices.OpenVinoCore,
              hardware: bool) -> dict[str, Any]:
    threads = {ex.device: ex.threads for st in spec.stages for ex in st.executors}
    return {"pipeline": spec.name, "batch": spec.batch, "queue_depth": spec.queue_depth,
            "hw_profile": hardware, "hw_sample_every": spec.hw_sample_every, "hw_sample_block": spec.hw_sample_block,
            "hw_sample_warmup": spec.hw_sample_warmup,
            "devices": {name: devices.device_metadata(dev, core, threads[name]) for name, dev in devs.items()}}


def _pipeline_input_shape(spec: PipelineSpec) -> tuple[int, ...]:
    """`input_shape`, else [batch, features] for a dummy/function first executor, else the model's with batch."""
    if spec.input_shape is not None:
        return spec.input_shape
    first = spec.stages[0].executors[0]
    if first.model is None:
        return (spec.batch, spec.features)
    try:
        declared = declared_input_shape(first.model)
    except HaseError as exc:
        raise HaseError(f"stage {spec.stages[0].name!r}: {exc}") from exc
    dims = [d for d in declared[1:] if d is not None]
    if len(dims) < len(declared) - 1:
        raise HaseError(f"the first stage's model {first.model.name} has input shape {_fmt(declared)} with "
                        f"symbolic dimensions: set `input_shape` in [pipeline]")
    return (spec.batch, *dims)


def declared_input_shape(model: Path) -> tuple[int | None, ...]:
    """The model's single graph input shape (None for symbolic dims), read without building a session."""
    try:
        m = onnx.load(str(model), load_external_data=False)
    except Exception as exc:  # DecodeError, OSError, ...: all mean "not a loadable model"
        raise HaseError(f"cannot load {model}: {type(exc).__name__}; check the path and that it is an ONNX file"
                        ) from exc
    if not m.graph.node:
        raise HaseError(f"{model.name} has an empty graph: is it an ONNX model? check the path")
    inits = {i.name for i in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise HaseError(f"{model.name} has {len(inputs)} inputs; a pipeline stage model takes exactly one")
    dims = inputs[0].type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)


def _open_stage(rt: StageRuntime, devs: dict[str, devices.Device], core: devices.OpenVinoCore, workdir: Path,
                base: ExecutorOptions, first_track: int) -> None:
    """Write dummy models and open every executor of every stream of the stage, with their tracks."""
    st, index, shape = rt.spec, rt.index, rt.in_shape
    shapes = [shape]
    if st.data_parallel:
        part = st.require_partition()
        rt.axis = normalize_axis(part.axis, len(shape), st.name)
        rt.sizes = split_sizes(shape[rt.axis], part.ratios, stage=st.name, axis=rt.axis)
        shapes = [_with_dim(shape, rt.axis, n) for n in rt.sizes]
    pairs = enumerate(zip(st.executors, shapes, strict=True))
    models = [_model_path(ex, st, j, shp, workdir) for j, (ex, shp) in pairs]
    rt.models = models
    track_id = first_track
    for s in range(st.streams):
        host = None
        if st.data_parallel:
            host = Track(track_id, _track_name(st, s, None), "host", "host", st.name, index, s, -1)
            track_id += 1
        rt.host_tracks.append(host)
        rt.executors.append([])
        rt.device_tracks.append([])
        for j, ex in enumerate(st.executors):
            opts = replace(base, threaded=st.data_parallel,
                           profile_prefix=str(workdir / "profiles" / f"{index}_{st.name}_s{s}_e{j}"))
            executor = _open(ex, st, j, devs, models[j], opts, core)
            rt.executors[s].append(executor)
            rt.device_tracks[s].append(Track(track_id, _track_name(st, s, j), "device", ex.device, st.name,
                                             index, s, j))
            track_id += 1


def _open(ex: ExecutorSpec, st: StageSpec, j: int, devs: dict[str, devices.Device], model: Path | None,
          opts: ExecutorOptions, core: devices.OpenVinoCore) -> Executor:
    try:
        if model is not None:
            declared_input_shape(model)  # the same clear message for every backend when a file is not a model
        return open_executor(devs[ex.device], model=model, fn=ex.fn, threads=ex.threads, options=opts, core=core)
    except HaseError as exc:
        raise HaseError(f"stage {st.name!r}{_exec_label(st, j)}: {exc}") from exc


def _model_path(ex: ExecutorSpec, st: StageSpec, j: int, shape: tuple[int, ...], workdir: Path) -> Path | None:
    """The executor's ONNX file: its own, or a dummy chain written for the input shape it will get."""
    if ex.dummy is None:
        return ex.model
    if len(shape) != 2:
        raise HaseError(f"stage {st.name!r}: a dummy model takes a [rows, features] input, but gets {_fmt(shape)}; "
                        f"use a model file for this stage")
    d = ex.dummy
    path = workdir / "models" / f"{st.name}_e{j}_{shape[0]}x{shape[1]}_w{d.width}_l{d.layers}.onnx"
    return write_matmul_chain(path, shape[0], shape[1], d.width, d.layers, d.seed)


def _make_inputs(spec: PipelineSpec, shape: tuple[int, ...], rt: StageRuntime) -> list[np.ndarray]:
    """A small pool of random input batches in the first executor's dtype (cycled by the source)."""
    dtype = np.dtype(rt.executors[0][0].input_dtype or np.float32)
    limits.check_tensor("the pipeline's input batch", shape, dtype)  # in the first model's own dtype
    rng = np.random.default_rng(spec.seed)
    if np.issubdtype(dtype, np.floating):
        return [fill_chunked(rng.standard_normal, shape, dtype) for _ in range(INPUT_POOL)]
    return [fill_chunked(lambda n: rng.integers(0, 10, size=n), shape, dtype) for _ in range(INPUT_POOL)]


def _warm_up(rt: StageRuntime, x: np.ndarray, runs: int, previous: str | None) -> np.ndarray:
    """Check shapes and run every executor of every stream `runs` times (each of its sessions, when it samples
    hardware time); returns stream 0's output."""
    st = rt.spec
    parts = partition(x, rt.sizes, rt.axis) if st.data_parallel else [x]
    for j, ex in enumerate(rt.executors[0]):
        _check_input(ex, parts[j], rt, j, previous)
    out = x
    for s, stream in enumerate(rt.executors):
        for _ in range(max(1, runs)):
            outs = [_run_once(ex, parts[j], st, j) for j, ex in enumerate(stream)]
            if s == 0:
                out = merge(outs, rt.axis, stage=st.name) if st.data_parallel else outs[0]
    return out


def _run_once(ex: Executor, x: np.ndarray, st: StageSpec, j: int) -> np.ndarray:
    try:
        ex.submit(x, profile=True)
        out = ex.wait().output
        if ex.hw_sampled:  # warm the plain session too
            ex.submit(x, profile=False)
            ex.wait()
        return out
    except Exception as exc:  # a backend error on a validation batch: report it before the run starts
        raise HaseError(f"stage {st.name!r}{_exec_label(st, j)} failed on a validation batch on {ex.device}: "
                        f"{first_line(exc, last=True)}") from exc


def _check_input(ex: Executor, x: np.ndarray, rt: StageRuntime, j: int, previous: str | None) -> None:
    st, declared = rt.spec, ex.input_shape
    if declared is None:
        return
    ok = len(declared) == x.ndim and all(d is None or d == n for d, n in zip(declared, x.shape, strict=True))
    if ok and (ex.input_dtype is None or ex.input_dtype == x.dtype):
        return
    what = (f"input {_fmt(declared)} {ex.input_dtype}", f"{_fmt(x.shape)} {x.dtype}")
    if st.data_parallel:
        ratios = list(st.require_partition().ratios)
        raise HaseError(f"stage {st.name!r}{_exec_label(st, j)} on {ex.device} expects {what[0]} but its partition is "
                        f"{what[1]} (ratios {ratios} of {rt.in_shape[rt.axis]} rows on axis "
                        f"{rt.axis}); change the ratios or give the model a matching or dynamic axis")
    source = f"stage {previous!r} produces" if previous else "the pipeline input is"
    raise HaseError(f"stage {st.name!r}{_exec_label(st, j)} on {ex.device} expects {what[0]} but {source} {what[1]}; "
                    f"make the stages' shapes agree")


def _track_name(st: StageSpec, stream: int, executor: int | None) -> str:
    parts = [st.name]
    if executor is None:
        parts.append("partition/merge")
    else:
        ex = st.executors[executor]
        parts.append(f"{ex.device} e{executor}" if st.data_parallel else ex.device)
    if st.streams > 1:
        parts.append(f"s{stream}")
    return " · ".join(parts)


def _exec_label(st: StageSpec, j: int) -> str:
    return f" executor {j} ({st.executors[j].label})" if st.data_parallel else f" ({st.executors[j].label})"


def _with_dim(shape: tuple[int, ...], axis: int, n: int) -> tuple[int, ...]:
    return tuple(n if i == axis else d for i, d in enumerate(shape))


def _fmt(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"

