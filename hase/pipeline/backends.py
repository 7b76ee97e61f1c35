"""Pipeline backends by device kind (`ort`, `openvino`, `host`): a registry of executor openers.

A backend module registers its opener with `@register_backend(kind)` when it is imported. `open_executor`
imports the built-in backend modules by name on first use, so no pipeline module imports a backend at import
time, and OpenVINO itself loads only when an `ov:` device is opened. A second opener for a kind is an error;
a kind nobody registered is an error listing the known ones.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from hase.errors import HaseError
from hase.pipeline.devices import Device, OpenVinoCore
from hase.pipeline.executors import Executor, ExecutorOptions, ExecutorRequest

Opener = Callable[[ExecutorRequest], Executor]
OpenerT = TypeVar("OpenerT", bound=Opener)  # the opener type a decorator hands back unchanged

BUILTIN_BACKENDS = ("hase.pipeline.host_backend", "hase.pipeline.ort_backend", "hase.pipeline.ov_backend")


class BackendRegistry:
    """Device kind -> the function that opens an executor on a device of that kind."""

    def __init__(self) -> None:
        self._openers: dict[str, Opener] = {}

    def register(self, kind: str) -> Callable[[OpenerT], OpenerT]:
        """Decorator registering an opener for `kind`; registering a kind twice is a HaseError."""

        def add(opener: OpenerT) -> OpenerT:
            if kind in self._openers:
                have = self._openers[kind]
                raise HaseError(f"backend {kind!r} is already registered by {have.__module__}.{have.__qualname__}; "
                                f"cannot register {opener.__module__}.{opener.__qualname__} too")
            self._openers[kind] = opener
            return opener

        return add

    @property
    def kinds(self) -> tuple[str, ...]:
        """The registered kinds, sorted."""
        return tuple(sorted(self._openers))

    def opener(self, kind: str) -> Opener:
        """The opener of `kind`; an unknown kind is a HaseError listing the known ones."""
        try:
            return self._openers[kind]
        except KeyError:
            raise HaseError(f"unknown backend {kind!r}: known backends are {', '.join(self.kinds) or 'none'}"
                            ) from None

    def open(self, request: ExecutorRequest) -> Executor:
        """Open an executor with the opener of the request's device kind."""
        return self.opener(request.device.backend)(request)


BACKENDS = BackendRegistry()
register_backend = BACKENDS.register


def load_builtin_backends() -> BackendRegistry:
    """Import the built-in backend modules (each registers itself once) and return the registry."""
    for module in BUILTIN_BACKENDS:
        importlib.import_module(module)
    return BACKENDS


def open_executor(device: Device, *, model: Path | None, fn: Callable[[np.ndarray], np.ndarray] | None,
                  threads: int, options: ExecutorOptions, core: OpenVinoCore) -> Executor:
    """Open one executor on `device` with its kind's backend; a model that fails to load is a HaseError."""
    return load_builtin_backends().open(ExecutorRequest(device, model, fn, threads, options, core))
