"""A host survey: this host measured once, in one small file, so a predictor can be moved to it (`hase adapt
--survey`) and judged on it (`benchmarks/cross_host.py`) later and anywhere, without measuring again.

Per device configuration (a shipped predictor's: its EP, threads, optimization level and target), a survey holds
the host's fingerprint and speed signature, the transfer set measured as `hase adapt` measures it (in passes
minutes apart: each model's quickest latency and every pass's, each node's quickest target), and real models
timed in interleaved passes (the quickest pass is the truth, the gap to the second quickest its own noise, every
pass kept). Every model carries its kernel graph *as ORT built it on the surveyed host* (kernel specs, shared in
one table), since fusions and NCHWc blocking follow the host's ISA: a predictor judged on the survey predicts the
graph the surveyed host runs, wherever the judging happens.

The file is gzip'd JSON (`FORMAT`), written atomically; `load_survey` checks it and names what is wrong.
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError
from hase.files import file_sha256, write_atomic
from hase.kernels import graph, split
from hase.kernels.types import KernelSpec
from hase.measure.model import time_model
from hase.measure.signature import DEFAULT_BUDGET_S, measure_signature
from hase.measure.types import MeasureSettings, ModelSource
from hase.predict.adapt import (
    BUDGET_S,
    TRANSFER_PASSES,
    Adaptation,
    AdaptResult,
    MeasuredModel,
    fit_adaptation,
    kernel_ep,
    measure_transfer,
    write_adaptation,
)
from hase.predict.bundle import MOVED_FROM, PredictorBundle, load_bundle, manifest_ep_config
from hase.predict.calibration import Calibration
from hase.predict.estimate import compose
from hase.predict.locate import find_predictor
from hase.predict.predictor import KernelPredictor
from hase.predict.threads import ThreadModel
from hase.runtime.host import HostFingerprint, host_fingerprint, others_cpu_s
from hase.version import __version__

FORMAT = 3  # 3 (2026-12-07): every transfer pass's latency (`pass_ms`); 2: one kernel table for every device
FORMATS = (1, 2, 3)  # configuration; 1: a table per configuration. What `load_survey` reads: all three
DEFAULT_DEVICES = ("cpu-1t", "cpu-mt")
# seconds of transfer measurements per device configuration: what `hase adapt` measures by default. At 150 s the
# survey of 248e36c95a80 reached only the smallest transfer models (127, median 0.6 ms) and adapted the shipped
# `cpu-1t` to 29-34 % within ±10 % on `dev16` there; at 300 s (224-226 models) to 63-74 %, the live `hase adapt`'s 61 %
DEFAULT_TRANSFER_S = BUDGET_S
REAL_PASSES = 5  # passes over the real models; their latency is the quickest, the next quickest's gap its noise
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RealModel:
    """A real model timed on the surveyed host: its file's sha256 (the same model on every host), its nodes'
    kernels, and each pass's latency (ms; the minimum of the block medians of `hase.runtime.robust`)."""

    name: str
    sha256: str
    kernel_ids: tuple[str, ...]
    pass_ms: tuple[float, ...]
    n_runs: int

    @property
    def latency_ms(self) -> float:
        """The truth: the quickest pass (host load only ever slows a pass down)."""
        return min(self.pass_ms)

    @property
    def spread(self) -> float:
        """The truth's own noise: how much slower the second-quickest pass was than the quickest (a truth that
        two passes agree on; host load makes one pass slow, not two). Every pass is kept beside it."""
        quick = sorted(self.pass_ms)
        return quick[1] / quick[0] - 1.0 if len(quick) > 1 else math.nan

    @property
    def full_spread(self) -> float:
        """Spread over every pass, (max - min) / min."""
        return max(self.pass_ms) / min(self.pass_ms) - 1.0


@dataclass(frozen=True)
class DeviceSurvey:
    """One device configuration surveyed: its settings, target, signature, transfer set and real models."""

    device: str
    intra_op_threads: int
    opt_level: str
    target: str
    signature: dict[str, Any]
    kernels: dict[str, KernelSpec]
    transfer: tuple[MeasuredModel, ...]
    real: tuple[RealModel, ...]
    transfer_s: float
    skipped: tuple[str, ...]
    others_cores: float = math.nan  # cores other processes kept busy while this was measured (NaN: unknown)

    def specs(self, m: RealModel) -> list[KernelSpec]:
        """A real model's kernel graph, node by node."""
        return [self.kernels[k] for k in m.kernel_ids]


