"""The collect config (`configs/devices.toml`): every value checked for type and range before anything runs.

A mistake is one HaseError naming the key, the value and what is allowed, e.g.
`devices.toml: [profile] runs = 0 is out of range: use an integer from 1 to 10000`; nothing has been
written to the store by then. `settings_hash` fingerprints a device config plus its measuring settings, so
a skip recorded under one config is retried under another.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError
from hase.files import load_toml
from hase.measure.types import CanaryPolicy, MeasureSettings
from hase.runtime.types import EP_PROVIDERS, OPT_LEVELS, EPConfig, TimingPolicy

__all__ = ["CollectConfig", "load_collect_config", "settings_hash"]


@dataclass(frozen=True)
class CollectConfig:
    """Device configurations to measure on and how hard to measure."""

    devices: tuple[EPConfig, ...]
    settings: MeasureSettings


@dataclass(frozen=True)
class _Range:
    """A numeric key: integers only (`kind=int`) or any number, within [lo, hi]."""

    kind: type
    lo: float
    hi: float

    def describe(self) -> str:
        if self.kind is int:
            return f"an integer from {int(self.lo)} to {int(self.hi)}"
        return f"a number from {self.lo:g} to {self.hi:g}"


_TIMING = {"warmup": _Range(int, 0, 10_000), "min_runs": _Range(int, 1, 1_000_000),
           "max_runs": _Range(int, 1, 1_000_000), "min_time_s": _Range(float, 0, 3600),
           "max_time_s": _Range(float, 0.001, 3600), "rel_ci": _Range(float, 0, 1)}
_TABLES: dict[str, dict[str, _Range]] = {
    "kernel_timing": _TIMING,
    "model_timing": _TIMING,
    "profile": {"warmup": _Range(int, 0, 1000), "runs": _Range(int, 1, 10_000), "min_runs": _Range(int, 1, 10_000),
                "rel_ci": _Range(float, 0, 1)},
    "cold": {"sessions": _Range(int, 2, 64), "max_mb": _Range(int, 1, 1 << 20)},
    "robust": {"blocks": _Range(int, 1, 100), "noise_bound": _Range(float, 0.001, 10), "passes": _Range(int, 1, 10)},
    "canary": {"size": _Range(int, 16, 2048), "warmup": _Range(int, 0, 1000), "runs": _Range(int, 1, 10_000),
               "busy_ratio": _Range(float, 1.01, 100), "retries": _Range(int, 0, 100),
               "wait_s": _Range(float, 0, 600), "every_kernels": _Range(int, 1, 1_000_000),
               "max_wait_s": _Range(float, 0, 86_400)},
}
#: keys that are true or false, per table
_FLAGS: dict[str, set[str]] = {"canary": {"enabled"}}
_DEVICE_NUMBERS = {"intra_op_threads": _Range(int, 0, 1024), "inter_op_threads": _Range(int, 0, 1024),
                   "device_id": _Range(int, 0, 1024)}
_DEVICE_CHOICES = {"ep": sorted(EP_PROVIDERS), "opt_level": list(OPT_LEVELS)}
_DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def load_collect_config(path: str | Path, device_names: list[str] | None = None) -> CollectConfig:
    """Parse and check `configs/devices.toml`; `device_names` restricts to some of its devices."""
    raw = load_toml(path, "device config")
    where = str(path)
    unknown = sorted(set(raw) - {*_TABLES, "device"})
    if unknown:
        raise HaseError(f"{where}: unknown table {unknown}: the known ones are {sorted(_TABLES)} and [[device]]")
    tables = {name: _table(where, raw, name) for name in _TABLES}
    defaults = MeasureSettings()
    settings = MeasureSettings(
        kernel=_policy(where, "kernel_timing", tables["kernel_timing"], defaults.kernel),
        model=_policy(where, "model_timing", tables["model_timing"], defaults.model),
        profile_warmup=tables["profile"].get("warmup", defaults.profile_warmup),
        profile_runs=tables["profile"].get("runs", defaults.profile_runs),
        profile_min_runs=_profile_min_runs(where, tables["profile"], defaults),
        profile_rel_ci=float(tables["profile"].get("rel_ci", defaults.profile_rel_ci)),
        cold_sessions=tables["cold"].get("sessions", defaults.cold_sessions),
        cold_max_bytes=tables["cold"]["max_mb"] << 20 if "max_mb" in tables["cold"] else defaults.cold_max_bytes,
        model_blocks=tables["robust"].get("blocks", defaults.model_blocks),
        noise_bound=tables["robust"].get("noise_bound", defaults.noise_bound),
        model_passes=tables["robust"].get("passes", defaults.model_passes),
        canary=dataclasses.replace(CanaryPolicy(), **tables["canary"]),
    )
    devices = _devices(where, raw.get("device", []))
    if device_names:
        known = {d.name: d for d in devices}
        missing = [n for n in device_names if n not in known]
        if missing:
            raise HaseError(f"unknown device {missing}: {where} defines {sorted(known)}")
        devices = tuple(known[n] for n in device_names)
    return CollectConfig(devices, settings)


def settings_hash(ep: EPConfig, settings: MeasureSettings) -> str:
    """16 hex digits of the sha256 of a device config and its measuring settings (what a skip depends on)."""
    blob = json.dumps({"device": dataclasses.asdict(ep), "settings": dataclasses.asdict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _table(where: str, raw: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One settings table, every key known and within its range."""
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise HaseError(f"{where}: [{name}] must be a table of keys, not {_show(table)}")
    spec, flags = _TABLES[name], _FLAGS.get(name, set())
    for key, value in table.items():
        if key in flags:
            if not isinstance(value, bool):
                raise HaseError(f"{where}: [{name}] {key} = {_show(value)} is not true or false: use true or false")
            continue
        if key not in spec:
            raise HaseError(f"{where}: unknown key [{name}] {key}: the known keys are {sorted({*spec, *flags})}")
        _check_number(f"{where}: [{name}] {key}", value, spec[key])
    return dict(table)


