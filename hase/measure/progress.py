"""What a collect run tells its progress callback: one typed record per event, and the callback's protocol.

`hase.measure.collect` and `hase.measure.fleet` emit these; the CLI (`hase collect`) draws bars or logs lines
from them; a test or a notebook can collect them in a list. Every event is a frozen record, so a consumer is
checked by mypy (`match event: case ModelStarted(model=m): ...`) instead of reading keys out of a dict.

    >>> seen: list[CollectEvent] = []
    >>> collect(sources, cfg, store, seen.append)   # doctest: +SKIP
    >>> [e for e in seen if isinstance(e, ModelStarted)][:1]   # doctest: +SKIP
    [ModelStarted(model='resnet18_w0.5', device='cpu-1t')]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeAlias

__all__ = ["CollectEvent", "JobDispatched", "JobFinished", "KernelStarted", "ModelStarted", "OnProgress",
           "SignatureStarted", "WorkersReady"]


@dataclass(frozen=True)
class ModelStarted:
    """A model's turn on a device config has come: it is split next, then its kernels and itself are measured."""

    model: str
    device: str


@dataclass(frozen=True)
class KernelStarted:
    """The `index`-th (from 0) of a model's `total` unique kernels is next (measured, or found already there)."""

    model: str
    op_type: str
    index: int
    total: int


@dataclass(frozen=True)
class SignatureStarted:
    """The device config's speed signature is measured on this host (once per device and host)."""

    device: str


@dataclass(frozen=True)
class WorkersReady:
    """A fleet run's workers, each with its label and the device configs it measures."""

    workers: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class JobDispatched:
    """A fleet run handed a job (its target: a kernel or a model) of a device config to a worker."""

    worker: str
    device: str
    target: str


@dataclass(frozen=True)
class JobFinished:
    """A fleet run's job is settled: `status` "done" or "skipped" (lost too often counts as skipped); `done` jobs so far
    of the `known` ones (the jobs of the models split so far)."""

    worker: str
    device: str
    status: str
    target: str
    done: int
    known: int


CollectEvent: TypeAlias = ModelStarted | KernelStarted | SignatureStarted | WorkersReady | JobDispatched | JobFinished


class OnProgress(Protocol):
    """A collect run's progress callback: called with each event, in order, on the driver's thread."""

    def __call__(self, event: CollectEvent, /) -> None:
        """Take one event; what it draws or logs is the caller's business (the library never prints)."""
