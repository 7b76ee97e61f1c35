"""Events to and from CSV, so a run can be re-analysed (`hase.pipeline.analysis`) without rerunning it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from hase.errors import HaseError
from hase.pipeline import schema
from hase.pipeline.runner import PipelineRun


def write_events_csv(run: PipelineRun, path: str | Path) -> Path:
    """One row per trace event (`schema.EVENT_COLUMNS`, ns since the run started; empty hw = not reported)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run.events.to_csv(path, index=False)
    return path


def read_events_csv(path: str | Path) -> pd.DataFrame:
    """Read an events CSV written by `write_events_csv`, with its columns checked."""
    try:
        df = pd.read_csv(path)
    except FileNotFoundError as exc:
        raise HaseError(f"events file {path} not found; write it with `hase pipeline run --csv`") from exc
    schema.require_columns(df, schema.EVENT_COLUMNS, f"events file {path}")
    return df
