"""`hase adapt`: a trained predictor moved to this host in minutes, from a small transfer set measured here.

Within a time budget: this host's speed signature (`hase.measure.signature`), then transfer models measured the
way collect measures a model (`hase.measure.model.measure_model`: robust latency, profiled node spans; for a
standalone target, each unique kernel as collect's kernel jobs do), one of every family first and then where the
source predictor is most wrong here (`next_family`), in `TRANSFER_PASSES` passes minutes apart: the first over
as many models as its share of the budget allows, each later one over the same models again; a model keeps its
quickest latency and each node its quickest target (`merge_passes`). One pass is not a truth on these VMs: on a
2-core Xeon VM a one-pass survey read its transfer models a median 11 % slow, a tenth of them 50 % or more, against
two passes hours later, and the adapted predictor followed; two passes there were a median 8.7 % apart, three 5.6 %
(second-quickest over quickest; docs/host.md, `hase adapt`). Then:

1. **A host map** (`hase.predict.host_map`): log(measured / predicted) of each kernel as a curve over the
   prediction's size plus an offset per forest (its op key's own forest, its family's, or the generic one),
   each shrunk by `shrink` pseudo-kernels; the adapted predictor carries it and applies it after its band clamp,
   so it predicts exactly as any other.
2. **Calibration.** On the measured full models (not the one-kernel sampled blocks): the source calibration
   rescaled by the median ratio, or refitted (its form, relative least squares) when there are enough models;
   the one with the lower leave-one-model-out RMSPE is kept; the source's weight streaming is kept with it.
3. **Written atomically** as `<device>@<this host's fingerprint digest>` in the user directory (or `out_root`),
   with this host's fingerprint and signature and an `adaptation` record (source, scales, calibration, in-sample
   scores before and after); `hase predict --device <device>` then picks it on this host. An interrupt leaves
   nothing behind.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hase import paths
from hase.errors import HaseError
from hase.kernels import graph, split
from hase.kernels.types import KernelSpec
from hase.measure.kernel import KernelJob, measure_kernel
from hase.measure.model import measure_model
from hase.measure.signature import DEFAULT_BUDGET_S, measure_signature
from hase.measure.types import MeasureSettings, ModelSource
from hase.predict.bundle import MOVED_FROM, PredictorBundle, load_bundle, manifest_ep_config, save_bundle
from hase.predict.calibration import Calibration, fit_calibration
from hase.predict.estimate import compose
from hase.predict.host_map import HostMap, fit_host_map, forest_label, label_sums
from hase.predict.locate import adapted_name, find_predictor
from hase.predict.manifest import CalibrationEntry
from hase.predict.metrics import Scores, score
from hase.predict.predictor import KernelPredictor, intensity
from hase.runtime.host import HostFingerprint, host_fingerprint
from hase.runtime.types import EPConfig

log = logging.getLogger(__name__)

TRANSFER_PASSES = 3  # passes over the transfer models; each model keeps its quickest
BUDGET_S = 300.0  # `hase adapt`'s default seconds of measuring; a survey measures its transfer set as long
SAMPLED = "sampled-"  # families of one-kernel blocks: kernels for the scales, never models for the calibration
RESERVE_S = 5.0  # kept back from the budget for fitting and writing
Progress = Callable[[str], None]


@dataclass(frozen=True)
class MeasuredModel:
    """A transfer model measured here: its latency, its nodes' kernels and each node's measured target (ms)."""

    name: str
    family: str
    latency_ms: float
    specs: tuple[KernelSpec, ...]
    target_ms: tuple[float, ...]  # NaN where a node was not measured
    pass_ms: tuple[float, ...] = ()  # each pass's latency (latency_ms is their minimum); () where not recorded

    @property
    def spread(self) -> float:
        """The latency's own noise: how much slower the second-quickest pass was (NaN with fewer than two)."""
        quick = sorted(self.pass_ms)
        return quick[1] / quick[0] - 1.0 if len(quick) > 1 else math.nan


