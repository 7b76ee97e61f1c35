"""A CUPTI failure is not fatal: errors in the buffer-completed callback are counted, and a recording with no GPU
work or with callback errors falls back to ORT's kernel_time spans with one warning line.

The records are CONSTRUCTED (cupti_cases.py, in the layout of the H200 captures of captured.py); the callback and
the recorder's exit are driven here with stand-ins for cupti-python, which this CPU machine lacks.
"""
from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from cupti_cases import CLOCK, api, cuda_profile, kernel

from hase.profiling import run as run_mod
from hase.profiling.gpu import attribute, cupti, records
from hase.runtime.profile import parse_events
from hase.runtime.types import EPConfig

MODEL = Path(__file__).parents[2] / "data" / "models" / "hf_bert_tiny_s64_b2.onnx"
FALLBACK = "falls back to ORT's kernel_time spans"


def _recording(recs: list[Any], errors: int = 0, first: str = "") -> records.GpuRecording:
    return records.GpuRecording(records.records_frame(recs), CLOCK, errors, first)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_good_recording_is_attributed() -> None:
    events, recs = cuda_profile()
    assert attribute.recording_problem(_recording(recs)) == ""
    got = attribute.attribute_or_fallback(parse_events(events), _recording(recs))
    assert got is not None and set(got.nodes["node_name"]) == {"conv", "gemm"}
    assert attribute.attribute_or_fallback(parse_events(events), None) is None


@pytest.mark.parametrize(("recs", "errors", "why"), [
    ([], 0, r"CUPTI recorded no GPU work \(0 records"),
    ([api(1, 10.0, 12.0)], 0, r"CUPTI recorded no GPU work \(1 records, none a kernel"),
    ("all", 2, r"2 CUPTI buffer\(s\) could not be read \(first: KeyError: 'x'\)"),
])
def test_no_gpu_work_or_callback_errors_fall_back_with_one_warning_line(
        caplog: pytest.LogCaptureFixture, recs: Any, errors: int, why: str) -> None:
    events, good = cuda_profile()
    rec = _recording(good if recs == "all" else recs, errors, "KeyError: 'x'" if errors else "")
    with caplog.at_level(logging.WARNING):
        assert attribute.attribute_or_fallback(parse_events(events), rec) is None
    [line] = _warnings(caplog)
    assert "\n" not in line and FALLBACK in line
    assert re.search(why, line)


def test_an_exception_in_the_buffer_callback_is_counted_not_raised() -> None:
    rec = cupti.CuptiRecorder()
    cupti.CuptiRecorder._active = rec
    try:
        cupti._buffer_completed([kernel(7, 100.0, 250.0, "gemm")])
        cupti._buffer_completed([SimpleNamespace(kind=10)])  # a record without start/end: AttributeError
        cupti._buffer_completed([SimpleNamespace(kind=10)])
    finally:
        cupti.CuptiRecorder._active = None
    got = rec.recording(CLOCK)
    assert len(got.records) == 1 and got.callback_errors == 2 and got.first_error.startswith("AttributeError")
    assert "could not be read" in attribute.recording_problem(got)


def test_a_failed_flush_is_counted_and_the_recorder_still_closes() -> None:
    class FakeCupti:
        def __init__(self) -> None:
            self.disabled: list[Any] = []

        def activity_flush_all(self, flag: int) -> None:
            raise RuntimeError("CUPTI_ERROR_UNKNOWN")

        def activity_disable(self, kind: Any) -> None:
            self.disabled.append(kind)

    rec, fake = cupti.CuptiRecorder(), FakeCupti()
    rec._cupti, rec._kinds = fake, ["KERNEL"]
    cupti.CuptiRecorder._active = rec
    rec.__exit__(None, None, None)
    assert cupti.CuptiRecorder._active is None and fake.disabled == ["KERNEL"]
    assert rec.callback_errors == 1 and "CUPTI_ERROR_UNKNOWN" in rec.first_error


class EmptyRecorder:
    """A recorder that recorded nothing: what a CUPTI whose buffers never arrive leaves."""

    def clock(self, profile_start_ns: int) -> records.ClockSync:
        return CLOCK

    def recording(self, clock: records.ClockSync) -> records.GpuRecording:
        return records.GpuRecording(pd.DataFrame(columns=list(records.RECORD_COLUMNS)), clock)


def test_profile_model_drops_a_failed_recording_and_keeps_the_kernel_time_spans(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    @contextlib.contextmanager
    def recorder(ep: EPConfig, use: bool | None) -> Iterator[tuple[Any, str]]:
        yield EmptyRecorder(), ""

    monkeypatch.setattr(run_mod, "_recorder", recorder)
    with caplog.at_level(logging.WARNING):
        res = run_mod.profile_model(MODEL, EPConfig(name="cpu"), runs=2, warmup=1, workdir=tmp_path)
    assert res.gpu is None and res.cupti_note.startswith("CUPTI recorded no GPU work")
    assert [w for w in _warnings(caplog) if FALLBACK in w] and len(_warnings(caplog)) == 1
    analysis = run_mod.analyze(res.events, res.skip_runs, gpu=res.gpu)
    assert analysis.gpu is None and not analysis.top.empty


def test_profile_model_says_why_cupti_is_off() -> None:
    note = run_mod._recorder
    with note(EPConfig(name="cpu"), None) as (rec, why):
        assert rec is None and why == "not a CUDA run (cpu)"
    with note(EPConfig(name="cuda0", ep="cuda"), False) as (rec, why):
        assert rec is None and why == "CUPTI off (--cupti off)"


def test_without_cupti_python_the_note_gives_the_import_error() -> None:
    if cupti.cupti_available():
        pytest.skip("cupti-python is installed here")
    with run_mod._recorder(EPConfig(name="cuda0", ep="cuda"), None) as (rec, why):
        assert rec is None and why.startswith("cupti-python is not installed or cannot be imported (No module")
