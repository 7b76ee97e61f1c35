"""Run a model under ONNX Runtime's profiler and analyze the profile: the library side of `hase profile`.

`profile_model` gives the events DataFrame (per-node in-model spans, per-run decomposition) and the
session.run wall clock; `analyze` turns events into the tables and findings the CLI shows.
"""
from __future__ import annotations

import contextlib
import glob
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
import pandas as pd

from hase.errors import HaseError, first_line
from hase.files import check_output_dir, outermost_missing
from hase.kernels.graph import load_model
from hase.kernels.inputs import make_model_feeds
from hase.profiling import decompose
from hase.profiling.findings import diagnose, gpu_findings, noise_finding, warmup_finding
from hase.profiling.gpu.attribute import GpuAttribution, attribute_or_fallback, recording_problem
from hase.profiling.gpu.cupti import CuptiRecorder, cupti_available, cupti_module
from hase.profiling.gpu.records import GpuRecording
from hase.runtime import sessions
from hase.runtime.profile import load_profile
from hase.runtime.types import EPConfig, Timing, TimingPolicy
from hase.tables import require_columns

log = logging.getLogger(__name__)

OP_TOTALS_TOLERANCE = 0.02  # relative gap between the per-op rows and kernel_time sum that the note explains


@dataclass(frozen=True)
class ProfileResult:
    """A profiled model: ORT's events (warm-up runs included, run_id < warmup) and the wall clock of
    the profiled runs (time.perf_counter around session.run, profiler overhead included); on CUDA with
    cupti-python, the CUPTI records of all runs (`gpu`); `cupti_note` says why there are none on CUDA ('' when
    there are: CUPTI off, not installed, unable to record, or a recording that failed and was dropped)."""

    events: pd.DataFrame
    profile_path: Path
    wall: Timing
    warmup: int
    runs: int
    metadata: dict[str, Any] = field(default_factory=dict)
    gpu: GpuRecording | None = None
    cupti_note: str = ""

    @property
    def skip_runs(self) -> int:
        """Runs to skip in `hase.profiling.decompose` functions so only the profiled (post-warm-up) runs count."""
        return self.warmup


def profile_model(
    path: str | os.PathLike[str],
    ep: EPConfig,
    runs: int = 10,
    warmup: int = 3,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    cupti: bool | None = None,
    optimized_model_path: str | os.PathLike[str] | None = None,
    min_runs: int | None = None,
    rel_ci: float = 0.0,
) -> ProfileResult:
    """Run `warmup` + `runs` inferences with ORT's profiler on and load the profile it writes.

    With `min_runs` (< `runs`) and `rel_ci` > 0, the profiled runs stop early, after at least `min_runs`, once
    the median of their wall times has a 95 % interval within ± `rel_ci` (`hase.runtime.sessions.median_ci`):
    a quiet model is not profiled ten times for nothing. `result.runs` is the number made.

    ORT profiles every run of a session, so warm-up runs are in the events too; pass
    `result.skip_runs` to the `hase.profiling.decompose` functions. The profile JSON is written to `workdir`
    (a new temporary directory when None) as `<model stem>_<date>.json`; when profiling fails, no profile
    file and no folder made for it are left behind. On CUDA the runs use IOBinding with device-resident
    inputs and outputs, as timed runs do (`hase.runtime.sessions.BoundRunner`), and CUPTI records the GPU's
    work when `cupti` is True (a HaseError without cupti-python) or None and cupti-python is installed; a
    recording that failed (no GPU work, errors in CUPTI's callback) is dropped with a one-line warning, so the
    nodes keep ORT's kernel_time spans (`cupti_note` says why).
    `optimized_model_path`: save the graph the session runs there (the node names of the profile).
    """

    least = runs if min_runs is None else min_runs
    if runs < 1 or warmup < 0 or not 1 <= least <= runs or rel_ci < 0:
        raise HaseError(f"need runs >= 1, warmup >= 0, 1 <= min_runs <= runs and rel_ci >= 0 (got runs={runs}, "
                        f"warmup={warmup}, min_runs={min_runs}, rel_ci={rel_ci})")
    tight = TimingPolicy(warmup=0, min_runs=least, max_runs=runs, min_time_s=math.inf, max_time_s=math.inf,
                         rel_ci=rel_ci)
    model = load_model(path, dict(input_shapes or {}))
    feeds = make_model_feeds(model, seed=seed)
    data = _serialized(model, path)
    del model
    stem = Path(path).stem
    with profile_folder(workdir, stem) as folder:
        # ORT's own log silenced (4: fatal only): a model it rejects is reported once, as a HaseError
        session = sessions.make_session(data, ep, profile_prefix=str(folder / stem), log_severity=4,
                                       optimized_model_path=None if optimized_model_path is None
                                       else os.fspath(optimized_model_path))
        run = _runner(session, feeds, ep)
        try:
            with _recorder(ep, cupti) as (rec, note):
                clock = rec.clock(session.get_profiling_start_time_ns()) if rec is not None else None
                for _ in range(warmup):
                    run()
                samples = sessions.time_samples([run], tight)
        finally:
            profile_path = Path(session.end_profiling())
        log.debug("ORT profile: %s", profile_path)
        events = _load_written_profile(profile_path)
    gpu = rec.recording(clock) if rec is not None and clock is not None else None
    problem = recording_problem(gpu) if gpu is not None else ""
    if problem:
        log.warning("%s: GPU time per node falls back to ORT's kernel_time spans (CPU launch time)", problem)
        gpu, note = None, problem
    return ProfileResult(events=events, profile_path=profile_path, wall=Timing.from_samples(samples), warmup=warmup,
                         runs=len(samples), metadata=sessions.device_metadata(ep), gpu=gpu, cupti_note=note)


