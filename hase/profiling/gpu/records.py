"""CUPTI activity records as one long DataFrame, and the clock pair that puts them on ORT's profile clock.

The records DataFrame (`RECORD_COLUMNS`), one row per activity record, times in CUPTI's nanoseconds:

| column | meaning |
|---|---|
| `kind` | `kernel` (CONCURRENT_KERNEL), `memcpy`, `memset` (GPU work); `runtime`, `driver` (CPU-side API calls) |
| `name` | kernel name; `memcpy HtoD` etc.; the API function (`cudaLaunchKernel`, `cuLaunchKernelEx`, ...) |
| `start_ns`, `end_ns` | GPU start/end for GPU work, the call's CPU entry/exit for API records |
| `correlation_id` | the same id on a launch API record and on the GPU work it launched |
| `stream_id`, `device_id` | for GPU work; -1 on API records |
| `thread_id` | API records: the calling OS thread (CUPTI's thread-id type SYSTEM, ORT's `tid`); -1 on GPU work |

`records_frame` builds it from cupti-python's activity objects (attributes `kind`, `start`, `end`,
`correlation_id`, `stream_id`, `device_id`, `name`, `copy_kind`, `cbid`, `thread_id`), so the pure
attribution code (`hase.profiling.gpu.attribute`) never needs CUPTI itself.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

KIND, NAME, START_NS, END_NS = "kind", "name", "start_ns", "end_ns"
CORRELATION_ID, STREAM_ID, DEVICE_ID, THREAD_ID = "correlation_id", "stream_id", "device_id", "thread_id"
RECORD_COLUMNS = (KIND, NAME, START_NS, END_NS, CORRELATION_ID, STREAM_ID, DEVICE_ID, THREAD_ID)

KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER = "kernel", "memcpy", "memset", "runtime", "driver"
GPU_KINDS = (KERNEL, MEMCPY, MEMSET)
API_KINDS = (RUNTIME, DRIVER)

#: CUpti_ActivityKind values (cupti_activity.h; cupti-python's `cupti.ActivityKind`) -> the `kind` column
ACTIVITY_KINDS = {1: MEMCPY, 2: MEMSET, 3: KERNEL, 4: DRIVER, 5: RUNTIME, 10: KERNEL}  # 10: CONCURRENT_KERNEL
#: CUpti_ActivityMemcpyKind values -> direction
MEMCPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                8: "DtoD", 9: "HtoH", 10: "PtoP"}


@dataclass(frozen=True)
class ClockSync:
    """Where CUPTI's clock and ORT's profile clock meet.

    `cupti_ns` and `wall_ns` are read back to back (`cupti.get_timestamp()`, `time.time_ns()`);
    `profile_start_ns` is the session's `get_profiling_start_time_ns()`, which ORT takes from
    `std::chrono::high_resolution_clock` (the system clock on Linux, the clock of `time.time_ns()`), and every
    profile `ts` is microseconds after it. A CUPTI time t is then at
    `(t - cupti_ns + wall_ns - profile_start_ns) / 1000` µs on the profile's clock; the error is the gap
    between the two reads (about a microsecond).
    """

    cupti_ns: int
    wall_ns: int
    profile_start_ns: int

    def to_profile_us(self, cupti_ns: Any) -> Any:
        """CUPTI nanoseconds (an int, or an int64 array/Series) -> profile microseconds. The shift is applied in
        integers: both clocks may count from 1970 (~1.7e18 ns), where a float64 is only good to 256 ns."""
        return (cupti_ns + (self.wall_ns - self.profile_start_ns - self.cupti_ns)) / 1e3


def records_frame(activities: Iterable[Any], api_name: Callable[[str, int], str] | None = None) -> pd.DataFrame:
    """cupti-python activity objects -> the records DataFrame; kinds other than `ACTIVITY_KINDS` are skipped.

    `api_name(kind, cbid)` names an API record (the recorder passes `cupti.get_callback_name`); without it the
    name is `cbid <n>`. Example: a CONCURRENT_KERNEL record (kind 10, start 100, end 250, correlation_id 7,
    stream_id 13, device_id 0, name "gemm") -> a row kernel, gemm, 100, 250, 7, 13, 0, -1.
    """
    rows = []
    for a in activities:
        kind = ACTIVITY_KINDS.get(int(a.kind))
        if kind is None:
            continue
        if kind in API_KINDS:
            cbid = int(a.cbid)
            name = api_name(kind, cbid) if api_name is not None else f"cbid {cbid}"
            rows.append((kind, name, int(a.start), int(a.end), int(a.correlation_id), -1, -1, int(a.thread_id)))
            continue
        if kind == MEMCPY:
            name = f"memcpy {MEMCPY_KINDS.get(int(a.copy_kind), 'unknown')}"
        elif kind == MEMSET:
            name = "memset"
        else:
            name = str(a.name)
        rows.append((kind, name, int(a.start), int(a.end), int(a.correlation_id), int(a.stream_id),
                     int(a.device_id), -1))
    return pd.DataFrame(rows, columns=list(RECORD_COLUMNS)).astype(
        {START_NS: "int64", END_NS: "int64", CORRELATION_ID: "int64", STREAM_ID: "int64", DEVICE_ID: "int64",
         THREAD_ID: "int64"})


@dataclass(frozen=True)
class GpuRecording:
    """What a CUPTI recorder brought back from profiled runs: the records and the clock pair taken with them,
    and how many of CUPTI's buffers could not be read (`callback_errors`, the first one's message in
    `first_error`): an exception in the buffer-completed callback runs in CUPTI's native thread and would be
    lost, so the recorder counts it instead and the records are then incomplete."""

    records: pd.DataFrame
    clock: ClockSync
    callback_errors: int = 0
    first_error: str = ""
