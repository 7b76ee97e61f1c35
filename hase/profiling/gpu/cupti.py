"""Record CUPTI activity (GPU kernels, memcpy/memset, CUDA runtime/driver API calls) around profiled runs.

Needs NVIDIA's `cupti-python` (`pip install hase[gpu]`, matching the CUDA major version of onnxruntime-gpu).
CUPTI's activity API is process-wide: one recorder at a time; records arrive in buffers CUPTI hands back on a
flush, and are converted right there (the activity objects point into the buffer). The thread-id type is set
to SYSTEM so API records carry the OS thread id, which is the `tid` of ORT's profile events.
"""
from __future__ import annotations

import functools
import logging
import time
from types import TracebackType
from typing import Any

import pandas as pd

from hase.errors import HaseError, first_line
from hase.profiling.gpu import records

log = logging.getLogger(__name__)

BUFFER_BYTES = 8 * 1024 * 1024
#: cupti.ActivityKind names enabled while recording
ACTIVITY_KIND_NAMES = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "DRIVER")


def cupti_module() -> Any:
    """`cupti.cupti` of cupti-python, or a one-line HaseError naming the install."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise HaseError(f"cupti-python is not installed or cannot be imported ({first_line(exc)}; it needs "
                        f"cuda.bindings), so GPU time per node cannot be recorded: `pip install hase[gpu]` "
                        f"(onnxruntime-gpu with CUDA/cuDNN, and cupti-python)") from exc
    return cupti


def cupti_available() -> bool:
    """Whether cupti-python can be imported here (it still needs a GPU to record anything)."""
    try:
        cupti_module()
    except HaseError:
        return False
    return True


class CuptiRecorder:
    """Context manager: CUPTI activity on while inside; `records()` afterwards is the records DataFrame.

        with CuptiRecorder() as rec:
            clock = rec.clock(session.get_profiling_start_time_ns())
            ...runs...
        df = rec.records()
    """

    _active: CuptiRecorder | None = None  # CUPTI's callbacks are process-wide: the recorder they feed
    _registered = False  # the buffer callbacks are registered once per process

    def __init__(self) -> None:
        self._frames: list[pd.DataFrame] = []
        self._kinds: list[Any] = []
        self._cupti: Any = None
        self.callback_errors = 0  # buffers CUPTI handed back that could not be read (or a flush that failed)
        self.first_error = ""

    def __enter__(self) -> CuptiRecorder:
        if CuptiRecorder._active is not None:
            raise HaseError("a CUPTI recorder is already running in this process: record one profile at a time")
        c = cupti_module()
        self._cupti = c
        try:
            c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)
            if not CuptiRecorder._registered:
                c.activity_register_callbacks(_buffer_requested, _buffer_completed)
                CuptiRecorder._registered = True
            for name in ACTIVITY_KIND_NAMES:
                kind = getattr(c.ActivityKind, name)
                c.activity_enable(kind)
                self._kinds.append(kind)
        except Exception as exc:  # cupti raises cuptiError; any failure means no recording
            self._disable()
            raise HaseError(f"CUPTI cannot record activity here ({first_line(exc)}): check that the CUPTI "
                            f"library matches the CUDA driver (cupti-python 13 for CUDA 13)") from exc
        CuptiRecorder._active = self
        return self

    def clock(self, profile_start_ns: int) -> records.ClockSync:
        """The clock pair for this recording, read now (`profile_start_ns`: the session's
        `get_profiling_start_time_ns()`). The CUPTI read is bracketed by two wall-clock reads and paired with
        their midpoint, so the pair is off by at most half the gap between them (one read after it, as before,
        put CUPTI times late by up to the whole gap)."""
        before = time.time_ns()
        cupti_ns = int(self._cupti.get_timestamp())
        after = time.time_ns()
        return records.ClockSync(cupti_ns=cupti_ns, wall_ns=(before + after) // 2,
                                 profile_start_ns=int(profile_start_ns))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._cupti.activity_flush_all(1)  # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, incomplete buffers too
        except Exception as flush_exc:  # a failed flush loses records, not the profile: counted, like a callback error
            self.error(f"activity_flush_all: {first_line(flush_exc)}")
        finally:
            try:
                self._disable()
            except Exception as disable_exc:  # CUPTI left on is harmless to the runs already profiled
                log.debug("CUPTI activity_disable failed: %s", first_line(disable_exc))
                self._kinds = []
            CuptiRecorder._active = None

    def _disable(self) -> None:
        for kind in self._kinds:
            self._cupti.activity_disable(kind)
        self._kinds = []

    def add(self, frame: pd.DataFrame) -> None:
        """A completed buffer's records (called from CUPTI's buffer-completed callback)."""
        self._frames.append(frame)

    def error(self, message: str) -> None:
        """Count a buffer that could not be read (called from CUPTI's native thread, where raising loses it)."""
        self.callback_errors += 1
        if not self.first_error:
            self.first_error = message

    def recording(self, clock: records.ClockSync) -> records.GpuRecording:
        """The records, the clock pair and the callback errors, as one `GpuRecording`."""
        return records.GpuRecording(self.records(), clock, self.callback_errors, self.first_error)

    def records(self) -> pd.DataFrame:
        """Every record received, in the records DataFrame layout (`hase.profiling.gpu.records`)."""
        if not self._frames:
            return pd.DataFrame(columns=list(records.RECORD_COLUMNS))
        return pd.concat(self._frames, ignore_index=True)


def _buffer_requested() -> tuple[int, int]:
    return BUFFER_BYTES, 0  # 0: as many records as fit


def _buffer_completed(activities: list[Any]) -> None:
    """CUPTI's buffer-completed callback, run in a native thread: an exception here would be printed and lost, so
    every one is counted on the active recorder (`callback_errors`) and never raised."""
    rec = CuptiRecorder._active
    if rec is None:
        log.debug("CUPTI delivered a buffer with no recorder active; dropped")
        return
    try:
        rec.add(records.records_frame(activities, _api_name))
    except Exception as exc:  # never raise into CUPTI's thread
        rec.error(f"{type(exc).__name__}: {first_line(exc)}")


@functools.cache
def _api_name(kind: str, cbid: int) -> str:
    """`cudaLaunchKernel`, `cuLaunchKernelEx`, ... from CUPTI's callback id."""
    c = cupti_module()
    domain = c.CallbackDomain.RUNTIME_API if kind == records.RUNTIME else c.CallbackDomain.DRIVER_API
    try:
        return str(c.get_callback_name(domain, cbid))
    except Exception:  # an id this CUPTI cannot name: keep the number
        return f"cbid {cbid}"
