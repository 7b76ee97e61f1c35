"""Device strings of a pipeline (`cpu`, `cuda:N`, `ov:CPU`, `host`) and the check that each one is present.

A missing device is a HaseError before anything runs: Hase never falls back to another device silently.
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hase.errors import HaseError
from hase.runtime import sessions
from hase.runtime.types import EPConfig

ORT, OPENVINO, HOST = "ort", "openvino", "host"
_CUDA = re.compile(r"^cuda(?::(\d+))?$")
_OV = re.compile(r"^ov:([A-Za-z]+(?:\.\d+)?)$")
DEVICE_FORMS = "cpu, cuda:N, ov:CPU, ov:GPU, ov:NPU, host"


@dataclass(frozen=True)
class Device:
    """A parsed device: which backend runs it, and its backend-level name (`EPConfig` or OpenVINO device)."""

    name: str
    backend: str
    ov_device: str = ""
    cuda_id: int = 0

    def ep_config(self, threads: int) -> EPConfig:
        """The ONNX Runtime device config of an `ort` device."""
        if self.backend != ORT:
            raise HaseError(f"{self.name} is not an ONNX Runtime device")
        ep = "cuda" if self.name.startswith("cuda") else "cpu"
        return EPConfig(name=self.name, ep=ep, intra_op_threads=threads, device_id=self.cuda_id)


def parse_device(name: str) -> Device:
    """Parse a device string; an unknown form lists the accepted ones."""
    text = name.strip()
    if text == "cpu":
        return Device(text, ORT)
    if text == "host":
        return Device(text, HOST)
    m = _CUDA.match(text)
    if m:
        idx = int(m.group(1) or 0)
        return Device(f"cuda:{idx}", ORT, cuda_id=idx)
    m = _OV.match(text)
    if m:
        return Device(text, OPENVINO, ov_device=m.group(1).upper())
    raise HaseError(f"unknown device {name!r}: use one of {DEVICE_FORMS}")


def openvino() -> Any:
    """Import openvino lazily, with the install hint when the extra is missing."""
    try:
        import openvino as ov
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HaseError("OpenVINO devices (ov:...) need the openvino extra: pip install hase[openvino]") from exc
    return ov


class OpenVinoCore:
    """One `openvino.Core` per pipeline run, created on first use (no global state, no import cost otherwise)."""

    def __init__(self) -> None:
        self._core: Any = None

    def get(self) -> Any:
        """The run's `openvino.Core`, created (and OpenVINO imported) on the first call."""
        if self._core is None:
            self._core = openvino().Core()
        return self._core


def check_devices(names: Iterable[str], core: OpenVinoCore) -> list[Device]:
    """Parse and check every device; the first absent one raises with the devices that are there."""
    out = []
    for name in dict.fromkeys(names):
        dev = parse_device(name)
        if dev.backend == ORT:
            sessions.check_provider(dev.ep_config(1))
            if dev.cuda_id:
                _check_cuda_index(dev)
        elif dev.backend == OPENVINO:
            available = list(core.get().available_devices)
            if not any(a == dev.ov_device or a.split(".")[0] == dev.ov_device for a in available):
                raise HaseError(f"OpenVINO device {dev.ov_device} is not present (available: "
                                f"{', '.join(available) or 'none'}); pick one of those")
        out.append(dev)
    return out


def _check_cuda_index(dev: Device) -> None:
    """Where nvidia-smi answers, the CUDA device index must exist (otherwise ORT's own load error decides)."""

    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return
    count = len([ln for ln in out.splitlines() if ln.startswith("GPU ")])
    if count and dev.cuda_id >= count:
        raise HaseError(f"{dev.name} is not present: this machine has {count} CUDA device(s) "
                        f"(cuda:0..cuda:{count - 1})")


def device_metadata(dev: Device, core: OpenVinoCore, threads: int = 1) -> dict[str, Any]:
    """Columns describing the device a figure was measured on (ORT via `sessions.device_metadata`)."""
    if dev.backend == ORT:
        return sessions.device_metadata(dev.ep_config(threads))
    meta: dict[str, Any] = {"device": dev.name, "cpu_model": sessions.cpu_model()}
    if dev.backend == OPENVINO:
        ov = openvino()
        meta["openvino_version"] = ov.__version__
        meta["ov_device_name"] = str(core.get().get_property(dev.ov_device, "FULL_DEVICE_NAME"))
        meta["inference_threads"] = threads
        try:  # bf16 by default on CPUs with AMX: say so next to every figure
            hint = core.get().get_property(dev.ov_device, "INFERENCE_PRECISION_HINT")
            meta["inference_precision"] = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
        except RuntimeError:  # not every device plugin reports it
            meta["inference_precision"] = ""
    return meta
