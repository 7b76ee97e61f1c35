"""Pipeline definitions from TOML (see configs/pipeline_example.toml and docs/pipeline.md) and the
built-in simulation pipeline of `hase pipeline simulate`.

Unknown keys are errors that list the known ones; model paths are relative to the config file.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hase import paths
from hase.errors import HaseError
from hase.files import load_toml
from hase.pipeline.functions import import_stage_function
from hase.pipeline.spec import DummyModel, ExecutorSpec, Partition, PipelineSpec, StageSpec

PIPELINE_KEYS = {"name", "batch", "features", "input_shape", "queue_depth", "seed", "hw_profile_events",
                 "hw_sample_every", "hw_sample_block", "hw_sample_warmup", "max_events", "batches", "warmup"}
EXECUTOR_KEYS = {"device", "model", "dummy", "function", "threads"}
STAGE_KEYS = EXECUTOR_KEYS | {"name", "streams", "partition", "executors"}
DUMMY_KEYS = {"width", "layers", "seed"}
PARTITION_KEYS = {"axis", "ratios"}


@dataclass(frozen=True)
class PipelineConfig:
    """A pipeline plus how `hase pipeline run` runs it by default."""

    spec: PipelineSpec
    batches: int = 100
    warmup: int = 2


def load_pipeline_config(path: str | Path) -> PipelineConfig:
    """Read a pipeline TOML file; a missing file or bad key is a HaseError naming it."""
    data = load_toml(path, "pipeline config", f"see {paths.PIPELINE_EXAMPLE}")
    return pipeline_from_dict(data, base_dir=Path(path).parent)


def pipeline_from_dict(data: Mapping[str, Any], base_dir: str | Path = ".") -> PipelineConfig:
    """Build a PipelineConfig from parsed TOML (`[pipeline]` table + `[[stages]]` array)."""
    _check_keys(data, {"pipeline", "stages"}, "top level")
    _check_keys(data.get("pipeline", {}), PIPELINE_KEYS, "[pipeline]")
    top = dict(data.get("pipeline", {}))
    stages = data.get("stages")
    if not stages:
        raise HaseError("the config has no [[stages]]; add at least one stage")
    if not isinstance(stages, list):
        raise HaseError("`stages` must be an array of tables ([[stages]])")
    for key in PIPELINE_KEYS - {"name", "input_shape"}:
        if key in top:
            _typed(top, key, int, 0, "[pipeline]")
    batches, warmup = int(top.pop("batches", 100)), int(top.pop("warmup", 2))
    if batches < 1 or warmup < 0:
        raise HaseError(f"[pipeline] needs batches >= 1 and warmup >= 0 (got {batches}, {warmup})")
    if "name" in top:
        _typed(top, "name", str, "", "[pipeline]")
    if "input_shape" in top:
        shape = top["input_shape"]
        if not isinstance(shape, list) or not shape or not all(type(d) is int and d >= 1 for d in shape):
            raise HaseError(f"[pipeline] input_shape = {shape!r} must be a list of sizes >= 1, e.g. [16, 3, 224, 224]")
        top["input_shape"] = tuple(shape)
    spec = PipelineSpec(stages=tuple(_stage(s, Path(base_dir)) for s in stages), **top)
    return PipelineConfig(spec, batches=batches, warmup=warmup)


def _stage(d: Mapping[str, Any], base: Path) -> StageSpec:
    if not isinstance(d, Mapping):
        raise HaseError(f"every [[stages]] entry must be a table, got {type(d).__name__}")
    _check_keys(d, STAGE_KEYS, f"stage {d.get('name', '?')!r}")
    name = _typed(d, "name", str, "", "a stage")
    if "executors" in d:
        inline = sorted(EXECUTOR_KEYS & set(d))
        if inline:
            raise HaseError(f"stage {name!r} has `executors` and also {inline}: put those inside each executor")
        if not isinstance(d["executors"], list):
            raise HaseError(f"stage {name!r}: `executors` must be an array of tables")
        executors = tuple(_executor(e, base, name) for e in d["executors"])
    else:
        executors = (_executor({k: d[k] for k in EXECUTOR_KEYS if k in d}, base, name),)
    part = d.get("partition")
    partition = None
    if part is not None:
        _check_keys(part, PARTITION_KEYS, f"stage {name!r} partition")
        ratios = part.get("ratios", [])
        if not isinstance(ratios, list) or not all(type(r) in (int, float) for r in ratios):
            raise HaseError(f"stage {name!r} partition ratios = {ratios!r} must be a list of numbers")
        partition = Partition(_typed(part, "axis", int, 0, f"stage {name!r} partition"), tuple(ratios))
    return StageSpec(name, executors, streams=_typed(d, "streams", int, 1, f"stage {name!r}"), partition=partition)


def _executor(d: Mapping[str, Any], base: Path, stage: str) -> ExecutorSpec:
    _check_keys(d, EXECUTOR_KEYS, f"stage {stage!r} executor")
    own = dict(d)
    dummy = None
    if "dummy" in own:
        _check_keys(own["dummy"], DUMMY_KEYS, f"stage {stage!r} dummy")
        dummy = DummyModel(**{k: _typed(own["dummy"], k, int, 0, f"stage {stage!r} dummy") for k in own["dummy"]})
    model = None
    if "model" in own:
        path = Path(_typed(own, "model", str, "", f"stage {stage!r}"))
        model = path if path.is_absolute() else base / path
    try:
        fn = import_stage_function(own["function"]) if "function" in own else None
        device = _typed(own, "device", str, "host" if fn is not None else "cpu", "executor")
        threads = _typed(own, "threads", int, 1, "executor")
        return ExecutorSpec(device=device, model=model, dummy=dummy, fn=fn, threads=threads)
    except HaseError as exc:
        raise HaseError(f"stage {stage!r}: {exc}") from exc


T = TypeVar("T", int, str)


def _typed(d: Mapping[str, Any], key: str, kind: type[T], default: T, where: str) -> T:
    """`d[key]` (or `default`) checked to be a `kind` (an int is never a bool); a HaseError names the key."""
    value = d.get(key, default)
    if type(value) is not kind:
        raise HaseError(f"{where}: {key} = {value!r} must be {'an integer' if kind is int else 'a string'}")
    return value


def _check_keys(d: Mapping[str, Any], known: set[str], where: str) -> None:
    if not isinstance(d, Mapping):
        raise HaseError(f"{where} must be a table, got {type(d).__name__}")
    unknown = sorted(set(d) - known)
    if unknown:
        raise HaseError(f"unknown keys {unknown} in {where}: use {sorted(known)}")


def simulation_spec(*, batch: int = 8, width: int = 256, layers: int = 2,
                    dp_devices: Sequence[str] = ("cpu", "cpu"), devices: Sequence[str] = ("cpu", "cpu"),
                    queue_depth: int = 2, ratios: Sequence[float] | None = None) -> PipelineSpec:
    """The built-in three-stage pipeline of dummy models: prep -> embed (data-parallel) -> classify.

    `devices` are the first and last stages' devices, `dp_devices` the data-parallel stage's executors;
    embed runs twice the layers of the other stages, so it is usually the bottleneck.
    """
    if len(devices) != 2 or len(dp_devices) < 2:
        raise HaseError("simulation needs two devices (first, last stage) and two or more data-parallel devices")
    dummy, heavy = DummyModel(width, layers), DummyModel(width, 2 * layers, seed=1)
    return PipelineSpec(
        name="simulation", batch=batch, features=width, queue_depth=queue_depth,
        stages=(
            StageSpec("prep", (ExecutorSpec(devices[0], dummy=dummy),)),
            StageSpec("embed", tuple(ExecutorSpec(d, dummy=heavy) for d in dp_devices),
                      partition=Partition(0, tuple(ratios or ()))),
            StageSpec("classify", (ExecutorSpec(devices[1], dummy=DummyModel(width, layers, seed=2)),)),
        ),
    )