@dataclass(frozen=True)
class AdaptResult:
    """What `adapt` wrote and how: the folder, its name, the source, the scales, the calibration, the scores."""

    out_dir: Path
    name: str
    source: Path
    target: str
    global_scale: float
    scales: dict[str, dict[str, float]]
    host_map: HostMap
    calibration_before: Calibration
    calibration_after: Calibration
    calibration_choice: str
    n_models: int
    n_kernels: int
    source_acc10: float
    source_rmspe: float
    adapted_acc10: float
    adapted_rmspe: float
    spent_s: float
    skipped: tuple[str, ...]
    transfer_spread: float = math.nan  # `transfer_noise`: the median pass-to-pass spread of the transfer models
    n_repeated: int = 0  # ... and how many were measured twice or more


@dataclass(frozen=True)
class Adaptation:
    """A source predictor fitted to measurements of another host, in memory: the scaled forests, the new
    calibration and how it was chosen, and the in-sample scores on the transfer models before and after."""

    predictor: KernelPredictor
    calibration: Calibration
    calibration_choice: str
    scales: dict[str, dict[str, float]]
    global_scale: float
    before: Scores  # of the source on the calibration models
    after: Scores  # ... and of the adapted predictor
    fit: dict[str, Any]  # recalibrate's fit data (model, family, sum_ms, n_kernels, measured_ms, adapted_ms)


def fit_adaptation(pred: KernelPredictor, cal: Calibration, measured: Sequence[MeasuredModel],
                   shrink: float = 5.0) -> Adaptation:
    """Scale `pred`'s forests to the measured transfer models and recalibrate (module docstring, steps 1-2)."""
    if not any(np.isfinite(m.target_ms).any() for m in measured):
        raise HaseError("no transfer model has a measured kernel: nothing to adapt to")
    adapted, scales, global_scale = scale_forests(pred, measured, shrink)
    new_cal, choice, fit = recalibrate(adapted, cal, measured)
    before = _model_scores(pred, cal, measured)
    after = score(fit["measured_ms"], fit["adapted_ms"])
    return Adaptation(adapted, new_cal, choice, scales, global_scale, before, after, fit)


def adapt(device: str, models: Sequence[ModelSource], budget_s: float = BUDGET_S, out_root: str | Path | None = None,
          predictors_dir: str | Path | None = None, *, settings: MeasureSettings | None = None, shrink: float = 5.0,
          progress: Progress | None = None, started: float | None = None) -> AdaptResult:
    """Adapt `device`'s predictor (never an earlier adaptation) to this host within `budget_s` seconds, measuring
    `models` in order, and write it; see the module docstring. The budget runs from `started` (perf_counter
    seconds; default now), so the caller's own preparation, e.g. building the transfer set, counts."""
    t0 = time.perf_counter() if started is None else started
    if budget_s < 30:
        raise HaseError(f"--budget-s {budget_s:g} is too short to measure anything worth adapting to: give 30 or more")
    found = find_predictor(device, predictors_dir, adapted=False)
    bundle = load_bundle(found.path)
    target = bundle.default_target
    ep = kernel_ep(bundle)
    settings = settings or MeasureSettings()
    say = progress or (lambda _msg: None)
    fp = host_fingerprint()
    say(f"speed signature of this host ({min(DEFAULT_BUDGET_S, budget_s / 10):.0f} s)")
    signature = measure_signature(ep, min(DEFAULT_BUDGET_S, budget_s / 10), fp.digest)
    pred = bundle.predictors[target]
    measured, skipped = measure_transfer(models, ep, target, settings, t0 + budget_s - RESERVE_S, say, pred)
    if not any(np.isfinite(m.target_ms).any() for m in measured):
        raise HaseError(f"no transfer model could be measured within {budget_s:g} s (skipped: "
                        f"{'; '.join(skipped[:3]) or 'none given'}): give a larger --budget-s or other models")
    return write_adaptation(found.path, bundle, measured, fp, signature.to_dict(), out_root, shrink=shrink,
                            budget_s=budget_s, skipped=skipped, t0=t0, say=say)


