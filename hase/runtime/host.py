"""The measuring machine's fingerprint: what decides which kernels ONNX Runtime runs and how fast they go.

A CPU model string says little in the cloud ("AMD EPYC" is several generations): the fingerprint holds the
CPU's vendor, family, model and stepping, the ISA features ONNX Runtime's MLAS kernels choose between (AVX2,
FMA, AVX-512 F/VNNI/BF16, AVX-VNNI, AMX, ...), the cache sizes, cores and threads, memory, and the ONNX Runtime
version and providers. Its `digest` (a short sha256) keys the store's `hosts` table and names adapted
predictors; `differences` names what differs between two machines, one phrase each.

    >>> fp = host_fingerprint()
    >>> fp.digest, fp.differences(other)
    ('3f2a9c41d07e', ['L2 1024 KiB, the other 512 KiB', 'ISA +avx512f'])
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError

#: the ISA flags (as /proc/cpuinfo names them) ONNX Runtime's kernels dispatch on
ISA_FLAGS = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512dq",
             "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "sve", "i8mm", "bf16")
_CPUINFO = Path("/proc/cpuinfo")
_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class HostFingerprint:
    """One machine as ONNX Runtime's kernels see it; sizes in KiB (caches) and GiB (memory), 0 where unknown."""

    cpu_vendor: str
    cpu_family: int
    cpu_model_id: int
    cpu_stepping: int
    cpu_model: str
    isa: tuple[str, ...]
    l1d_kib: int
    l2_kib: int
    l3_kib: int
    cores: int
    threads: int
    memory_gib: int
    ort_version: str
    ort_providers: tuple[str, ...]

    @property
    def digest(self) -> str:
        """12 hex digits of the sha256 of the fingerprint's canonical JSON: the same machine, the same digest."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples as lists)."""
        return {**dataclasses.asdict(self), "isa": list(self.isa), "ort_providers": list(self.ort_providers)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "host fingerprint") -> HostFingerprint:
        """The fingerprint `to_dict` wrote; a missing or mistyped field is a HaseError naming it."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v = d.get(f.name)
            if (f.type == "int" and isinstance(v, int) and not isinstance(v, bool)) or (f.type == "str"
                                                                                        and isinstance(v, str)):
                values[f.name] = v
            elif f.type == "tuple[str, ...]" and isinstance(v, list) and all(isinstance(x, str) for x in v):
                values[f.name] = tuple(v)
            else:
                raise HaseError(f"{where} has no valid {f.name!r} ({v!r}): record it again (`hase adapt` or retrain)")
        return cls(**values)

    def summary(self) -> str:
        """One line: CPU, family/model/stepping, the widest ISA, caches, cores/threads, memory, ORT."""
        widest = [f for f in ("amx_tile", "avx512f", "avx2", "asimd") if f in self.isa][:1]
        return (f"{self.cpu_model} ({self.cpu_vendor} family {self.cpu_family} model {self.cpu_model_id} stepping "
                f"{self.cpu_stepping}), {widest[0] if widest else 'no AVX2'}, L2 {self.l2_kib} KiB, L3 "
                f"{self.l3_kib} KiB, {self.cores} cores / {self.threads} threads, {self.memory_gib} GiB, "
                f"ORT {self.ort_version}")

    def differences(self, other: HostFingerprint, other_name: str = "the other") -> list[str]:
        """What differs from `other`, one phrase each (none: the same machine as far as ORT's kernels can tell);
        `other_name` names the other machine in them ("the predictor's").

        ISA flags are named by what this host has (+) or lacks (-) against the other.
        """
        out: list[str] = []
        them = other_name
        cpu_a = (self.cpu_vendor, self.cpu_family, self.cpu_model_id, self.cpu_stepping)
        cpu_b = (other.cpu_vendor, other.cpu_family, other.cpu_model_id, other.cpu_stepping)
        if cpu_a != cpu_b:
            out.append(f"CPU {_cpu(cpu_a)}, {them} {_cpu(cpu_b)}")
        elif self.cpu_model != other.cpu_model:
            out.append(f"CPU name {self.cpu_model!r}, {them} {other.cpu_model!r}")
        plus = sorted(set(self.isa) - set(other.isa))
        minus = sorted(set(other.isa) - set(self.isa))
        if plus or minus:
            flags = " ".join([f"+{f}" for f in plus] + [f"-{f}" for f in minus])
            out.append(f"ISA {flags} (this machine against {them})")
        for name, a, b, unit in (("L1d", self.l1d_kib, other.l1d_kib, "KiB"), ("L2", self.l2_kib, other.l2_kib, "KiB"),
                                 ("L3", self.l3_kib, other.l3_kib, "KiB"), ("cores", self.cores, other.cores, ""),
                                 ("threads", self.threads, other.threads, ""),
                                 ("memory", self.memory_gib, other.memory_gib, "GiB")):
            if a != b:
                u = f" {unit}" if unit else ""
                out.append(f"{name} {a}{u}, {them} {b}{u}")
        if self.ort_version != other.ort_version:
            out.append(f"ONNX Runtime {self.ort_version}, {them} {other.ort_version}")
        if set(self.ort_providers) != set(other.ort_providers):
            out.append(f"providers {','.join(self.ort_providers) or 'none'}, {them} "
                       f"{','.join(other.ort_providers) or 'none'}")
        return out


def _cpu(c: tuple[str, int, int, int]) -> str:
    return f"{c[0]} family {c[1]} model {c[2]} stepping {c[3]}"


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Vendor, family, model, stepping, name, ISA flags (those of ISA_FLAGS) and logical CPUs of /proc/cpuinfo text."""
    first: dict[str, str] = {}
    threads = 0
    physical: set[tuple[str, str]] = set()
    phys_id = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "processor":
            threads += 1
        elif key == "physical id":
            phys_id = value
        elif key == "core id":
            physical.add((phys_id, value))
        first.setdefault(key, value)
    flags = set((first.get("flags") or first.get("features") or "").split())
    return {"cpu_vendor": first.get("vendor_id", first.get("cpu implementer", "")),
            "cpu_family": _int(first.get("cpu family", "0")), "cpu_model_id": _int(first.get("model", "0")),
            "cpu_stepping": _int(first.get("stepping", "0")),
            "cpu_model": first.get("model name", "") or platform.processor() or platform.machine(),
            "isa": tuple(f for f in ISA_FLAGS if f in flags), "threads": threads,
            "cores": len(physical) or threads}


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return 0


def _size_kib(text: str) -> int:
    """`48K`, `1024K`, `32M` as KiB."""
    text = text.strip().upper()
    scale = {"K": 1, "M": 1024, "G": 1 << 20}.get(text[-1:], 0)
    if scale:
        return _int(text[:-1]) * scale
    return _int(text) // 1024


def cache_sizes(cache_dir: Path = _CACHE) -> dict[str, int]:
    """L1d, L2 and L3 sizes of cpu0 in KiB from sysfs (0 where the kernel does not say)."""
    out = {"l1d_kib": 0, "l2_kib": 0, "l3_kib": 0}
    for index in sorted(cache_dir.glob("index*")) if cache_dir.is_dir() else []:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size_kib((index / "size").read_text())
        except OSError:
            continue
        if level == "1" and kind == "Data":
            out["l1d_kib"] = size
        elif level in ("2", "3") and kind == "Unified":
            out[f"l{level}_kib"] = size
    return out


def memory_gib(meminfo: Path = _MEMINFO) -> int:
    """Total memory rounded to GiB (0 where /proc/meminfo cannot be read)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20))
    except (OSError, ValueError, IndexError):
        pass
    return 0


def ort_build() -> tuple[str, tuple[str, ...]]:
    """ONNX Runtime's version and available providers; ('', ()) when it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return "", ()
    return str(onnxruntime.__version__), tuple(sorted(onnxruntime.get_available_providers()))


@functools.cache
def host_fingerprint() -> HostFingerprint:
    """This machine's fingerprint (read once per process)."""
    try:
        cpu = parse_cpuinfo(_CPUINFO.read_text())
    except OSError:
        cpu = parse_cpuinfo("")
        cpu["threads"] = cpu["cores"] = os.cpu_count() or 0
    version, providers = ort_build()
    caches = cache_sizes()
    return HostFingerprint(cpu["cpu_vendor"], cpu["cpu_family"], cpu["cpu_model_id"], cpu["cpu_stepping"],
                           cpu["cpu_model"], cpu["isa"], caches["l1d_kib"], caches["l2_kib"], caches["l3_kib"],
                           cpu["cores"], cpu["threads"], memory_gib(), version, providers)


_STAT = Path("/proc/stat")


def others_cpu_s(stat: Path = _STAT) -> float | None:
    """CPU seconds every process but this one has used since boot (the kernel's busy time less this process's
    user and system time, its threads included); None where /proc/stat is missing. Two readings apart give how many
    cores other processes kept busy meanwhile: load that a measurement's own repeats cannot see, since it slows
    every pass alike."""
    try:
        fields = stat.read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(v) for v in fields]
    busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # less idle and iowait
    mine = os.times()
    return busy / os.sysconf("SC_CLK_TCK") - (mine.user + mine.system)
