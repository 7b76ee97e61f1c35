"""Property-based tests (hypothesis) of the ORT-profile reader: any file or event list either parses into the
documented events frame and decomposition, or raises one-line HaseError; nothing else escapes."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hase.errors import HaseError
from hase.profiling import decompose
from hase.runtime import profile as events

DATA = Path(__file__).parents[1] / "data" / "profiles"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4),
                     max_leaves=12)
_names = st.sampled_from(["model_run", "SequentialExecutor::Execute", "session_initialization", "conv_kernel_time",
                          "conv_fence_before", "conv_fence_after", "_kernel_time", "x"]) | st.text(max_size=12)
_event = st.fixed_dictionaries(
    {"cat": st.sampled_from(["Session", "Node", "Kernel", "hase", ""]) | st.text(max_size=6), "name": _names},
    optional={"ts": st.integers(-10, 10**6) | st.floats(allow_nan=True) | st.text(max_size=4),
              "dur": st.integers(-10, 10**5) | st.floats(allow_nan=True) | st.none(),
              "ph": st.sampled_from(["X", "M", "B"]), "pid": _json, "tid": _json,
              "args": st.fixed_dictionaries({}, optional={"op_name": _json, "provider": _json,
                                                          "node_index": _json}) | _json})


def _analyse(path: Path) -> None:
    """Load and decompose `path`; HaseError is an accepted outcome, and its message is one line."""
    try:
        df = events.load_profile(path)
        if len(df):
            decompose.summarize(decompose.decompose(df))
            decompose.op_type_totals(df)
    except HaseError as exc:
        assert "\n" not in str(exc)


def _write(tmp: Path, text: str | bytes) -> Path:
    p = tmp / f"p{next(_counter)}.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("profiles")


@SETTINGS
@given(st.lists(_event, max_size=12))
def test_event_lists_parse_or_raise_hase_error(tmp: Path, evs: list[dict[str, Any]]) -> None:
    _analyse(_write(tmp, json.dumps(evs)))


@SETTINGS
@given(_json)
def test_any_json_document_parses_or_raises_hase_error(tmp: Path, doc: Any) -> None:
    _analyse(_write(tmp, json.dumps(doc)))


@SETTINGS
@given(st.binary(max_size=2048))
def test_random_bytes_raise_hase_error(tmp: Path, data: bytes) -> None:
    _analyse(_write(tmp, data))


@SETTINGS
@given(st.data())
def test_real_profile_cut_anywhere_streams_and_parses_or_raises(tmp: Path, data: st.DataObject) -> None:
    real = sorted(DATA.glob("*.json"))
    raw = data.draw(st.sampled_from(real)).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    p = _write(tmp, raw[:cut])
    _analyse(p)
    try:
        n = sum(1 for _ in events.stream_trace(p))
    except UnicodeDecodeError:
        return  # a cut inside a multi-byte character: the CLI maps it to one line (tests/commands)
    assert n <= raw.count(b"\n") + 1
