"""Benchmark: does a predictor trained on measurements taken under load stay within noise of a quiet one?

Issue 8, item 4: the canary flags (or waits out) jobs measured on a busy host, and training drops or down-weights
them (`[training] busy` in configs/predictor.toml, `hase/predict/trust.py`). This shows what that is worth:

1. Collect a small zoo (`benchmarks/zoo_loaded.toml`, five families) on `cpu-1t` twice, into two scratch stores
   under /tmp, with this process pinned to one core: once **quiet**, once **loaded** -- a busy-loop process
   pinned to the same core, off for `--off-s` seconds (so the canary's reference, taken at collect start, is
   quiet), then spinning for `--on-s` seconds, and so on (`--load steady`: spinning from `--off-s` on, never
   stopping). The canary's work is counted: checks, waits for a busy host (jobs deferred until it was quiet
   again), jobs flagged host_busy, noisy models.
2. Measure the held-out real models (`--models` folders: the vendored and shared exported models; `--devset`:
   `--devset-limit` models of a development set, spread over its sorted names) quietly, on the same core, the robust way
   (minimum of block medians; the spread between blocks is the noise reference).
3. Train a predictor from each store with configs/predictor.toml (the loaded store also with `busy = "keep"`,
   i.e. ignoring the flags, unless `--no-keep`), predict every held-out model with each, and print within
   ±10 % / RMSPE for each predictor, and per model the ratio loaded / quiet of the predictions.

Only ever run as a whole: the figures depend on the machine's own noise too (other tenants), so quote them with
the date, the machine and the command. `--quick` (about two minutes) is a smoke test: two models per family,
small forests, the shared exported models only.

Usage: python benchmarks/bench_loaded_train.py [--quick] [--load burst|steady] [--on-s 12] [--off-s 8] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from figures import print_figures

from hase import paths
from hase.errors import HaseError
from hase.measure import collect as coll
from hase.measure.model import measure_latency
from hase.measure.store import Store
from hase.measure.types import ModelSource
from hase.predict.bundle import load_bundle
from hase.predict.estimate import estimate_model
from hase.predict.metrics import score
from hase.predict.train import load_train_config, train
from hase.runtime import sessions
from hase.runtime.robust import BlockPolicy, RobustTiming
from hase.runtime.types import EPConfig, TimingPolicy
from hase.sampler.config import read_zoo

REPO = Path(__file__).resolve().parents[1]
ZOO = REPO / "benchmarks" / "zoo_loaded.toml"
MODEL_DIRS = (REPO / "tests" / "data" / "models", REPO.parent / "shared" / "models" / "exported")
DEVSET = Path("/tmp/devset_out")
DEVICE = "cpu-1t"


def say(msg: str) -> None:
    """A progress line on stderr (stdout keeps the figures)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def busy_loop(core: int, on_s: float, off_s: float) -> Iterator[None]:
    """A process pinned to `core`: idle `off_s` seconds, then spinning `on_s` seconds, over and over."""
    code = (f"import os, time\nos.sched_setaffinity(0, {{{core}}})\nwhile True:\n    time.sleep({off_s!r})\n"
            f"    end = time.perf_counter() + {on_s!r}\n    while time.perf_counter() < end:\n        pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def pinned(core: int) -> Iterator[None]:
    """This process on `core` only, for the block (collect and ground truth; training uses every core)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def zoo_models(args: argparse.Namespace, zoo_dir: Path) -> list[ModelSource]:
    """The zoo's models, the first `--per-family` of each family."""
    seen: dict[str, int] = {}
    out = []
    for src in coll.zoo_sources(read_zoo(args.zoo), zoo_dir):
        seen[src.family] = seen.get(src.family, 0) + 1
        if not args.per_family or seen[src.family] <= args.per_family:
            out.append(src)
    return out


def collect_store(label: str, sources: list[ModelSource], cfg: coll.CollectConfig, store_path: Path,
                  load: contextlib.AbstractContextManager[None]) -> dict[str, Any]:
    """One collect into a fresh store under `load`; the canary's and the store's counts."""
    say(f"collect {label}: {len(sources)} models into {store_path}")
    with load, Store(store_path) as store:
        report = coll.collect(sources, cfg, store)
        mm, km = store.table("model_measurements"), store.table("kernel_measurements")
    wait_s = cfg.settings.canary.wait_s
    return {f"{label}_collect_wall_s": round(report.wall_s, 1), f"{label}_kernels": report.kernels_measured,
            f"{label}_canary_checks": report.canary_checks,
            f"{label}_canary_waits": round(report.canary_wait_s / wait_s) if wait_s else 0,
            f"{label}_jobs_flagged_busy": len(report.busy_jobs),
            f"{label}_kernel_rows_busy": int(km["host_busy"].fillna(0).sum()),
            f"{label}_models_busy": int(mm["host_busy"].fillna(0).sum()),
            f"{label}_models_noisy": int(mm["noisy"].fillna(0).sum())}


def held_out_models(args: argparse.Namespace) -> list[Path]:
    """The held-out real models: every .onnx of `--models` folders (by name, once), then the devset's first few."""
    found: dict[str, Path] = {}
    for d in args.models:
        for p in sorted(Path(d).glob("*.onnx")):
            found.setdefault(p.stem, p)
    if args.devset_limit and Path(args.devset).is_dir():
        devset = sorted(Path(args.devset).glob("*.onnx"))
        for p in devset[:: max(1, len(devset) // args.devset_limit)][: args.devset_limit]:  # spread over the names
            found.setdefault(p.stem, p)
    return list(found.values())


def ground_truth(models: list[Path], ep: EPConfig, policy: BlockPolicy) -> dict[str, RobustTiming]:
    """Each model measured the robust way (static shapes only: a symbolic one is left out, with its reason)."""
    out = {}
    for path in models:
        try:
            out[path.stem] = measure_latency(path, ep, policy=policy)
        except HaseError as exc:
            say(f"left out {path.name}: {exc}")
    return out


def train_one(store: Path, out: Path, args: argparse.Namespace, **overrides: Any) -> tuple[Path, dict[str, Any]]:
    """Train `cpu-1t` from a store; the predictor's directory and the manifest's record of busy rows."""
    if args.quick:
        overrides = {"tree_scale": 0.3, "cv_tree_scale": 0.3, **overrides}
    res = train(store, out, load_train_config(args.config, **overrides), DEVICE)
    return res.out_dir, dict(res.manifest.training_data.busy)


def predictions(pred_dir: Path, models: list[str], paths_by_name: dict[str, Path]) -> np.ndarray:
    """Each model's predicted latency (NaN, with a line on stderr, where Hase cannot predict it)."""
    bundle = load_bundle(pred_dir)
    out = []
    for m in models:
        try:
            out.append(estimate_model(paths_by_name[m], bundle).latency_ms)
        except HaseError as exc:
            say(f"{pred_dir.name} cannot predict {m}: {exc}")
            out.append(float("nan"))
    return np.array(out)


def busy_figures(label: str, busy: dict[str, Any]) -> dict[str, Any]:
    kernels = busy.get("kernels", {})
    return {f"{label}_train_policy": busy.get("policy"),
            f"{label}_train_models_weighted": busy.get("models", {}).get("weighted"),
            f"{label}_train_kernel_rows_dropped": sum(c["dropped"] for c in kernels.values()),
            f"{label}_train_kernel_rows_weighted": sum(c["weighted"] for c in kernels.values())}


def run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cfg = coll.load_collect_config(args.devices, [DEVICE])
    ep = cfg.devices[0]
    core = max(os.sched_getaffinity(0))
    sources = zoo_models(args, work / "zoo")
    held = held_out_models(args)
    figures: dict[str, Any] = {"zoo_models": len(sources), "pinned_core": core, "load": args.load,
                               "load_on_s": args.on_s, "load_off_s": args.off_s, "quick": args.quick}
    on_s = 1e9 if args.load == "steady" else args.on_s
    with pinned(core):
        figures.update(collect_store("quiet", sources, cfg, work / "quiet.sqlite", contextlib.nullcontext()))
        figures.update(collect_store("loaded", sources, cfg, work / "loaded.sqlite", busy_loop(core, on_s, args.off_s)))
        say(f"ground truth: {len(held)} held-out models, quiet, the robust way")
        truth = ground_truth(held, ep, BlockPolicy(warmup=3, blocks=args.blocks, noise_bound=cfg.settings.noise_bound,
                                                   block=TimingPolicy(warmup=0, min_runs=10, max_runs=1000,
                                                                      min_time_s=args.block_s,
                                                                      max_time_s=args.block_s * 4)))
    names = sorted(truth)
    by_name = {p.stem: p for p in held}
    preds, trained = {}, [("quiet", work / "quiet.sqlite", {}), ("loaded", work / "loaded.sqlite", {})]
    if not args.no_keep:
        trained.append(("loaded_keep", work / "loaded.sqlite", {"busy": "keep"}))
    for label, store, overrides in trained:
        say(f"train {label}")
        pred_dir, busy = train_one(store, work / f"pred_{label}", args, **overrides)
        figures.update(busy_figures(label, busy))
        preds[label] = predictions(pred_dir, names, by_name)
    measured = np.array([truth[m].latency_ms for m in names])
    figures["held_out_models"] = len(names)
    figures["ground_truth_median_spread_pct"] = round(float(np.median([truth[m].spread for m in names])) * 100, 1)
    for label, p in preds.items():
        s = score(measured, p)
        figures[f"{label}_within10_pct"] = round(s.acc10 * 100, 1)
        figures[f"{label}_rmspe_pct"] = round(s.rmspe, 1)
    for label in [k for k in preds if k != "quiet"]:
        dev = np.abs(preds[label] / preds["quiet"] - 1) * 100
        figures[f"{label}_vs_quiet_median_abs_pct"] = round(float(np.nanmedian(dev)), 1)
        figures[f"{label}_vs_quiet_max_abs_pct"] = round(float(np.nanmax(dev)), 1)
    rows = [{"model": m, "measured_ms": round(truth[m].latency_ms, 3), "spread_pct": round(truth[m].spread * 100, 1),
             **{f"{k}_ms": round(float(v[i]), 3) for k, v in preds.items()},
             **{f"{k}/quiet": round(float(v[i] / preds["quiet"][i]), 3) for k, v in preds.items() if k != "quiet"}}
            for i, m in enumerate(names)]
    figures.update(sessions.device_metadata(ep))
    return figures, rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    width = max(len(r["model"]) for r in rows)
    print(f"{'model':{width}s} " + " ".join(f"{c:>16s}" for c in cols[1:]))
    for r in rows:
        print(f"{r['model']:{width}s} " + " ".join(f"{r[c]:>16}" for c in cols[1:]))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke test of about two minutes")
    ap.add_argument("--zoo", default=str(ZOO))
    ap.add_argument("--per-family", type=int, default=None, help="models per zoo family (default: all; quick: 2)")
    ap.add_argument("--devices", default=paths.DEVICES_CONFIG, help="device config (its cpu-1t is used)")
    ap.add_argument("--config", default=paths.PREDICTOR_CONFIG, help="predictor config")
    ap.add_argument("--models", nargs="*", default=[str(d) for d in MODEL_DIRS], help="folders of held-out models")
    ap.add_argument("--devset", default=str(DEVSET), help="a development set folder (`make devset`)")
    ap.add_argument("--devset-limit", type=int, default=None,
                    help="N of its models, spread over its sorted names (default 12; quick: 0)")
    ap.add_argument("--load", choices=["burst", "steady"], default="burst")
    ap.add_argument("--on-s", type=float, default=12.0, help="seconds the busy loop spins in a burst")
    ap.add_argument("--off-s", type=float, default=8.0, help="seconds it rests (first, so the reference is quiet)")
    ap.add_argument("--blocks", type=int, default=None, help="ground-truth blocks (default 5; quick: 3)")
    ap.add_argument("--block-s", type=float, default=None, help="ground-truth seconds a block (0.3; quick: 0.15)")
    ap.add_argument("--no-keep", action="store_true", help="skip the third predictor (loaded store, flags ignored)")
    ap.add_argument("--workdir", default=None, help="keep the stores and predictors here (default: a temporary "
                                                   "folder under /tmp, removed at the end)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    quick = args.quick
    args.per_family = args.per_family if args.per_family is not None else (2 if quick else 0)
    args.devset_limit = args.devset_limit if args.devset_limit is not None else (0 if quick else 12)
    args.blocks = args.blocks or (3 if quick else 5)
    args.block_s = args.block_s or (0.15 if quick else 0.3)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not hasattr(os, "sched_setaffinity"):
        print("os.sched_setaffinity is not available: this benchmark needs Linux", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.ERROR)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hase_loaded_"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        figures, rows = run(args, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    figures["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    if args.json:
        print_figures({**figures, "models": rows}, True)
        return 0
    print_figures(figures, False)
    print()
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