def _runner(session: Any, feeds: Mapping[str, Any], ep: EPConfig) -> Callable[[], None]:
    """One profiled inference: session.run with host feeds on the CPU EP; on CUDA the IOBinding of timed runs."""
    if ep.ep == "cpu":
        return lambda: _run(session, feeds)
    try:
        bound = sessions.BoundRunner(session, feeds, ep)
    except Exception as exc:  # binding copies the inputs to the device: any failure is this model's
        raise HaseError(f"cannot bind the model's inputs on {ep.provider}: {first_line(exc)}") from exc

    def run() -> None:
        try:
            bound.run()
        except Exception as exc:  # ORT raises several exception types; all mean "this run failed"
            raise HaseError(f"ONNX Runtime failed to run the model: {first_line(exc)}") from exc
    return run


@contextlib.contextmanager
def _recorder(ep: EPConfig, cupti: bool | None) -> Iterator[tuple[CuptiRecorder | None, str]]:
    """A CUPTI recorder around the runs on CUDA when asked (True) or available (None; a CUPTI that cannot
    record is then a warning, not an error), with ''; else None and why not."""
    if cupti and ep.ep != "cuda":
        raise HaseError("CUPTI records GPU activity: profile with --ep cuda")
    if ep.ep != "cuda":
        yield None, f"not a CUDA run ({ep.ep})"
        return
    if cupti is False:
        yield None, "CUPTI off (--cupti off)"
        return
    if cupti is None and not cupti_available():
        try:
            cupti_module()
            why = "cupti-python cannot be imported"
        except HaseError as exc:
            why = first_line(exc)
        yield None, why
        return
    with contextlib.ExitStack() as stack:
        try:
            rec: CuptiRecorder | None = stack.enter_context(CuptiRecorder())
            note = ""
        except HaseError as exc:
            if cupti:
                raise
            log.warning("%s; profiling without GPU time per node", exc)
            rec, note = None, first_line(exc)
        yield rec, note


@contextlib.contextmanager
def profile_folder(workdir: str | os.PathLike[str] | None, stem: str) -> Iterator[Path]:
    """The folder ORT writes `<stem>_<date>.json` into: `workdir` (created when missing) or a new temporary one.

    If the body raises, nothing it left is kept: ORT's partial (often 0-byte) profile files are removed, and so
    is every folder made here. On success the folder stays (with `workdir=None` the caller owns it).
    """
    if workdir is None:
        folder = Path(tempfile.mkdtemp(prefix="hase_profile_"))
        made: Path | None = folder
    else:
        folder = check_output_dir(workdir, "profile work directory")
        made = outermost_missing(folder)
        folder.mkdir(parents=True, exist_ok=True)
    pattern = f"{glob.escape(stem)}_*.json"
    before = set(folder.glob(pattern))
    try:
        yield folder
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        else:
            for p in set(folder.glob(pattern)) - before:
                p.unlink(missing_ok=True)
        raise


def _load_written_profile(path: Path) -> pd.DataFrame:
    """The profile ORT just wrote; ORT does not report a failed write, so a broken file means one."""
    if not path.is_file():
        raise HaseError(f"ONNX Runtime wrote no profile at {path}: check that its folder is writable")
    try:
        return load_profile(path)
    except HaseError as exc:
        raise HaseError(f"the profile ONNX Runtime just wrote is incomplete ({first_line(exc)}): "
                        f"check the free space in {path.parent}") from exc


