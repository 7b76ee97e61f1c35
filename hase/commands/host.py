"""`hase host show|check|survey`: this machine's fingerprint, its speed against a predictor's machine, its survey."""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape

from hase import paths
from hase.commands.common import (
    add_device_arg,
    add_json_arg,
    add_predictors_arg,
    stderr_console,
    stdout_console,
    titled_table,
)
from hase.errors import HaseError
from hase.files import check_output_file, file_sha256, write_atomic
from hase.measure.collect import dir_sources
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
from hase.measure.types import ModelSource
from hase.predict.adapt import TRANSFER_PASSES, noise_text, transfer_noise
from hase.predict.bundle import manifest_ep_config, read_manifest
from hase.predict.locate import find_predictor
from hase.predict.survey import DEFAULT_DEVICES, DEFAULT_TRANSFER_S, save_survey, survey_host
from hase.runtime.host import host_fingerprint
from hase.sampler.transfer import transfer_sources

MAX_BUDGET_S = 30.0
BUSY_CORES = 0.1  # other processes' mean busy cores during a survey above which it says the host was loaded


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
    survey = actions.add_parser(
        "survey", help="measure this host once into a small file: signature, transfer set, real models",
        description="For each device configuration: the speed signature, the transfer set `hase adapt` measures "
                    "(for --transfer-s seconds) and the real models (--real; five interleaved passes, the truth's "
                    "noise kept), each model with the kernel graph ORT builds here. `hase adapt --survey FILE` "
                    "adapts from it; benchmarks/cross_host.py scores predictors across surveyed hosts. A few "
                    "minutes; see docs/host.md.")
    survey.add_argument("--device", action="append", default=None,
                        help=f"device configuration to survey (repeatable; default {' and '.join(DEFAULT_DEVICES)})")
    add_predictors_arg(survey)
    survey.add_argument("--transfer-s", type=float, default=DEFAULT_TRANSFER_S,
                        help="seconds of transfer-set measurements per device configuration (default %(default)g)")
    survey.add_argument("--transfer-passes", type=int, default=TRANSFER_PASSES,
                        help="passes over the transfer models, minutes apart; each keeps its quickest (default "
                             "%(default)d)")
    survey.add_argument("--real", metavar="DIR", action="append", default=None,
                        help="real models to time: every .onnx of DIR (repeatable; default: those of "
                             f"{' and '.join(paths.SURVEY_REAL)} that exist, the same file once)")
    survey.add_argument("--models", metavar="DIR", action="append", default=None,
                        help="transfer models: every .onnx of DIR (repeatable; default: the zoo of the config shipped "
                             "with Hase, as `hase adapt` builds it)")
    survey.add_argument("--out", metavar="FILE", default=None,
                        help=f"survey file (default {paths.SURVEYS}/<digest>.survey.json.gz where {paths.SURVEYS}/ "
                             "exists, else ./<digest>.survey.json.gz)")
    survey.set_defaults(func=run_survey)
    threads = actions.add_parser(
        "threads", help="fit this host's thread model: kernels measured at 1 and at ORT's default threads",
        description="Profile the transfer set (or --models) at 1 intra-op thread and at --threads (default: ORT's "
                    "default, one per physical core) within --budget-s, fit the thread model of "
                    "hase.predict.threads (each kernel's serial share from its shape, the fork/join cost per op "
                    "type) and write it where `hase predict --threads` finds it on this host. See "
                    "docs/predictor.md, 'Thread counts'.")
    threads.add_argument("--threads", type=int, default=0,
                         help="the thread count to measure beside 1 (default 0: this host's physical cores)")
    threads.add_argument("--budget-s", type=float, default=300.0, help="seconds of measuring (default %(default)g)")
    threads.add_argument("--passes", type=int, default=1,
                         help="profile each model this many times back to back, keeping each kernel's quickest "
                              "(default %(default)s)")
    threads.add_argument("--models", metavar="DIR", action="append", default=None,
                         help="models to profile: every .onnx of DIR (repeatable; default: the transfer set of "
                              "`hase adapt`, built where missing)")
    threads.add_argument("--out", metavar="FILE", default=None,
                         help="thread model file (default: the user predictors directory's threads/<digest>.npz)")
    threads.add_argument("--no-gate", dest="gate", action="store_false",
                         help="profile the many-thread runs whether or not the host gives them all its cores "
                              "(default: wait for the cores; hase.runtime.gate)")
    threads.add_argument("--spans-out", metavar="FILE", default=None,
                         help="also write the measured spans (one row per kernel and thread count, with its "
                              "signature as JSON) to this .csv.gz, to study or refit")
    add_json_arg(threads)
    threads.set_defaults(func=run_threads)