def write_adaptation(source: Path, bundle: PredictorBundle, measured: Sequence[MeasuredModel], fp: HostFingerprint,
                     signature: dict[str, Any] | None, out_root: str | Path | None, *, shrink: float = 5.0,
                     budget_s: float = 0.0, skipped: Sequence[str] = (), t0: float | None = None,
                     say: Progress | None = None, survey: str | None = None) -> AdaptResult:
    """Fit the bundle's default target to `measured` (made on the host `fp`) and write the adapted predictor as
    `<device>@<fp digest>`, whole or not at all (a threaded device keeps its thread model); `survey` names the
    survey file the measurements came from."""
    t0 = time.perf_counter() if t0 is None else t0
    say = say or (lambda _msg: None)
    target = bundle.default_target
    cal = bundle.manifest.target(target).calibration.calibration
    a = fit_adaptation(bundle.predictors[target], cal, measured, shrink)
    name = adapted_name(bundle.manifest.device, fp.digest)
    out = Path(out_root) if out_root is not None else paths.user_predictors_dir()
    record = {"source_path": str(source), "source_device": bundle.manifest.device,
              "source_created_at": bundle.manifest.created_at,
              "source_host": bundle.manifest.host.to_dict() if bundle.manifest.host is not None else None,
              "target": target, "kernel_threads": kernel_ep(bundle).intra_op_threads, "budget_s": budget_s,
              "spent_s": round(time.perf_counter() - t0, 1),
              "survey": survey, "global_scale": a.global_scale, "scales": a.scales, "shrink": shrink,
              "host_map": a.predictor.host_maps_[-1].to_dict(),
              "calibration": {"before": cal.to_dict(), "after": a.calibration.to_dict(),
                              "choice": a.calibration_choice},
              "scores": {"source": a.before.to_dict(), "adapted": a.after.to_dict()},
              "models": [{"model": m.name, "family": m.family, "latency_ms": m.latency_ms, "pass_ms": list(m.pass_ms)}
                         for m in measured],
              "skipped": list(skipped)}
    entry = bundle.manifest.target(target)
    fit_records = tuple({k: (v[i] if isinstance(v, list) else v) for k, v in a.fit.items()}
                        for i in range(len(a.fit["model"])))
    targets = {**bundle.manifest.targets,
               target: dataclasses.replace(entry, calibration=CalibrationEntry(a.calibration, fit_records))}
    manifest = dataclasses.replace(bundle.manifest, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), host=fp,
                                   signature=signature, adaptation=record, targets=targets, files={})
    say(f"writing {out / name}")
    out_dir = save_bundle(out / name, manifest, {target: a.predictor}, thread_model=bundle.thread_model())
    n_kernels = sum(int(np.isfinite(m.target_ms).sum()) for m in measured)
    noise, repeated = transfer_noise(measured)
    return AdaptResult(out_dir, name, source, target, a.global_scale, a.scales, a.predictor.host_maps_[-1], cal,
                       a.calibration, a.calibration_choice, len(measured), n_kernels, a.before.acc10, a.before.rmspe,
                       a.after.acc10, a.after.rmspe, time.perf_counter() - t0, tuple(skipped), noise, repeated)


def measure_transfer(models: Sequence[ModelSource], ep: EPConfig, target: str, settings: MeasureSettings,
                     deadline: float, say: Progress, pred: KernelPredictor | None = None,
                     passes: int = TRANSFER_PASSES) -> tuple[list[MeasuredModel], list[str]]:
    """Measure transfer models in `passes` passes until `deadline` (perf_counter seconds): the first pass gets its
    share of the time left (1/passes) for as many models as fit, each later pass revisits those models in the same
    order until the deadline, and every model keeps its passes merged (`merge_passes`). A model that fails is
    skipped with its reason, an interrupt goes through (nothing is written before the end).

    With the source predictor `pred`, the first pass's order follows its sensitivity to this host (`next_family`):
    one model of every family first, then always the family whose kernels' measured/predicted ratios stray furthest
    from the others', so a tight budget is spent where the forests are most wrong here. Without it, `models`' own
    order."""
    if passes < 1:
        raise HaseError(f"{passes} transfer passes measure nothing: give 1 or more")
    first_end = time.perf_counter() + (deadline - time.perf_counter()) / passes
    measured, sources, skipped = _first_pass(models, ep, target, settings, first_end, say, pred)
    for p in range(2, passes + 1):
        for i, src in enumerate(sources):
            if time.perf_counter() >= deadline:
                skipped.append(f"{len(sources) - i} model(s) measured in {p - 1} pass(es) only: the budget was spent")
                return measured, skipped
            say(f"transfer model {src.name}, pass {p}/{passes}")
            try:
                measured[i] = merge_passes(measured[i], measure_one(src, ep, target, settings))
            except Exception as exc:  # a later pass that fails leaves the model as the passes before measured it
                log.debug("%s failed in pass %d", src.name, p, exc_info=exc)
    return measured, skipped


