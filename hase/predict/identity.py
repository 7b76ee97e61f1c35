"""What a predictor is, and whether this host is the one it describes.

A prediction is only as good as the match between the machine that was measured and the one it is used
on: `PredictorIdentity` gathers, from a verified manifest and where it was found, the facts a user needs
to judge a prediction (device configuration, CPU/GPU, ONNX Runtime version, execution provider, threads,
optimization level, training date, held-out accuracy), and `host_mismatches` lists how this host differs
(CPU model, GPU, ORT version, an execution provider this ORT build lacks, more threads than CPUs).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError
from hase.predict.bundle import PredictorBundle, load_bundle, read_manifest
from hase.predict.locate import FoundPredictor, find_predictor, installed_predictors
from hase.predict.manifest import Manifest
from hase.predict.noise import busy_share
from hase.runtime.host import HostFingerprint, host_fingerprint
from hase.runtime.sessions import cpu_model, gpu_info
from hase.runtime.types import DEVICE_META_COLS, DeviceMeta

CUDA_PROVIDER = "CUDAExecutionProvider"


@dataclass(frozen=True)
class HostInfo:
    """This machine as a predictor's device metadata would describe it (`ort_version` "" without onnxruntime)."""

    cpu_model: str
    ort_version: str
    providers: tuple[str, ...]
    gpu_name: str
    n_cpus: int
    fingerprint: HostFingerprint | None = None  # `hase.runtime.host`; None without onnxruntime


def host_info(gpu: bool = False) -> HostInfo:
    """This host's CPU model, ONNX Runtime version and providers, usable CPUs, fingerprint and (with `gpu`, which
    runs nvidia-smi) GPU name."""

    try:
        import onnxruntime
    except ImportError:
        version, providers = "", ()
    else:
        version, providers = onnxruntime.__version__, tuple(onnxruntime.get_available_providers())
    n_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return HostInfo(cpu_model(), version, providers, gpu_info()[0] if gpu else "", n_cpus,
                    host_fingerprint() if version else None)


@dataclass(frozen=True)
class PredictorIdentity:
    """The facts that make a predictor's figures meaningful, with where it was found and which target is used.

    `acc10` (share of held-out models within ±10 %) and `rmspe` (%) are the leave-family-out figures of
    `target`, over `n_held_out` models, as measured at training time. `meta` is the device metadata of its
    measurements (its fields read as attributes too: `ident.cpu_model`), `host` the measuring machine's fingerprint
    (None: none recorded), `busy_share` the share of its training jobs measured on a busy host (None: unknown),
    `adapted_from` the predictor it was adapted from (`hase adapt`; "" when trained), `moved_from` the one-thread
    device whose forests a threaded device moves to its thread count (`hase.predict.threaded`; "" otherwise): its
    held-out figures are that device's, at one thread.
    """

    device: str
    source: str
    path: str
    shadowed: bool
    meta: DeviceMeta
    created_at: str
    default_target: str
    target: str
    acc10: float
    rmspe: float
    n_held_out: int
    n_models: int
    families: tuple[str, ...]
    host: HostFingerprint | None = None
    busy_share: float | None = None
    adapted_from: str = ""
    moved_from: str = ""

    def __getattr__(self, name: str) -> Any:
        """The device metadata's fields (`cpu_model`, `ort_version`, `intra_op_threads`, ...) as attributes."""
        if name in DEVICE_META_COLS and name != "device":
            return getattr(self.meta, name)
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    @property
    def trained_on(self) -> str:
        """The training date (YYYY-MM-DD) of `created_at`."""
        return self.created_at[:10]

    @property
    def is_cuda(self) -> bool:
        """Whether the predictor describes the CUDA execution provider."""
        return CUDA_PROVIDER in self.execution_provider

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, flat: the device metadata beside the rest, families as a list, the fingerprint as an
        object (None: none recorded)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("meta", "host")}
        meta = {k: v for k, v in dataclasses.asdict(self.meta).items() if k != "device"}
        return {**out, **meta, "families": list(self.families),
                "host_fingerprint": self.host.to_dict() if self.host is not None else None}

    @classmethod
    def columns(cls) -> list[str]:
        """The keys of `to_dict`, in order (a table's columns)."""
        own = [f.name for f in dataclasses.fields(cls) if f.name not in ("meta", "host")]
        return [*own, *(c for c in DEVICE_META_COLS if c != "device"), "host_fingerprint"]


def predictor_identity(manifest: Manifest, found: FoundPredictor, target: str | None = None) -> PredictorIdentity:
    """The identity of a verified manifest found at `found`, with the held-out figures of `target` (default:
    the manifest's default target)."""
    target = target or manifest.default_target
    held = manifest.target(target).held_out
    return PredictorIdentity(
        device=manifest.device, source=found.source, path=str(found.path), shadowed=found.shadowed,
        meta=manifest.device_meta, created_at=manifest.created_at, default_target=manifest.default_target,
        target=target, acc10=held.acc10, rmspe=held.rmspe, n_held_out=held.n,
        n_models=manifest.training_data.n_models, families=manifest.training_data.families, host=manifest.host,
        busy_share=busy_share(manifest.noise, manifest.training_data.busy),
        adapted_from=str(manifest.adaptation.get("source_path", "")),
        moved_from=str(manifest.threads.get("moved_from", "")))