def _serialized(model: onnx.ModelProto, path: str | os.PathLike[str]) -> bytes:
    """The model as bytes for InferenceSession, or a HaseError naming the 2 GB protobuf limit."""
    try:
        data: bytes = model.SerializeToString()
    except ValueError as exc:  # protobuf refuses messages over 2 GB
        raise HaseError(f"{path} is too large to profile from memory (> 2 GB): save it with external data") from exc
    return data


def _run(session: Any, feeds: Mapping[str, Any]) -> None:
    """One session.run; any ORT failure becomes a one-line HaseError."""
    try:
        session.run(None, dict(feeds))
    except Exception as exc:  # ORT raises several exception types; all mean "this run failed"
        raise HaseError(f"ONNX Runtime failed to run the model: {first_line(exc)}") from exc


@dataclass(frozen=True)
class ProfileAnalysis:
    """Everything `hase profile` reports about a profile, as data (see `hase.profiling.decompose` for the columns)."""

    per_run: pd.DataFrame  # decompose(): one row per counted run
    summary: pd.Series  # summarize(per_run): medians over runs, plus n_runs
    op_types: pd.DataFrame  # op_type_totals()
    top: pd.DataFrame  # top_nodes()
    providers: pd.DataFrame  # provider_counts()
    findings: list[str]
    skip_runs: int
    op_types_note: str  # op_totals_note(): how the per-op rows relate to kernel_time sum, and why they differ
    gpu: GpuAttribution | None = None  # CUPTI's GPU time per node and per run, where it was recorded


def analyze(events: pd.DataFrame, skip_runs: int = 0, top_n: int = 10,
            gpu: GpuRecording | None = None) -> ProfileAnalysis:
    """Decompose, break down and diagnose a profile's runs from `skip_runs` on (with `gpu`: CUPTI's records of
    the same runs, attributed to the nodes)."""
    all_runs = decompose.decompose(events)
    per_run = decompose.decompose(events, skip_runs)
    summary = decompose.summarize(per_run)
    providers = decompose.provider_counts(events, skip_runs)
    op_types = decompose.op_type_totals(events, skip_runs)
    findings = warmup_finding(all_runs, skip_runs) + noise_finding(per_run) + diagnose(summary, providers)
    gpu_time = attribute_or_fallback(events, gpu, skip_runs)
    if gpu_time is not None:
        findings += gpu_findings(gpu_time)
    return ProfileAnalysis(per_run=per_run, summary=summary, op_types=op_types,
                           top=decompose.top_nodes(events, top_n, skip_runs), providers=providers, findings=findings,
                           skip_runs=skip_runs, op_types_note=op_totals_note(op_types, per_run), gpu=gpu_time)


def op_totals_note(op_types: pd.DataFrame, per_run: pd.DataFrame) -> str:
    """Why the per-op rows (`op_type_totals`) need not add up to the decomposition's kernel_time sum.

    The rows add up per-node medians over the runs; kernel_time sum is the median over runs of each run's
    total. Medians do not add up: a node's median leaves out the runs in which that node was slowed, a run's
    total keeps whatever slowed it. On a busy machine, where slow-downs hit different nodes in different
    runs, the rows can be a fraction of kernel_time sum. The note gives both figures, and the reason when
    they differ by more than `OP_TOTALS_TOLERANCE`.
    Example: two nodes of 1 ms, each slowed to 9 ms in a different one of 3 runs -> rows 2 ms (1 + 1),
    per-run totals 10, 10, 2 ms -> kernel_time sum 10 ms, and a note saying the rows are 80% lower.
    """
    require_columns(op_types, (decompose.KERNEL_TIME_US,), "op_types",
                    "build it with hase.profiling.decompose.op_type_totals")
    require_columns(per_run, (decompose.KERNEL_TIME_SUM_US,), "per_run",
                    "build it with hase.profiling.decompose.decompose")
    rows, runs = float(op_types[decompose.KERNEL_TIME_US].sum()), per_run[decompose.KERNEL_TIME_SUM_US]
    total = float(runs.median())
    note = (f"Rows: each node's median over the {len(runs)} runs, summed: {rows / 1e3:.3f} ms. kernel_time sum "
            f"above: each run's total, median over the runs: {total / 1e3:.3f} ms (runs {float(runs.min()) / 1e3:.3f} "
            f"to {float(runs.max()) / 1e3:.3f} ms).")
    if total > 0 and abs(rows - total) > OP_TOTALS_TOLERANCE * total:
        note += (f" The rows are {abs(rows - total) / total:.0%} {'lower' if rows < total else 'higher'} because "
                 f"medians do not add up: a node's median leaves out the runs in which that node was slowed, a run's "
                 f"total keeps whatever slowed it, so slow-downs that hit different nodes in different runs "
                 f"(run-to-run variation, large on a busy machine) count in kernel_time sum only.")
    return note