def _first_pass(models: Sequence[ModelSource], ep: EPConfig, target: str, settings: MeasureSettings,
                deadline: float, say: Progress,
                pred: KernelPredictor | None) -> tuple[list[MeasuredModel], list[ModelSource], list[str]]:
    """`measure_transfer`'s first pass: the models measured, their sources and the skips."""
    queues: dict[str, list[ModelSource]] = {}
    for src in models:
        queues.setdefault(src.family if pred is not None else "", []).append(src)
    ratios: dict[str, list[float]] = {f: [] for f in queues}
    done: dict[str, int] = dict.fromkeys(queues, 0)
    measured: list[MeasuredModel] = []
    sources: list[ModelSource] = []
    skipped: list[str] = []
    total = len(models)
    for i in range(total):
        if time.perf_counter() >= deadline:
            skipped.append(f"{total - i} model(s) left unmeasured: the budget was spent")
            break
        family = next_family({f: q for f, q in queues.items() if q}, ratios, done)
        src = queues[family].pop(0)
        done[family] += 1
        say(f"transfer model {i + 1}/{total}: {src.name}")
        try:
            m = measure_one(src, ep, target, settings)
        except Exception as exc:  # any failure of one model is a skip; interrupts go through
            log.debug("%s failed", src.name, exc_info=exc)
            skipped.append(f"{src.name}: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}")
            continue
        measured.append(m)
        sources.append(src)
        if pred is not None:
            ratios[family].extend(kernel_log_ratios(pred, m))
    return measured, sources, skipped


def transfer_noise(measured: Sequence[MeasuredModel]) -> tuple[float, int]:
    """The transfer truth's own noise: the median `spread` over the models measured twice or more, and their count
    (NaN and 0 when none was)."""
    spreads = [m.spread for m in measured if math.isfinite(m.spread)]
    return (float(np.median(spreads)) if spreads else math.nan), len(spreads)


def noise_text(spread: float, repeated: int) -> str:
    """The transfer truth's noise (`transfer_noise`) in words."""
    if not repeated:
        return "no transfer model was measured more than once, so their noise is unknown"
    return f"{repeated} measured more than once, the second-quickest pass a median {spread:.1%} above the quickest"


def merge_passes(a: MeasuredModel, b: MeasuredModel) -> MeasuredModel:
    """Two passes over one transfer model as one: the quickest latency, each node's quickest target (host load only
    ever slows a pass down), every pass's latency kept. The kernel graphs must agree node for node."""
    if [s.kernel_id for s in a.specs] != [s.kernel_id for s in b.specs]:
        raise HaseError(f"transfer model {a.name}: its passes built different kernel graphs: measure it again")
    targets = tuple(min((v for v in (x, y) if math.isfinite(v)), default=math.nan)
                    for x, y in zip(a.target_ms, b.target_ms, strict=True))
    passes = (*(a.pass_ms or (a.latency_ms,)), *(b.pass_ms or (b.latency_ms,)))
    return dataclasses.replace(a, latency_ms=min(passes), target_ms=targets, pass_ms=passes)


def kernel_log_ratios(pred: KernelPredictor, m: MeasuredModel) -> list[float]:
    """log(measured / predicted) of each measured kernel of a transfer model."""
    uniq = {s.kernel_id: s for s in m.specs}
    p_of = dict(zip(uniq, pred.predict_routes(list(uniq.values()), 1)[2], strict=True))
    return [math.log(y / float(p_of[s.kernel_id])) for s, y in zip(m.specs, m.target_ms, strict=True)
            if math.isfinite(y) and y > 0 and float(p_of[s.kernel_id]) > 0]