@dataclass(frozen=True)
class Survey:
    """A host surveyed: its fingerprint, when, by which Hase, and each device configuration's measurements."""

    host: HostFingerprint
    created_at: str
    hase_version: str
    devices: dict[str, DeviceSurvey]

    @property
    def digest(self) -> str:
        """The surveyed host's fingerprint digest."""
        return self.host.digest

    def device(self, name: str, where: str = "survey") -> DeviceSurvey:
        """One device configuration's survey; a HaseError listing the surveyed ones if it is missing."""
        if name not in self.devices:
            raise HaseError(f"{where} has no device configuration {name!r} (it has {', '.join(self.devices)}): "
                            f"survey it with `hase host survey --device {name}`")
        return self.devices[name]




def survey_host(devices: Sequence[str], transfer: Sequence[ModelSource], real: Sequence[ModelSource], *,
                transfer_s: float = DEFAULT_TRANSFER_S, passes: int = REAL_PASSES,
                transfer_passes: int = TRANSFER_PASSES,
                signature_s: float = DEFAULT_BUDGET_S,
                predictors_dir: str | Path | None = None, settings: MeasureSettings | None = None,
                progress: Progress | None = None) -> Survey:
    """Measure this host for each device configuration (a predictor of that name must exist: its EP settings and
    target are the ones surveyed): signature, transfer set for `transfer_s` seconds in `transfer_passes`, real models
    in `passes`."""
    if not devices:
        raise HaseError("no device configuration to survey: give --device (e.g. cpu-1t)")
    if passes < 2:
        raise HaseError(f"{passes} pass(es) over the real models cannot show their noise: give 2 or more")
    settings = settings or MeasureSettings()
    say = progress or (lambda _msg: None)
    fp = host_fingerprint()
    out: dict[str, DeviceSurvey] = {}
    for device in devices:
        bundle = load_bundle(find_predictor(device, predictors_dir, adapted=False).path)
        ep = manifest_ep_config(bundle.manifest)
        others0, wall0 = others_cpu_s(), time.perf_counter()
        say(f"{device}: speed signature ({signature_s:g} s)")
        signature = measure_signature(ep, signature_s, fp.digest).to_dict()
        t0 = time.perf_counter()
        measured, skipped = measure_transfer(transfer, ep, bundle.default_target, settings, t0 + transfer_s,
                                             _prefixed(say, device), passes=transfer_passes)
        spent = time.perf_counter() - t0
        kernels = {s.kernel_id: s for m in measured for s in m.specs}
        reals, real_skipped = _time_real(real, ep, settings, passes, kernels, _prefixed(say, device))
        others1 = others_cpu_s()
        others = (others1 - others0) / (time.perf_counter() - wall0) if others0 is not None and others1 else math.nan
        out[device] = DeviceSurvey(device, ep.intra_op_threads, ep.opt_level, bundle.default_target, signature,
                                   kernels, tuple(measured), tuple(reals), round(spent, 1),
                                   tuple(skipped + real_skipped), round(others, 3))
    return Survey(fp, time.strftime("%Y-%m-%dT%H:%M:%S%z"), __version__, out)


def _prefixed(say: Progress, prefix: str) -> Progress:
    return lambda msg: say(f"{prefix}: {msg}")


def _time_real(real: Sequence[ModelSource], ep: Any, settings: MeasureSettings, passes: int,
               kernels: dict[str, KernelSpec], say: Progress) -> tuple[list[RealModel], list[str]]:
    """Real models: kernel graph once, then `passes` interleaved passes of robust timing (a pass visits every model
    before the next begins, so a burst of host load lands on one pass of many models, not every pass of one)."""
    graphs: dict[str, tuple[Any, tuple[str, ...], str]] = {}
    skipped: list[str] = []
    for src in real:
        try:
            model = graph.load_model(src.path)
            nodes = split.split(graph.kernel_graph(model, ep))
        except Exception as exc:  # a model this host cannot run is reported, the others go on
            skipped.append(f"{src.name}: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}")
            continue
        for n in nodes:
            kernels.setdefault(n.spec.kernel_id, n.spec)
        graphs[src.name] = (model, tuple(n.spec.kernel_id for n in nodes), file_sha256(src.path))
    times: dict[str, list[float]] = {name: [] for name in graphs}
    runs: dict[str, int] = dict.fromkeys(graphs, 0)
    for p in range(passes):
        for name, (model, _, _) in graphs.items():
            say(f"real model {name}, pass {p + 1}/{passes}")
            timing, _api = time_model(model, ep, settings)
            times[name].append(float(timing.latency_ms))
            runs[name] += int(timing.n_runs)
    reals = [RealModel(name, sha, ids, tuple(times[name]), runs[name]) for name, (_, ids, sha) in graphs.items()]
    return reals, skipped


