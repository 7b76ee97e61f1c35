"""`hase train`: turn collected measurements into evaluated, calibrated predictors (`make train`).

Training takes minutes; its progress (each stage, target and fold, with the elapsed time) shows as a spinner
line on a terminal and as one log line per step elsewhere (a log file, CI), so a log sees it too.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from hase import paths
from hase.commands.common import (
    add_device_arg,
    add_json_arg,
    add_store_arg,
    stderr_console,
    stdout_console,
    titled_table,
)
from hase.errors import HaseError
from hase.files import check_output_dir
from hase.predict.dataset import store_devices
from hase.predict.locate import check_not_shipped
from hase.predict.train import load_train_config, train

if TYPE_CHECKING:  # pragma: no cover - the predictor stack loads only when a command runs
    from hase.predict.train import TrainResult

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `train` subcommand."""
    p = sub.add_parser("train", help="train kernel predictors from the store (leave-family-out evaluated)",
                       description="Fit one RandomForest per (device, op type) on the store's kernel measurements, "
                                   "evaluate by holding out each model family in turn, fit the calibration "
                                   "latency = a*sum + g*n_kernels + b, and write <out>/<device>/ (arrays + manifest).")
    add_store_arg(p)
    p.add_argument("--out", default=None,
                   help=f"root directory of predictors, one folder per device (default: the user directory, "
                        f"{paths.USER_PREDICTORS_HELP}; never the predictors shipped with Hase)")
    p.add_argument("--config", default=paths.PREDICTOR_CONFIG, help="hyper-parameters (TOML; default %(default)s)")
    add_device_arg(p, "device configuration(s) to train (default: all)", repeatable=True)
    p.add_argument("--targets", help="comma-separated targets to evaluate: warm,cold,span (default: the config's)")
    p.add_argument("--save-targets", choices=["default", "all"], help="save the default target only, or all")
    p.add_argument("--threaded", metavar="NAME", default=None,
                   help="also write device NAME (e.g. cpu-mt): each one-thread device trained here, moved to ORT's "
                        "default threads by the thread model trained with it (hase.predict.threaded); needs the "
                        "store's spans of the same zoo at the default threads")
    add_json_arg(p, "print the headline figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train every device asked for (all the store has by default), then print or JSON-dump the figures."""

    targets = tuple(t.strip() for t in args.targets.split(",")) if args.targets else None
    cfg = load_train_config(paths.config_file(args.config, paths.PREDICTOR_CONFIG), targets=targets,
                            save_targets=args.save_targets)
    out = args.out or paths.user_predictors_dir()
    check_not_shipped(out)
    check_output_dir(out, "--out")  # before minutes of training, not after
    devices = args.device or store_devices(args.store)
    if args.threaded and len(devices) != 1:
        raise HaseError(f"--threaded {args.threaded} moves one one-thread device, and this run trains {len(devices)} "
                        f"({', '.join(devices)}): give that one with --device")
    console = stderr_console()
    results = []
    for device in devices:
        with training_progress(console, device) as progress:
            res = train(args.store, out, cfg, device, progress=progress)
        results.append(res)
        if args.threaded and res.manifest.device_meta.intra_op_threads == 1:
            from hase.predict.threaded import derive_threaded  # noqa: PLC0415

            derived = derive_threaded(res.out_dir, Path(out) / args.threaded, args.threaded)
            console.print(f"wrote {derived}: {device} moved to ORT's default threads by its thread model",
                          markup=False)
    if args.json:
        print(json.dumps([_headline(r) for r in results], indent=1, default=str))
        return 0
    for res in results:
        print_result(res)
    return 0


@contextmanager
def training_progress(console: Console, device: str) -> Iterator[Callable[[str], None]]:
    """The progress callback of one device's training: on a terminal a spinner line with the current step and
    a running clock; elsewhere one INFO log line per step with the seconds since this device's training began
    (`train cpu-1t: span: holding out resnet (fold 3/15) [42 s]`), and a last line when it is done."""
    t0 = time.perf_counter()
    if console.is_terminal:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(escape(f"training {device}"), total=None)
            yield lambda msg: bar.update(task, description=escape(f"training {device}: {msg}"), refresh=True)
        return
    yield lambda msg: log.info("train %s: %s [%.0f s]", device, msg, time.perf_counter() - t0)
    log.info("train %s: done [%.0f s]", device, time.perf_counter() - t0)


def _headline(res: TrainResult) -> dict[str, Any]:
    t = res.manifest.targets
    return {"device": res.device, "out": str(res.out_dir), "default_target": res.default_target,
            "chosen_on": res.chosen_on,
            "wall_s": round(res.wall_s, 1), "held_out": {k: v.held_out.to_dict() for k, v in t.items()},
            "calibration": {k: v.calibration.calibration.name for k, v in t.items()},
            "baselines": res.baselines.set_index("baseline").to_dict("index")}


def print_result(res: TrainResult) -> None:
    """Held-out accuracy per target, the baselines, fallbacks and where the files went."""
    console = stdout_console()
    table = titled_table(f"{escape(res.device)}: held-out (leave-family-out) accuracy, calibrated")
    for col in ("target", "calibration", "n", "RMSPE%", "±5%", "±10%", "kernels RMSPE%"):
        table.add_column(col, justify="left" if col in ("target", "calibration") else "right")
    for target, entry in res.manifest.targets.items():
        h, k = entry.held_out, entry.kernels_held_out
        mark = " (default)" if target == res.default_target else ""
        table.add_row(escape(target + mark), escape(entry.calibration.calibration.name), str(h.n), f"{h.rmspe:.1f}",
                      f"{h.acc5:.0%}", f"{h.acc10:.0%}", f"{k.rmspe if k else float('nan'):.1f}")
    for row in res.baselines.itertuples():
        table.add_row(escape(f"baseline {row.baseline}"), "linear", str(row.n), f"{row.rmspe:.1f}", f"{row.acc5:.0%}",
                      f"{row.acc10:.0%}", "")
    console.print(table)
    forests = res.manifest.target(res.default_target).predictor
    if forests.skipped:
        console.print(f"[yellow]{len(forests.skipped)} op keys have too few training kernels (of {forests.n_kernels}) "
                      f"and use a fallback forest[/]: "
                      + escape(", ".join(f"{k} ({forests.skipped_n.get(k, '?')})" for k in sorted(forests.skipped))))
    busy = busy_line(res.manifest.training_data.busy)
    if busy:
        console.print(busy, style="yellow", markup=False)
    files = ", ".join(sorted(res.manifest.files))
    chosen = {"real": "the real models' families", "balanced": "real and generated families, equally weighted"
              }.get(res.chosen_on, "every family")
    console.print(f"saved {res.out_dir} ({files}) in {res.wall_s:.0f} s; default target: {res.default_target} "
                  f"(held-out RMSPE on {chosen})", markup=False)


def busy_line(busy: Mapping[str, Any]) -> str | None:
    """One line on the rows measured on a busy host or noisy and what training did with them; None when none were."""
    models, kernels = busy.get("models", {}), busy.get("kernels", {})
    if not models.get("suspect") and not any(c.get("suspect") for c in kernels.values()):
        return None
    per_target = "; ".join(f"{t}: {c['suspect']} suspect, {c['dropped']} dropped, {c['weighted']} down-weighted"
                           for t, c in kernels.items())
    return (f"measured on a busy host or noisy (policy {busy.get('policy')!r}, weight {busy.get('busy_weight')}): "
            f"models {models.get('suspect')} of {models.get('rows')} ({models.get('host_busy')} busy, "
            f"{models.get('noisy')} noisy), {models.get('weighted')} down-weighted in the calibration; "
            f"kernels {per_target}")
