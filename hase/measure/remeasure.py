"""The end of a device config's collect run: its speed signature, and a second try at the jobs flagged busy.

A job measured while the canary found the host busy keeps its figures and its `host_busy` flag. At the end of
the run, once the canary reads quiet again, `remeasure_flagged` measures those jobs once more and replaces
their rows (clean now), checking the canary before each and stopping as soon as it reads busy, or when
`REMEASURE_SHARE` of the run's time is spent; what it could not redo stays flagged. `record_signature` measures
the device's speed signature on this host once per store (`hase.measure.signature`).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from hase.measure.canary import Canary
from hase.measure.jobs import CANARY_TABLES, HostWatch, KernelJob, ModelJob, job_label, measure_job, timed_check
from hase.measure.progress import SignatureStarted
from hase.measure.signature import DEFAULT_BUDGET_S, measure_signature
from hase.measure.types import MeasureSettings
from hase.runtime.host import host_fingerprint

if TYPE_CHECKING:  # pragma: no cover - collect imports this module
    from hase.measure.collect import DeviceRun

log = logging.getLogger(__name__)

REMEASURE_SHARE = 0.25  # the most a second try may add to a device config's run, as a share of its time so far
MAX_FLAGGED = 500  # flagged jobs kept for a second try (their models stay in memory until the end of the run)


def signature_budget_s(settings: MeasureSettings) -> float:
    """The signature's time: DEFAULT_BUDGET_S under the default kernel stop rule (1 s at most per kernel), less
    under a quicker one (a test's collect)."""
    return DEFAULT_BUDGET_S * min(1.0, settings.kernel.max_time_s)


def record_signature(run: DeviceRun) -> None:
    """Measure and keep the device's speed signature on this host, unless the store has it already."""
    fp = host_fingerprint()
    run.store.register_host(fp)
    if run.store.signature(run.ep.name, fp.digest) is not None:
        return
    run.notify(SignatureStarted(run.ep.name))
    sig = measure_signature(run.ep, signature_budget_s(run.settings), fp.digest)
    run.store.record_signature(run.ep.name, fp.digest, sig.to_dict())


def keep_flagged(run: DeviceRun, job: KernelJob | ModelJob) -> None:
    """Remember a job measured on a busy host for a second try at the end of the run (at most MAX_FLAGGED)."""
    if len(run.flagged) < MAX_FLAGGED:
        run.flagged.append(job)


def remeasure_flagged(run: DeviceRun, canary: Canary | None, watch: HostWatch, started: float) -> int:
    """Measure the run's flagged jobs again while the canary reads quiet and replace their rows; returns how many
    were replaced. Without a canary, nothing is flagged and nothing is done."""
    if canary is None or not run.flagged:
        return 0
    deadline = time.perf_counter() + REMEASURE_SHARE * (time.perf_counter() - started)
    done = 0
    for job in list(run.flagged):
        if time.perf_counter() > deadline:
            break
        check, spent, waited = timed_check(canary)
        run.note_check(check, spent, waited, watch)
        if check.busy:
            break
        result = measure_job(job, run.ep, run.settings)
        if result.error is not None:
            continue
        quiet = watch.columns()
        rows = {t: [{**r, **quiet} for r in rs] if t in CANARY_TABLES else rs for t, rs in result.rows.items()}
        run.store.replace_rows(rows)
        run.flagged.remove(job)
        target, stage = job_label(job)
        label = f"{stage} {target}"
        run.report.remeasured.append(label)
        run.report.busy_jobs = [b for b in run.report.busy_jobs if b[0] != label]
        done += 1
    left = len(run.flagged)
    if done or left:
        log.info("%s: %d job(s) flagged busy measured again on a quiet host; %d stay flagged", run.ep.name, done, left)
    return done
