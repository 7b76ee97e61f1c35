"""`hase predictors`: the installed predictors (user-trained and shipped), what each one is, and whether it fits
this host."""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from hase import paths
from hase.commands.common import add_json_arg, add_predictors_arg, stdout_console
from hase.predict.identity import installed, threads_text
from hase.predict.locate import search_roots
from hase.predict.noise import busy_note

if TYPE_CHECKING:  # pragma: no cover - the predictor stack loads only when a command runs
    from hase.predict.identity import InstalledPredictor


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `predictors` subcommand."""
    p = sub.add_parser("predictors", help="list the installed predictors and what each one was trained on",
                       description="List every predictor Hase can use, in lookup order (--predictors DIR, else the "
                                   f"user directory ({paths.USER_PREDICTORS_HELP}), else the ones shipped with "
                                   "Hase): device configuration, CPU/GPU, ONNX Runtime version, execution provider, "
                                   "threads, optimization level, training date, default target, held-out accuracy, "
                                   "and how this host differs from the machine it was trained on.")
    add_predictors_arg(p)
    add_json_arg(p, "print JSON (a list, one object per predictor directory)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the predictors; exit 2 when there are none, or when one of them cannot be read (it is still listed)."""

    found = installed(args.predictors)
    if args.json:
        print(json.dumps([p.to_dict() for p in found], indent=1))
    else:
        print_predictors(found, [f"{source}: {root}" for source, root in search_roots(args.predictors)])
    broken = [p for p in found if p.error]
    if not found:
        Console(stderr=True).print("hase: error: no predictors found: train one with `make collect train`",
                                   markup=False)
    elif broken:  # listed above with the reason; the exit code's one line on stderr says which
        Console(stderr=True, soft_wrap=True).print(
            f"hase: error: {len(broken)} predictor(s) cannot be used ({', '.join(str(p.found.path) for p in broken)}): "
            f"see the reasons above; retrain with `make train`", markup=False)
    return 2 if not found or broken else 0


def print_predictors(found: Sequence[InstalledPredictor], roots: Sequence[str]) -> None:
    """One block per predictor, in lookup order: where it lives, what it was trained on and for, how good it
    was on held-out families, and how this host differs (or why it cannot be used)."""

    c = stdout_console(highlight=False, soft_wrap=True)  # long paths and CPU names stay on one line in logs
    c.print(f"searched, in this order: {'; '.join(roots)}", markup=False)
    for p in found:
        ident = p.identity
        note = " [yellow](hidden by the user-trained predictor above)[/]" if p.found.shadowed else ""
        c.print(f"\n[bold]{escape(p.found.device)}[/]  {escape(p.found.source)}: {escape(str(p.found.path))}{note}")
        if ident is None:
            c.print(f"  [red]cannot be used[/]: {escape(p.error)}")
            continue
        gpu = f" + {ident.gpu_name} (driver {ident.gpu_driver})" if ident.gpu_name else ""
        rows = [
            ("device", f"{ident.execution_provider} on {ident.cpu_model}{gpu}"),
            ("runtime", f"ONNX Runtime {ident.ort_version}, "
                        f"{threads_text(ident.intra_op_threads, ident.inter_op_threads)}, "
                        f"{ident.opt_level} optimization"),
            ("trained", f"{ident.trained_on} with Hase {ident.hase_version}, on {ident.n_models} models of "
                        f"{len(ident.families)} families; default target {ident.default_target}"),
            ("held-out", f"±10 % {ident.acc10 * 100:.0f} % of {ident.n_held_out} models, RMSPE {ident.rmspe:.1f} % "
                         f"(leave-family-out{f', of {ident.moved_from} at one thread' if ident.moved_from else ''})"),
        ]
        if ident.moved_from:
            rows.append(("threads", f"{ident.moved_from}'s one-thread forests moved to this host's cores by a thread "
                                    "model (this host's own, else a shipped one: `hase host threads` fits one)"))
        for key, value in rows:
            c.print(f"  {key:<10}{value}", markup=False)
        busy = busy_note(ident.busy_share)
        if busy:
            c.print(f"  [yellow]{'noise':<10}{escape(busy)}[/]")
        if ident.host is None:
            c.print(f"  {'host':<10}no fingerprint recorded (CPU name and ONNX Runtime compared)", markup=False)
        if p.mismatches:
            for m in p.mismatches:
                c.print(f"  [yellow]{'this host':<10}differs: {escape(m)}[/]")
        else:
            c.print(f"  {'this host':<10}matches (CPU, ONNX Runtime, execution provider, threads)", markup=False)