def next_family(queues: Mapping[str, Sequence[ModelSource]], ratios: Mapping[str, Sequence[float]],
                done: Mapping[str, int]) -> str:
    """The family to measure next: the first (in queue order) not measured yet; else the one whose kernels'
    log ratios stray furthest from all the others' (distance of the medians plus the family's own spread), damped
    by the square root of the models measured of it, so a family measured often yields to one less certain."""
    fresh = [f for f in queues if done.get(f, 0) == 0]
    if fresh:
        return fresh[0]
    pooled = [r for f in ratios for r in ratios[f]]
    centre = float(np.median(pooled)) if pooled else 0.0

    def sensitivity(f: str) -> float:
        r = np.asarray(ratios.get(f, ()), dtype=float)
        if r.size == 0:
            return math.inf  # measured, but no kernel came back: try it again before the known ones
        return (abs(float(np.median(r)) - centre) + float(np.std(r))) / math.sqrt(done[f])

    return max(queues, key=sensitivity)


def kernel_ep(bundle: PredictorBundle) -> EPConfig:
    """The configuration a predictor's kernels are measured in to adapt it: its own, or one thread for a one-thread
    predictor moved to threads (`hase.predict.threaded`), whose forests are one-thread forests and whose thread
    count is the thread model's business (this host's own from `hase host threads`, else a shipped one)."""
    ep = manifest_ep_config(bundle.manifest)
    if bundle.moved_threads() is not None:
        return dataclasses.replace(ep, name=str(bundle.manifest.threads.get(MOVED_FROM, ep.name)), intra_op_threads=1)
    return ep


def measure_one(src: ModelSource, ep: EPConfig, target: str, settings: MeasureSettings) -> MeasuredModel:
    """One transfer model: split, measured as collect does, each node's `target` (span, warm or cold) in ms."""
    model = graph.load_model(src.path)
    kg = graph.kernel_graph(model, ep)
    nodes = split.split(kg)
    row, spans = measure_model(model, src, nodes, ep, settings)
    if target == "span":
        by_node = {r["node_name"]: r.get("span_ms") for r in spans}
        values = [by_node.get(n.node_name) for n in nodes]
    else:
        variant = "warm" if target == "warm" else "cold_weights"
        per_kernel: dict[str, float] = {}
        for kn in split.unique_kernels(nodes).values():
            job = KernelJob(kn.spec, split.kernel_model(kg, kg.nodes[kn.node_idx]).SerializeToString())
            rows = measure_kernel(job, ep, settings)
            per_kernel[kn.spec.kernel_id] = next(float(r["median_ms"]) for r in rows if r["variant"] == variant)
        values = [per_kernel.get(n.spec.kernel_id) for n in nodes]
    latency = row.get("latency_ms") or row["median_ms"]
    return MeasuredModel(src.name, src.family, float(latency), tuple(n.spec for n in nodes),
                         tuple(float(v) if v is not None and v > 0 else math.nan for v in values), (float(latency),))


def scale_forests(pred: KernelPredictor, measured: Sequence[MeasuredModel],
                  shrink: float) -> tuple[KernelPredictor, dict[str, dict[str, float]], float]:
    """A copy of `pred` that carries one more host map (`hase.predict.host_map`), fitted to the measured kernels:
    returns it, each forest's record (its offset's scale once the size curve is applied, its raw measured/predicted
    ratio, its kernel count) and the global ratio of summed measured to summed predicted times."""
    labels: list[str] = []
    p: list[float] = []
    y: list[float] = []
    specs: list[KernelSpec] = []
    for m in measured:
        uniq = {s.kernel_id: s for s in m.specs}
        p_of = dict(zip(uniq, pred.predict_routes(list(uniq.values()), 1)[2], strict=True))
        for spec, t in zip(m.specs, m.target_ms, strict=True):
            if math.isfinite(t):
                key, source, member = pred.route(spec)
                labels.append(forest_label(key, source, member.family))
                p.append(float(p_of[spec.kernel_id]))
                y.append(t)
                specs.append(spec)
    hmap = fit_host_map(labels, p, y, shrink, intensity=intensity(specs))
    scales = {label: {"scale": round(math.exp(hmap.offsets[label]), 5),
                      "measured_ratio": round(ys / max(ps, 1e-12), 5), "n": n}
              for label, ys, ps, n in label_sums(labels, y, p)}
    meta, arrays = pred.to_arrays()
    out = KernelPredictor.from_arrays(meta, arrays)
    out.host_maps_ = (*pred.host_maps_, hmap)
    return out, scales, round(sum(y) / sum(p), 5)