def run_threads(args: argparse.Namespace) -> int:
    """Measure, fit and write this host's thread model; progress on stderr, the summary on stdout."""
    from hase.evaluate.thread_sweep import sweep_models  # noqa: PLC0415 - measuring pulls pandas and ORT
    from hase.predict.thread_estimate import user_thread_model  # noqa: PLC0415
    from hase.predict.threads import (  # noqa: PLC0415
        ALL,
        fit_thread_model,
        node_excess,
        pairs_with_specs,
        save_thread_model,
    )

    fp = host_fingerprint()
    count = args.threads or fp.cores
    if count < 2:
        raise HaseError(f"--threads {count}: a thread model needs a count of 2 or more beside 1 (this host has "
                        f"{fp.cores} physical core{'s' if fp.cores != 1 else ''}); give --threads N")
    if args.budget_s < 10:
        raise HaseError(f"--budget-s {args.budget_s:g} is too short to profile a model at two thread counts: "
                        "give 10 or more")
    if args.passes < 1:
        raise HaseError(f"--passes {args.passes} profiles nothing: give 1 or more")
    out = Path(args.out) if args.out is not None else user_thread_model(fp)
    check_output_file(out, "thread model file")
    if args.spans_out is not None:
        check_output_file(Path(args.spans_out), "spans file")
    log = stderr_console()

    def say(msg: str) -> None:
        log.print(f"threads: {msg}", markup=False, highlight=False)

    sources = transfer_sources(args.models, say)
    sweep = sweep_models([(s.name, s.path) for s in sources], [1, count], args.budget_s, runs=5,
                         progress=say, passes=args.passes, gated=args.gate)
    spans, specs = sweep.spans, sweep.specs
    if args.spans_out is not None:
        keys = list(zip(spans["model"], spans["node"], strict=True))
        table = spans.assign(signature=[specs[k].to_json() if k in specs else "" for k in keys])
        write_atomic(args.spans_out, gzip.compress(table.to_csv(index=False).encode(), mtime=0)
                     if str(args.spans_out).endswith(".gz") else table.to_csv(index=False))
    pairs, signatures, share = pairs_with_specs(spans, specs)
    if pairs.empty:
        raise HaseError("no kernel was profiled at both thread counts within the budget: give a larger "
                        "--budget-s or smaller --models")
    meta = {"cores": fp.cores, "fingerprint": fp.summary(), "ort": fp.ort_version,
            "models": int(pairs["model"].nunique()), "kernels": len(pairs), "joined": round(share, 4),
            "gated": bool(args.gate)}
    excess = node_excess(sweep.latency)
    meta["excess_models"] = int(sweep.latency["model"].nunique())
    model = dataclasses.replace(fit_thread_model(pairs, signatures, host=fp.digest, meta=meta), excess_ms=excess)
    save_thread_model(model, out)
    speed = float(pairs["t1_ms"].sum() / pairs["t_ms"].sum())
    summary = {"host": fp.digest, "threads": [1, count], "models": meta["models"], "kernels": len(pairs),
               "kernel_speedup": speed, "sigma_us": model.sigma_ms[ALL] * 1e3, "excess_us": excess * 1e3,
               "out": str(out)}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        stdout_console(highlight=False, soft_wrap=True).print(
            f"thread model of host {fp.digest} written to {out}: {meta['models']} models, {len(pairs)} kernels at 1 "
            f"and {count} threads (their sum {speed:.2f}x quicker at {count}), fork/join "
            f"{model.sigma_ms[ALL] * 1e3:.1f} µs per doubling, less the profiler's extra {excess * 1e3:.1f} µs a "
            f"node at {count} threads (whole models timed unprofiled); `hase predict MODEL --threads 1,{count}` "
            "uses it",
            markup=False)
    return 0


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
    if Path(paths.SURVEYS).is_dir():
        mine = survey_path(fp.digest)
        c.print(f"survey: {mine}" if mine.is_file() else f"survey: none of this host in {paths.SURVEYS}/ (run "
                f"`hase host survey` and commit the file)", markup=False)
    return 0