def survey_dict(s: Survey) -> dict[str, Any]:
    """The survey as JSON-ready data (`FORMAT`): the kernel specs once, in one table every configuration's models
    name (the kernel graph does not depend on the thread count: a `cpu-mt` survey's kernels are the `cpu-1t` ones)."""
    kernels = {k: json.loads(spec.to_json()) for d in s.devices.values() for k, spec in d.kernels.items()}
    return {"format": FORMAT, "host": s.host.to_dict(), "digest": s.digest, "created_at": s.created_at,
            "hase_version": s.hase_version, "kernels": kernels,
            "devices": {name: _device_dict(d) for name, d in s.devices.items()}}


def _device_dict(d: DeviceSurvey) -> dict[str, Any]:
    return {"device": d.device, "intra_op_threads": d.intra_op_threads, "opt_level": d.opt_level,
            "target": d.target, "signature": d.signature, "transfer_s": d.transfer_s, "skipped": list(d.skipped),
            "others_cores": d.others_cores if math.isfinite(d.others_cores) else None,
            "transfer": [{"name": m.name, "family": m.family, "latency_ms": m.latency_ms, "pass_ms": list(m.pass_ms),
                          "kernel_ids": [s.kernel_id for s in m.specs],
                          "target_ms": [v if math.isfinite(v) else None for v in m.target_ms]} for m in d.transfer],
            "real": [{"name": m.name, "sha256": m.sha256, "kernel_ids": list(m.kernel_ids), "pass_ms": list(m.pass_ms),
                      "n_runs": m.n_runs} for m in d.real]}


def save_survey(s: Survey, path: str | Path) -> Path:
    """Write the survey as gzip'd JSON, whole or not at all."""
    text = json.dumps(survey_dict(s), separators=(",", ":"), sort_keys=True)
    return write_atomic(path, gzip.compress(text.encode(), mtime=0))


def load_survey(path: str | Path) -> Survey:
    """Read a survey `save_survey` wrote; a missing, unreadable or malformed file is a HaseError naming it."""
    p = Path(path)
    try:
        d = json.loads(gzip.decompress(p.read_bytes()))
    except FileNotFoundError:
        raise HaseError(f"survey {p} does not exist: give the file `hase host survey` wrote") from None
    except (OSError, EOFError, ValueError) as exc:
        raise HaseError(f"survey {p} is not a gzip'd JSON survey ({exc}): give the file `hase host survey` "
                        f"wrote") from None
    if not isinstance(d, dict) or d.get("format") not in FORMATS:
        raise HaseError(f"survey {p} has format {d.get('format') if isinstance(d, dict) else None!r}, this Hase "
                        f"reads {' and '.join(map(str, FORMATS))}: survey the host again with this version")
    try:
        shared = d["kernels"] if d["format"] >= 2 else None
        devices = {name: _device_from(v, shared) for name, v in d["devices"].items()}
        return Survey(HostFingerprint.from_dict(d["host"], f"survey {p}"), str(d["created_at"]),
                      str(d["hase_version"]), devices)
    except (KeyError, TypeError, ValueError) as exc:
        raise HaseError(f"survey {p} is malformed ({type(exc).__name__}: {exc}): survey the host again") from None