def _policy(where: str, name: str, table: Mapping[str, Any], default: TimingPolicy) -> TimingPolicy:
    """A timing stop rule; missing keys keep `default`'s, and each maximum is at least its minimum."""
    policy = dataclasses.replace(default, **table)
    if policy.max_runs < policy.min_runs:
        raise HaseError(f"{where}: [{name}] max_runs = {policy.max_runs} is below min_runs = {policy.min_runs}: "
                        f"raise max_runs or lower min_runs")
    if policy.max_time_s < policy.min_time_s:
        raise HaseError(f"{where}: [{name}] max_time_s = {policy.max_time_s:g} is below min_time_s = "
                        f"{policy.min_time_s:g}: raise max_time_s or lower min_time_s")
    return policy


def _profile_min_runs(where: str, table: Mapping[str, Any], defaults: MeasureSettings) -> int:
    """[profile] min_runs: the profiled runs always made (`runs` when not given), at most `runs`."""
    runs = table.get("runs", defaults.profile_runs)
    least = table.get("min_runs", runs)
    if least > runs:
        raise HaseError(f"{where}: [profile] min_runs = {least} is above runs = {runs}: lower min_runs or raise runs")
    return int(least)


def _devices(where: str, entries: Any) -> tuple[EPConfig, ...]:
    """The [[device]] tables as EPConfigs: known keys, checked values, unique names."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise HaseError(f"{where}: device must be an array of [[device]] tables")
    if not entries:
        raise HaseError(f"{where} defines no [[device]]: add one (see configs/devices.toml)")
    known = {f.name for f in dataclasses.fields(EPConfig)}
    devices: list[EPConfig] = []
    for i, entry in enumerate(entries, 1):
        label = f"{where}: [[device]] #{i}"
        extra = sorted(set(entry) - known)
        if extra:
            raise HaseError(f"{label}: unknown key {extra}: the known keys are {sorted(known)}")
        name = entry.get("name")
        if name is None:
            raise HaseError(f"{label} has no name: add name = \"...\" (it names the predictor directory)")
        if not isinstance(name, str) or not _DEVICE_NAME.fullmatch(name):
            raise HaseError(f"{label} name = {_show(name)}: give a name of 1 to 64 letters, digits, '.', '_' "
                            f"or '-' (it names the predictor directory)")
        for key, choices in _DEVICE_CHOICES.items():
            if key in entry and entry[key] not in choices:
                raise HaseError(f"{label} {key} = {_show(entry[key])}: use one of {choices}")
        for key, rng in _DEVICE_NUMBERS.items():
            if key in entry:
                _check_number(f"{label} {key}", entry[key], rng)
        if any(d.name == name for d in devices):
            raise HaseError(f"{label}: device name {name!r} is used twice: give each [[device]] its own name")
        devices.append(EPConfig(**entry))
    return tuple(devices)


def _check_number(label: str, value: Any, rng: _Range) -> None:
    """A HaseError unless `value` is a number of the range's kind within it (TOML booleans are not numbers)."""
    ok_type = isinstance(value, int) if rng.kind is int else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise HaseError(f"{label} = {_show(value)} is not {rng.describe().split(' from ')[0]}: "
                        f"use {rng.describe()}")
    if not rng.lo <= value <= rng.hi:  # NaN fails both comparisons
        raise HaseError(f"{label} = {_show(value)} is out of range: use {rng.describe()}")


def _show(value: Any) -> str:
    """A config value as TOML writes it (strings quoted, booleans lower-case), at most 40 characters."""
    text = json.dumps(value, default=str) if isinstance(value, (str, bool, list, dict)) or value is None \
        else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