def survey_path(digest: str) -> Path:
    """Where this host's survey goes by default."""
    name = f"{digest}.survey.json.gz"
    return Path(paths.SURVEYS) / name if Path(paths.SURVEYS).is_dir() else Path(name)


def real_sources(dirs: Sequence[str] | None) -> list[ModelSource]:
    """The survey's real models: every .onnx of the given folders, else of the checkout's default ones that exist;
    a file whose bytes another already has is taken once (the same model under two names)."""
    folders = list(dirs) if dirs else [d for d in paths.SURVEY_REAL if Path(d).is_dir()]
    seen: set[str] = set()
    out = []
    for d in folders:
        for src in dir_sources(d, "real"):
            sha = file_sha256(src.path)
            if sha not in seen:
                seen.add(sha)
                out.append(src)
    return out


def run_survey(args: argparse.Namespace) -> int:
    """Survey this host and write the file; one line per step on stderr, the summary on stdout."""
    if not 1 <= args.transfer_passes <= 5:
        raise HaseError(f"--transfer-passes must be from 1 to 5 (got {args.transfer_passes})")
    if args.transfer_s < 10:
        raise HaseError(f"--transfer-s {args.transfer_s:g} is too short to measure a transfer set: give 10 or more")
    fp = host_fingerprint()
    out = Path(args.out) if args.out is not None else survey_path(fp.digest)
    check_output_file(out, "survey file")
    devices = args.device or DEFAULT_DEVICES
    for d in devices:  # a wrong device fails before anything is built or measured
        find_predictor(d, args.predictors, adapted=False)
    real = real_sources(args.real)
    log = stderr_console()

    def say(msg: str) -> None:
        log.print(f"survey: {msg}", markup=False, highlight=False)

    if not real:
        say("no real models found (give --real DIR): the survey can adapt predictors but not judge them")
    transfer = transfer_sources(args.models, say)
    t0 = time.perf_counter()
    s = survey_host(devices, transfer, real, transfer_s=args.transfer_s, transfer_passes=args.transfer_passes,
                    predictors_dir=args.predictors, progress=say)
    save_survey(s, out)
    c = stdout_console(highlight=False, soft_wrap=True)
    c.print(f"survey of host {s.digest} written to {out} ({out.stat().st_size / 1024:.0f} KiB, "
            f"{time.perf_counter() - t0:.0f} s)", markup=False)
    for d in s.devices.values():
        n_k = sum(sum(1 for v in m.target_ms if math.isfinite(v)) for m in d.transfer)
        spreads = sorted(m.spread for m in d.real)
        noise = (f", real models' truth noise (second-quickest pass over quickest) median "
                 f"{spreads[len(spreads) // 2]:.1%}" if spreads else "")
        c.print(f"{d.device}: {len(d.transfer)} transfer models ({n_k} kernel targets; "
                f"{noise_text(*transfer_noise(d.transfer))}) in {d.transfer_s:.0f} s, "
                f"{len(d.real)} real models{noise}; other processes kept {d.others_cores:.2f} cores busy meanwhile",
                markup=False)
        if d.others_cores > BUSY_CORES:
            log.print(f"warning: other processes kept {d.others_cores:.2f} cores busy while {d.device} was surveyed: "
                      f"its figures carry that load (passes agree under steady load); survey again on a quiet host",
                      markup=False, soft_wrap=True)
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