def _device_from(d: Mapping[str, Any], shared: Mapping[str, Any] | None = None) -> DeviceSurvey:
    """One configuration's survey; its kernels from the survey's one table (`shared`, format 2), only those its
    models name, or from its own (format 1)."""
    if shared is None:
        kernels = {k: KernelSpec.from_json(json.dumps(v)) for k, v in d["kernels"].items()}
    else:
        named = {k for m in (*d["transfer"], *d["real"]) for k in m["kernel_ids"]}
        kernels = {k: KernelSpec.from_json(json.dumps(shared[k])) for k in sorted(named)}
    transfer = tuple(MeasuredModel(m["name"], m["family"], float(m["latency_ms"]),
                                   tuple(kernels[k] for k in m["kernel_ids"]),
                                   tuple(math.nan if v is None else float(v) for v in m["target_ms"]),
                                   tuple(float(v) for v in m.get("pass_ms", (m["latency_ms"],))))
                     for m in d["transfer"])
    real = tuple(RealModel(m["name"], m["sha256"], tuple(m["kernel_ids"]), tuple(float(v) for v in m["pass_ms"]),
                           int(m["n_runs"])) for m in d["real"])
    for m in real:
        missing = [k for k in m.kernel_ids if k not in kernels]
        if missing:
            raise KeyError(f"real model {m.name} names kernel {missing[0]} the survey lacks")
    return DeviceSurvey(str(d["device"]), int(d["intra_op_threads"]), str(d["opt_level"]), str(d["target"]),
                        dict(d["signature"]), kernels, transfer, real, float(d["transfer_s"]),
                        tuple(d["skipped"]), math.nan if d.get("others_cores") is None else float(d["others_cores"]))


def kernel_device(bundle: PredictorBundle, survey: Survey, where: str) -> DeviceSurvey:
    """The survey's device whose transfer kernels adapt `bundle`: its own device, or for a one-thread predictor
    moved to threads (`hase.predict.threaded`) the device of its one-thread source (`moved_from`)."""
    name = str(bundle.manifest.threads.get(MOVED_FROM, bundle.device))
    d = survey.device(name, where)
    check_matches(bundle, d, where)
    return d


def check_matches(bundle: PredictorBundle, d: DeviceSurvey, where: str) -> None:
    """A survey's device configuration must be measured as the predictor's kernels were: same threads (one, for a
    threaded device), level and target."""
    ep = kernel_ep(bundle)
    theirs = (d.intra_op_threads, d.opt_level, d.target)
    ours = (ep.intra_op_threads, ep.opt_level, bundle.default_target)
    if theirs != ours:
        raise HaseError(f"{where} measured {d.device} with {theirs[0]} intra-op thread(s), level {theirs[1]!r}, target "
                        f"{theirs[2]!r}, but the predictor uses {ours[0]}, {ours[1]!r}, {ours[2]!r}: survey the host "
                        f"again with this predictor")


def adapt_in_memory(bundle: PredictorBundle, d: DeviceSurvey, shrink: float = 5.0) -> Adaptation:
    """The bundle's default target fitted to a surveyed host's transfer measurements, nothing written (`d`: the
    device of `kernel_device`)."""
    target = bundle.default_target
    return fit_adaptation(bundle.predictors[target], bundle.manifest.target(target).calibration.calibration,
                          d.transfer, shrink)


def adapt_from_survey(device: str, survey: Survey, survey_path: str | Path, out_root: str | Path | None = None,
                      predictors_dir: str | Path | None = None) -> AdaptResult:
    """`hase adapt --survey`: the device's predictor (never an adaptation) adapted to the surveyed host from the
    survey's measurements, written as `<device>@<surveyed host's digest>` (picked by `hase predict` on that host)."""
    found = find_predictor(device, predictors_dir, adapted=False)
    bundle = load_bundle(found.path)
    d = kernel_device(bundle, survey, f"survey {survey_path}")
    return write_adaptation(found.path, bundle, d.transfer, survey.host, d.signature, out_root,
                            budget_s=d.transfer_s, skipped=d.skipped, survey=str(survey_path))


def real_predictions(predictor: KernelPredictor, calibration: Calibration, d: DeviceSurvey,
                     threads: tuple[ThreadModel, int] | None = None) -> list[dict[str, Any]]:
    """Each real model of a surveyed device: measured (its quickest pass) against predicted, with the truth's noise;
    with `threads` (a thread model and a count), one-thread forests' node times moved to that count first (a
    threaded device, `hase.predict.threaded`). Rows: model, sha256, measured_ms, predicted_ms, error_pct,
    truth_spread, n_runs."""
    rows = []
    for m in d.real:
        specs = d.specs(m)
        move = None
        if threads is not None:
            model, count = threads
            move = functools.partial(model.predict, specs, threads=count)
        pred = compose(specs, predictor, calibration, move=move).latency_ms
        rows.append({"model": m.name, "sha256": m.sha256, "measured_ms": m.latency_ms, "predicted_ms": pred,
                     "error_pct": (pred / m.latency_ms - 1.0) * 100.0, "truth_spread": m.spread,
                     "n_runs": m.n_runs})
    return rows
