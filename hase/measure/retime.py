"""Later timing passes of the full models users run: each is timed again at the end of the collect, minutes after
its first pass, and keeps the minimum.

On a shared host the same model reads up to ±20 % apart between minutes (a median 2-7 % higher in the first pass
than in a second one an hour later on the 2-core VM of docs/results.md), while the truth `hase evaluate` and the
dev sets score against is the minimum over passes minutes apart. One pass per calibration model fits the
calibration to a busier host than the truth; the pass columns of `model_measurements` (schema 7) keep the first
pass's latency (the one its spans and decomposition were taken with) beside the minimum, and `min_ms` becomes the
quickest run of all passes (what training calibrates on by default, `hase.predict.dataset`). Only models measured
on this host are timed again, oldest first; the sampled one-kernel blocks never (their latency is no calibration
point). A pass interrupted leaves every model it finished updated; the next collect goes on with the rest.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from hase.files import file_sha256
from hase.kernels.graph import load_model
from hase.measure.model import time_model
from hase.runtime.host import host_fingerprint
from hase.zoo.blocks import is_sampled

if TYPE_CHECKING:  # pragma: no cover - collect imports this module
    from hase.measure.collect import DeviceRun

log = logging.getLogger(__name__)

RESERVE_SHARE = 0.1  # of a collect's budget, kept for the later passes (the jobs stop handing out before it)


def due_models(run: DeviceRun, host_fp: str) -> pd.DataFrame:
    """The models of this device and host with fewer passes than the settings ask, oldest first: model_id, source,
    sha256. Sampled blocks and rows without a robust latency are left out."""
    con = run.store.conn
    rows = pd.read_sql(
        "SELECT x.model_id, m.family, m.source, m.sha256 FROM model_measurements x JOIN models m "
        "ON m.model_id = x.model_id AND m.opt_level = ? WHERE x.device = ? AND x.host_fp = ? AND x.latency_ms > 0 "
        "AND COALESCE(x.n_passes, 1) < ? ORDER BY x.measured_at",
        con, params=(run.ep.opt_level, run.ep.name, host_fp, run.settings.model_passes))
    keep = ~rows["family"].map(is_sampled).astype(bool)
    return rows.loc[keep, ["model_id", "source", "sha256"]].reset_index(drop=True)


def retime_models(run: DeviceRun, deadline: float | None = None) -> int:
    """Time the due models once more (`hase.measure.model.time_model`, the run's settings) and record each pass
    (`Store.record_pass`); returns how many. Stops at `deadline` (time.perf_counter()); a model whose file is gone
    or changed since it was measured is left as it is."""
    due = due_models(run, host_fingerprint().digest)
    done = 0
    for model_id, source, sha in due.itertuples(index=False):
        if deadline is not None and time.perf_counter() > deadline:
            break
        path = Path(source)
        try:
            if not path.is_file() or file_sha256(path) != sha:
                log.debug("%s: %s is gone or changed since it was measured; not timed again", model_id, path)
                continue
            timing, _ = time_model(load_model(path), run.ep, run.settings)
        except Exception as exc:
            log.warning("%s: a later timing pass failed (%s); its first pass stays", model_id, exc)
            continue
        done += run.store.record_pass(model_id, run.ep.name, timing.latency_ms, timing.min_ms)
    if done or len(due):
        log.info("%s: %d of %d model(s) timed once more (the minimum over passes kept)", run.ep.name, done, len(due))
    run.report.retimed += done
    return done