def recalibrate(pred: KernelPredictor, cal: Calibration,
                measured: Sequence[MeasuredModel]) -> tuple[Calibration, str, dict[str, Any]]:
    """The calibration of the adapted predictor on the measured full models (module docstring), which candidate won,
    and the fit data (model, family, sum_ms, n_kernels, measured_ms, adapted_ms)."""
    full = [m for m in measured if not m.family.startswith(SAMPLED)] or list(measured)
    stream = Calibration(kappa=cal.kappa, stream_power=cal.stream_power)  # the sums the calibration is applied to
    sums = np.array([compose(list(m.specs), pred, stream).sum_ms for m in full])
    n = np.array([len(m.specs) for m in full], dtype=float)
    y = np.array([m.latency_ms for m in full])
    form = cal.form if cal.form != "raw" else "scale"

    def rescaled(idx: np.ndarray) -> Calibration:
        c = float(np.exp(np.median(np.log(y[idx] / cal.apply(sums[idx], n[idx]))))) if len(idx) else 1.0
        return cal.scaled(c)

    def refit(idx: np.ndarray) -> Calibration:  # the source's weight streaming kept: the sums include it
        return dataclasses.replace(fit_calibration(sums[idx], n[idx], y[idx], form, "relative"),
                                   kappa=cal.kappa, stream_power=cal.stream_power)

    candidates: dict[str, Callable[[np.ndarray], Calibration]] = {"rescaled": rescaled}
    if len(full) >= {"scale": 3, "per_kernel": 4}.get(form, 5) + 2:
        candidates["refitted"] = refit
    loo = {name: _loo_rmspe(fn, sums, n, y) for name, fn in candidates.items()}
    choice = min(loo, key=lambda k: loo[k])
    final = candidates[choice](np.arange(len(full)))
    fit = {"model": [m.name for m in full], "family": [m.family for m in full], "sum_ms": sums.round(6).tolist(),
           "n_kernels": n.tolist(), "measured_ms": y.round(6).tolist(),
           "adapted_ms": final.apply(sums, n).round(6).tolist()}
    return final, choice, fit


def _loo_rmspe(fit: Callable[[np.ndarray], Calibration], sums: np.ndarray, n: np.ndarray, y: np.ndarray) -> float:
    """RMSPE (%) of a calibration fitted without each model in turn, on that model."""
    if len(y) < 2:
        return 0.0
    errs = []
    for j in range(len(y)):
        idx = np.array([i for i in range(len(y)) if i != j])
        yhat = float(fit(idx).apply(sums[j:j + 1], n[j:j + 1])[0])
        errs.append((yhat - y[j]) / y[j])
    return float(np.sqrt(np.mean(np.square(errs))) * 100)


def _model_scores(pred: KernelPredictor, cal: Calibration, measured: Sequence[MeasuredModel]) -> Scores:
    """Scores of the source predictor on the calibration models (the full ones, as `recalibrate` picks them)."""
    full = [m for m in measured if not m.family.startswith(SAMPLED)] or list(measured)
    yhat = [compose(list(m.specs), pred, cal).latency_ms for m in full]
    return score([m.latency_ms for m in full], yhat)


def source_bundle(device: str, predictors_dir: str | Path | None = None) -> PredictorBundle:
    """The predictor `adapt` starts from: the device's own, never an adaptation."""
    return load_bundle(find_predictor(device, predictors_dir, adapted=False).path)