def host_mismatches(ident: PredictorIdentity, host: HostInfo) -> list[str]:
    """How this host differs from the one the predictor was measured on, one phrase per difference (none when
    it matches): each is a reason its predictions may be off here."""
    out: list[str] = []
    if ident.host is not None and host.fingerprint is not None:
        out += host.fingerprint.differences(ident.host, "the predictor's")
    elif ident.cpu_model != host.cpu_model:
        out.append(f"CPU {host.cpu_model!r}, the predictor's {ident.cpu_model!r}")
    if ident.is_cuda and host.gpu_name != ident.gpu_name:
        out.append(f"GPU {host.gpu_name or 'none found'!r}, the predictor's {ident.gpu_name!r}")
    if not host.ort_version:
        out.append(f"no onnxruntime installed, the predictor's is {ident.ort_version}")
    elif host.ort_version != ident.ort_version and (ident.host is None or host.fingerprint is None):
        out.append(f"ONNX Runtime {host.ort_version}, the predictor's {ident.ort_version} (its kernel graph and "
                   f"kernels may differ)")
    if host.ort_version and ident.execution_provider not in host.providers:
        out.append(f"{ident.execution_provider} is not available in this ONNX Runtime build "
                   f"(it has {', '.join(host.providers) or 'none'})")
    if ident.intra_op_threads > host.n_cpus:  # 0 (ORT chooses) never is
        out.append(f"{host.n_cpus} usable CPUs, fewer than the predictor's {ident.intra_op_threads} intra-op threads")
    return out


def threads_text(intra: int, inter: int) -> str:
    """How a configuration's threads read in output: `1 intra-op / 1 inter-op thread(s)`; 0 is ORT's default."""
    intra_s = "ORT's default intra-op (one per physical core)" if intra == 0 else f"{intra} intra-op"
    inter_s = "ORT's default inter-op" if inter == 0 else f"{inter} inter-op"
    return f"{intra_s} / {inter_s} thread(s)"


def describe(ident: PredictorIdentity) -> str:
    """One line naming a predictor: device, hardware, runtime, settings, training date, held-out figures, place.

    >>> describe(ident)  # doctest: +SKIP
    "cpu-1t: CPUExecutionProvider on Intel(R) Xeon(R) Processor, ORT 1.32.0, 1 intra-op / 1 inter-op thread(s),
    extended optimization; trained 2026-11-26 on 101 models; held-out (span) ±10 % 71 %, RMSPE 11.8 %;
    shipped: /…/hase/predictors/cpu-1t"
    """
    hw = ident.cpu_model + (f" + {ident.gpu_name} (driver {ident.gpu_driver})" if ident.gpu_name else "")
    fp = f"host {ident.host.digest}" if ident.host is not None else "no fingerprint recorded"
    adapted = f"; adapted from {ident.adapted_from}" if ident.adapted_from else ""
    moved = f"; {ident.moved_from}'s forests moved by a thread model" if ident.moved_from else ""
    held = f"{ident.moved_from}'s held-out at one thread" if ident.moved_from else "held-out"
    return (f"{ident.device}: {ident.execution_provider} on {hw} ({fp}), ORT {ident.ort_version}, "
            f"{threads_text(ident.intra_op_threads, ident.inter_op_threads)}, {ident.opt_level} "
            f"optimization; trained {ident.trained_on} on {ident.n_models} models{adapted}{moved}; {held} "
            f"({ident.target}) ±10 % {ident.acc10 * 100:.0f} %, RMSPE {ident.rmspe:.1f} %; "
            f"{ident.source}: {ident.path}")


@dataclass(frozen=True)
class InstalledPredictor:
    """One predictor directory of the search roots: its identity and how this host differs from it, or, for a
    directory that cannot be read, the one-line reason (`identity` None)."""

    found: FoundPredictor
    identity: PredictorIdentity | None
    mismatches: tuple[str, ...] = ()
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, one flat object: where it was found, its identity, the host mismatches, the error (None)."""
        ident = self.identity.to_dict() if self.identity else {}
        return {**self.found.to_dict(), **ident, "host_mismatches": list(self.mismatches), "error": self.error or None}


def installed(predictors_dir: str | Path | None = None, host: HostInfo | None = None) -> list[InstalledPredictor]:
    """Every predictor in the search roots (user-trained and shipped, or those of `predictors_dir`), in lookup
    order, each verified and compared with this host (`host`, default `host_info()`)."""
    entries: list[tuple[FoundPredictor, PredictorIdentity | None, str]] = []
    for found in installed_predictors(predictors_dir):
        try:
            entries.append((found, predictor_identity(read_manifest(found.path), found), ""))
        except HaseError as exc:
            entries.append((found, None, str(exc)))
    if host is None:
        host = host_info(gpu=any(ident is not None and ident.is_cuda for _, ident, _ in entries))
    return [InstalledPredictor(found, ident, tuple(host_mismatches(ident, host)) if ident else (), error)
            for found, ident, error in entries]


@dataclass(frozen=True)
class UsedPredictor:
    """The predictor a prediction uses: the loaded bundle, what it is, and how this host differs from it."""

    bundle: PredictorBundle
    identity: PredictorIdentity
    mismatches: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready identity with the host mismatches (`predictor` of `hase predict --json`)."""
        return {**self.identity.to_dict(), "host_mismatches": list(self.mismatches)}


def open_predictor(device: str, predictors_dir: str | Path | None = None, target: str | None = None,
                   host: HostInfo | None = None) -> UsedPredictor:
    """Find `device`'s predictor (`hase.predict.locate.find_predictor`), load the target asked for (default: the
    predictor's default), and compare it with this host (`host`, default `host_info()`)."""
    found = find_predictor(device, predictors_dir)
    bundle = load_bundle(found.path, [target or "default"])
    ident = predictor_identity(bundle.manifest, found, bundle.target(target))
    host = host or host_info(gpu=ident.is_cuda)
    return UsedPredictor(bundle, ident, tuple(host_mismatches(ident, host)))
