"""`hase host show|check`: this machine's fingerprint, and its speed against the machine a predictor describes."""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.markup import escape

from hase.commands.common import add_device_arg, add_json_arg, add_predictors_arg, stdout_console, titled_table
from hase.errors import HaseError
from hase.measure.signature import (
    DEFAULT_BUDGET_S,
    DIFFERENT,
    NOISY,
    SAME,
    FamilyVerdict,
    Signature,
    compare,
    measure_signature,
)
from hase.predict.bundle import manifest_ep_config, read_manifest
from hase.predict.locate import find_predictor
from hase.runtime.host import host_fingerprint

MAX_BUDGET_S = 30.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `host` subcommand and its `show` and `check` actions."""
    p = sub.add_parser("host", help="this machine's fingerprint, and its speed against a predictor's machine",
                       description="`show` prints this machine's fingerprint (CPU family/model/stepping, the ISA "
                                   "features ONNX Runtime's kernels choose between, caches, cores, memory, ONNX "
                                   "Runtime build). `check` times the speed-signature probes here (about 20 s) and "
                                   "compares them, per op family, with the signature stored in the predictor: the "
                                   "time ratio, the noise, and a verdict (same machine within ±10 %, different, too "
                                   "noisy to tell). See docs/host.md.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print this machine's fingerprint")
    add_json_arg(show)
    show.set_defaults(func=run_show)
    check = actions.add_parser("check", help="time the signature probes here and compare with the predictor's machine")
    add_device_arg(check, "device configuration whose predictor to compare with")
    add_predictors_arg(check)
    check.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                       help=f"seconds for the probes (default %(default)g, at most {MAX_BUDGET_S:g})")
    add_json_arg(check)
    check.set_defaults(func=run_check)


def run_show(args: argparse.Namespace) -> int:
    """Print the fingerprint (JSON with --json)."""
    fp = host_fingerprint()
    if args.json:
        print(json.dumps({**fp.to_dict(), "digest": fp.digest}, indent=1))
        return 0
    c = stdout_console(highlight=False, soft_wrap=True)
    c.print(f"host {fp.digest}: {fp.summary()}", markup=False)
    c.print(f"ISA: {' '.join(fp.isa) or 'none of those ONNX Runtime dispatches on'}", markup=False)
    c.print(f"caches: L1d {fp.l1d_kib} KiB, L2 {fp.l2_kib} KiB, L3 {fp.l3_kib} KiB; providers: "
            f"{', '.join(fp.ort_providers) or 'none'}", markup=False)
    return 0


def run_check(args: argparse.Namespace) -> int:
    """Measure the signature here and print it against the predictor's; exit 2 when the predictor has none."""
    if not 1 <= args.budget_s <= MAX_BUDGET_S:
        raise HaseError(f"--budget-s must be from 1 to {MAX_BUDGET_S:g} seconds (got {args.budget_s:g})")
    found = find_predictor(args.device, args.predictors)
    manifest = read_manifest(found.path)
    if manifest.signature is None:
        raise HaseError(f"predictor {args.device!r} ({found.path}) has no speed signature recorded, so there is "
                        f"nothing to compare with: retrain it (`make collect train`) or adapt it to this host "
                        f"(`hase adapt --device {args.device}`)")
    there = Signature.from_dict(manifest.signature, f"the speed signature of {found.path}")
    t0 = time.perf_counter()
    here = measure_signature(manifest_ep_config(manifest), args.budget_s)
    verdicts = compare(here, there)
    fp = host_fingerprint()
    diffs = fp.differences(manifest.host, "the predictor's") if manifest.host is not None else None
    if args.json:
        print(json.dumps(check_dict(args.device, str(found.path), here, there, verdicts, diffs,
                                    time.perf_counter() - t0), indent=1))
        return 0
    print_check(args.device, str(found.path), here, there, verdicts, diffs)
    return 0


def overall(verdicts: list[FamilyVerdict]) -> str:
    """One verdict over the families: different if any is, same if all are, too noisy otherwise."""
    kinds = {v.verdict for v in verdicts}
    if DIFFERENT in kinds:
        return DIFFERENT
    return SAME if kinds == {SAME} else NOISY


def check_dict(device: str, path: str, here: Signature, there: Signature, verdicts: list[FamilyVerdict],
               diffs: list[str] | None, wall_s: float) -> dict[str, Any]:
    """`hase host check --json`: both signatures, the per-family verdicts, the fingerprint differences."""
    return {"device": device, "predictor": path, "verdict": overall(verdicts),
            "families": [v.to_dict() for v in verdicts], "fingerprint_differences": diffs,
            "host": host_fingerprint().to_dict(), "here": here.to_dict(), "predictor_signature": there.to_dict(),
            "wall_s": wall_s}


def print_check(device: str, path: str, here: Signature, there: Signature, verdicts: list[FamilyVerdict],
                diffs: list[str] | None) -> None:
    """Per family: time here over the predictor's machine's, noise, verdict; then the fingerprint and the summary."""
    c = stdout_console(highlight=False, soft_wrap=True)
    t = titled_table(f"this host ({here.host_fp}) against predictor {escape(device)}'s machine ({there.host_fp})")
    for col in ("family", "probes", "time ×", "noise", "verdict"):
        t.add_column(col, justify="left" if col in ("family", "verdict") else "right")
    colour = {SAME: "green", DIFFERENT: "red", NOISY: "yellow"}
    for v in verdicts:
        t.add_row(v.family, str(v.n_probes), f"{v.time_ratio:.2f}", f"±{v.noise * 100:.0f} %",
                  f"[{colour[v.verdict]}]{v.text}[/]")
    c.print(t)
    c.print("time ×: this host's probe time over the predictor's machine's (geometric mean over the family's probes; "
            "1.30 = 30 % slower here); noise: the larger spread of block medians either side saw", markup=False)
    failed = [p.name for p in here.probes if p.error]
    if failed:
        c.print(f"probes that cannot run here: {', '.join(failed)}", markup=False)
    if diffs is None:
        c.print("fingerprint: the predictor has none recorded", markup=False)
    else:
        c.print(f"fingerprint: {'; '.join(diffs) if diffs else 'the same as the predictor machine'}", markup=False)
    verdict = overall(verdicts)
    fix = {SAME: "its predictions apply here", DIFFERENT: f"adapt it with `hase adapt --device {device}`",
           NOISY: "rerun when the host is quieter"}[verdict]
    c.print(f"verdict: {'same machine within ±10 %' if verdict == SAME else verdict} ({path}): {fix}", markup=False)
