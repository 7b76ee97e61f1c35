"""The Python half of scripts/gpu/run_on_device.sh: everything the lent GPU machine does for Hase, one step per
process, working under WORK ($HASE_GPU_WORK) and packing into OUT what can come back. Steps (argv[1]):

  env       versions first (python, onnxruntime and its providers, cuda-bindings / cuda.bindings, cupti-python)
            and whether CUPTI can record, and if not why (summary.json "env")
  profiles  LIMIT_S: a ResNet-50-size and a BERT-base-size zoo model at batch 1 and 64, built here offline, each
            profiled (CUDA EP, CUPTI when it records) in its own child process time-boxed on its own; per model:
            the nodes' GPU time against the run's GPU busy time (the 5 % check), the CPU-bound / GPU-bound verdict
            and whether CUPTI was on (and why not), written to summary.json after each model. A child interrupted
            (exit 130, SIGTERM) stops the step; one over its box is killed and the next model runs.
  fixtures  LIMIT_S: small real CUDA profiles with their CUPTI records and clock pair (gpu_fixtures/), to replace
            the constructed ones in tests/profiling/gpu/cupti_cases.py
  collect   LIMIT_S: `hase collect` of the default zoo + tests/data/models on configs/devices_gpu.toml, stopped at
            the limit (SIGTERM, then SIGKILL; resumable: what was committed stays)
  record    STEP RC SECONDS LIMIT_S: a shell step's outcome into summary.json "steps"
  pack      what comes back, in OUT: log.txt (the shell's), summary.json, results.tar.gz (WORK but the store: logs,
            profiles, fixtures, pytest and smoke output) and the store gzipped and cut into parts of 15 MiB
            (store/hase_gpu.sqlite.gz.part-*), checked against the return limits (at most 8 files, 16 MiB each,
            64 MiB in all, 2 folders down); then summary.json and the pytest summary printed to stdout

Results are JSON files written by the step that makes them; no step parses another's stdout (onnxruntime's
`preload_dlls()` may print into it). HASE_GPU_DRY=1 runs it all on the CPU EP with small models.
"""
from __future__ import annotations

import contextlib
import gzip
import importlib.metadata
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

DRY = os.environ.get("HASE_GPU_DRY") == "1"
EP = "cpu" if DRY else "cuda"
OUT = Path(os.environ.get("OUT", "gpu_out"))
WORK = Path(os.environ.get("HASE_GPU_WORK", "/tmp/hase_gpu_work"))
MODELS = Path(os.environ.get("HASE_GPU_MODELS", "/tmp/hase_gpu_models"))
PART_BYTES = 15 * 1024 * 1024  # under the 16 MiB a returned file may have
RETURN_FILES, RETURN_FILE_BYTES, RETURN_BYTES, RETURN_DEPTH = 8, 16 << 20, 64 << 20, 2
RETURN_MARGIN = 1 << 20  # log.txt still grows after the last pack
PER_MODEL_S = 100  # one profiled model, session creation and model build included
MIN_MODEL_S = 15  # less time left than this: the model is skipped, not started
INTERRUPTED = (130, -signal.SIGTERM, -signal.SIGINT)
TIMED_OUT = 124
RESNET50 = {"depth": 50, "width": 1.0, "resolution": 224}
BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "seq": 128, "vocab": 30522}
if DRY:
    RESNET50 = {"depth": 10, "width": 0.25, "resolution": 64}
    BERT_BASE = {"layers": 1, "hidden": 64, "heads": 2, "seq": 32, "vocab": 2048}


def clean(value: Any) -> Any:
    """JSON-able: numpy scalars -> numbers, NaN/inf -> None, recursively."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, data: Any) -> None:
    """Atomically: a step killed mid-write leaves the previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(clean(data), indent=1, default=str))
    tmp.replace(path)


def summary_path() -> Path:
    return WORK / "summary.json"


def load_summary() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(summary_path().read_text())
    except (OSError, ValueError):
        data = {}
    return data


def update_summary(key: str, value: Any) -> None:
    """summary.json[key] = value, written now (each step and each model calls it as soon as it knows)."""
    data = load_summary()
    data[key] = value
    write_json(summary_path(), data)


def boxed(cmd: list[str], limit_s: float, log: Path) -> int:
    """Run `cmd` with stdout and stderr into `log` for at most `limit_s`: then SIGTERM, and SIGKILL 10 s later
    (124 when the box was hit). A SIGTERM to this process stops the child too (the shell's `timeout` signals
    the whole process group)."""
    with log.open("a") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        try:
            return proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return TIMED_OUT


def zoo_model(family: str, params: dict[str, object]) -> Path:
    """A zoo model built offline (random weights, static shapes) under MODELS."""
    import onnx  # noqa: PLC0415 - record and pack stay quick

    from hase.zoo.build import build_model  # noqa: PLC0415 - record and pack stay quick
    from hase.zoo.registry import get_family  # noqa: PLC0415 - record and pack stay quick

    spec = get_family(family).spec(params)
    path = MODELS / f"{spec.name}.onnx"
    if not path.exists():
        MODELS.mkdir(parents=True, exist_ok=True)
        onnx.save(build_model(spec), path)
    return path


def env() -> None:
    """The versions that decide whether the CUDA path can run, printed (the log) and in summary.json "env"."""
    info: dict[str, Any] = {"python": sys.version.split()[0], "dry_run": DRY, "ep": EP}
    for dist in ("onnxruntime", "onnxruntime-gpu", "cuda-bindings", "cupti-python", "onnx", "numpy"):
        try:
            info[f"pip {dist}"] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            info[f"pip {dist}"] = None
    try:
        import cuda.bindings

        info["cuda.bindings"] = str(getattr(cuda.bindings, "__version__", "imported (no __version__)"))
    except Exception as exc:  # any failure to import is the answer here
        info["cuda.bindings"] = f"cannot be imported: {type(exc).__name__}: {_line(exc)}"
    try:
        import onnxruntime

        info["onnxruntime.__version__"] = onnxruntime.__version__
        info["providers"] = onnxruntime.get_available_providers()
    except Exception as exc:
        info["onnxruntime.__version__"] = f"cannot be imported: {type(exc).__name__}: {_line(exc)}"
    info["cupti"] = cupti_state()
    for key, value in info.items():
        print(f"env {key}: {value}", flush=True)
    update_summary("env", info)


def cupti_state() -> dict[str, Any]:
    """Whether CUPTI can record in this run, and if not why (the import error of cupti-python, or the dry run)."""
    if DRY:
        return {"on": False, "why": "dry run on the CPU EP: nothing to record"}
    try:
        from cupti import cupti  # noqa: F401 - the import is the check (it needs cuda.bindings)
    except Exception as exc:
        return {"on": False, "why": f"cupti-python cannot be imported: {type(exc).__name__}: {_line(exc)}"}
    return {"on": True, "why": ""}


def _line(exc: BaseException) -> str:
    return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")[:300]


def profiles(limit_s: float) -> None:
    """Each model profiled in its own time-boxed child (`profile-one`); summary.json "profiles" after each."""
    out = WORK / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + limit_s
    summary: dict[str, Any] = {}
    for family, params in (("resnet", RESNET50), ("bert", BERT_BASE)):
        for batch in (1, 64):
            key = f"{family}_b{batch}"
            left = deadline - time.monotonic()
            if left < MIN_MODEL_S:
                summary[key] = {"status": f"skipped: {left:.0f} s left of the step"}
                update_summary("profiles", summary)
                continue
            box = min(left, PER_MODEL_S)
            t0 = time.monotonic()
            rc = boxed([sys.executable, __file__, "profile-one", family, json.dumps({**params, "batch": batch}),
                        str(out / key)], box, out / f"{key}.log")
            entry: dict[str, Any] = {"rc": rc, "seconds": round(time.monotonic() - t0, 1), "limit_s": round(box)}
            result = out / f"{key}.json"
            if rc == 0 and result.exists():
                entry.update(json.loads(result.read_text())["check"])
            else:
                entry["status"] = ("timed out (killed)" if rc == TIMED_OUT else "interrupted" if rc in INTERRUPTED
                                   else f"failed: see profiles/{key}.log")
            summary[key] = entry
            update_summary("profiles", summary)
            print("profile", key, json.dumps(clean(entry)), flush=True)
            if rc in INTERRUPTED:
                print("profiles: a model was interrupted (exit 130/SIGTERM): the step stops here", flush=True)
                raise SystemExit(130)


def profile_one(family: str, params_json: str, out_stem: str) -> None:
    """One model profiled in this process; its report written to OUT_STEM.json (never printed to be parsed)."""
    from hase.profiling.run import analyze, profile_model  # noqa: PLC0415 - record and pack stay quick
    from hase.runtime.types import EPConfig  # noqa: PLC0415 - record and pack stay quick

    params = json.loads(params_json)
    path = zoo_model(family, params)
    stem = Path(out_stem)
    ep = EPConfig(name=f"{EP}0", ep=EP)
    with tempfile.TemporaryDirectory(prefix="hase_gpu_profile_") as tmp:
        keep = stem.parent / path.stem if params.get("batch") == 1 else Path(tmp)  # ORT's profile kept at batch 1
        res = profile_model(path, ep, runs=20, warmup=5, workdir=keep)
        a = analyze(res.events, res.skip_runs, gpu=res.gpu)
    report = {"model": path.stem, "params": params, "check": {"model": path.stem, **check(a), "cupti":
              "on" if res.gpu is not None else f"off: {res.cupti_note}", "wall_ms": res.wall.median_ms},
              "findings": a.findings, "summary_us": a.summary.to_dict(), "top_nodes": a.top.to_dict("records"),
              "gpu_nodes": None if a.gpu is None else a.gpu.nodes.head(30).to_dict("records"),
              "gpu_runs": None if a.gpu is None else a.gpu.runs.to_dict("records"), "metadata": res.metadata}
    write_json(stem.with_suffix(".json"), report)


def check(a: Any) -> dict[str, Any]:
    """The 5 % check (Σ nodes' GPU busy vs the run's GPU busy, medians) and the verdict of one analysis."""
    from hase.profiling.gpu import attribute  # noqa: PLC0415 - record and pack stay quick

    if a.gpu is None:
        return {"gpu": None}
    busy = float(a.gpu.runs[attribute.GPU_BUSY_US].median())
    nodes = float(a.gpu.nodes[attribute.GPU_BUSY_US].sum())
    ratio = nodes / busy if busy else None
    return {"node_sum_us": nodes, "busy_us": busy, "ratio": ratio,
            "within_5pct": ratio is not None and abs(ratio - 1) <= 0.05, "verdict": a.gpu.verdict.label,
            "verdict_text": a.gpu.verdict.text()}


def fixtures(limit_s: float) -> None:
    """Small real profiles with CUPTI records and clock pair; each model guarded, summary after each."""
    from hase.profiling.run import profile_model  # noqa: PLC0415 - record and pack stay quick
    from hase.runtime.types import EPConfig  # noqa: PLC0415 - record and pack stay quick

    out = WORK / "gpu_fixtures"
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + limit_s
    ep = EPConfig(name=f"{EP}0", ep=EP)
    done: dict[str, Any] = {}
    for family, params in (("resnet", {"depth": 10, "width": 0.25, "resolution": 64, "batch": 1}),
                           ("bert", {"layers": 1, "hidden": 64, "heads": 2, "seq": 32, "vocab": 2048})):
        if deadline - time.monotonic() < MIN_MODEL_S / 3:
            done[family] = "skipped: no time left"
            continue
        try:
            path = zoo_model(family, params)
            work = out / path.stem
            res = profile_model(path, ep, runs=3, warmup=1, workdir=work, cupti=None if DRY else True)
            shutil.move(str(res.profile_path), str(out / f"{path.stem}.profile.json"))
            shutil.rmtree(work, ignore_errors=True)
            if res.gpu is not None:
                res.gpu.records.to_csv(out / f"{path.stem}.cupti.csv", index=False)
                clock = res.gpu.clock
                write_json(out / f"{path.stem}.clock.json", {
                    "cupti_ns": clock.cupti_ns, "wall_ns": clock.wall_ns, "profile_start_ns": clock.profile_start_ns,
                    "monotonic_ns_now": time.monotonic_ns(), "time_ns_now": time.time_ns(),
                    "metadata": res.metadata})
            done[family] = "cupti" if res.gpu is not None else f"no cupti: {res.cupti_note}"
        except Exception as exc:  # one model's failure is its own; the next fixture still runs
            traceback.print_exc()
            done[family] = f"failed: {type(exc).__name__}: {_line(exc)}"
        update_summary("fixtures", done)
        print("fixture", family, done[family], flush=True)


def collect(limit_s: float) -> None:
    """`hase collect` in a child, SIGTERM at the limit (it commits and exits 130), SIGKILL 10 s later."""
    store = WORK / "store" / "hase_gpu.sqlite"
    store.parent.mkdir(parents=True, exist_ok=True)
    devices = "configs/devices.toml" if DRY else "configs/devices_gpu.toml"
    cmd = [sys.executable, "-c", "import sys; from hase.cli import main; sys.exit(main(sys.argv[1:]))", "collect",
           "--devices", devices, "--store", str(store), "--zoo", "configs/zoo_small.toml",
           "--zoo-dir", str(MODELS / "zoo"), "--models-dir", "tests/data/models"]
    if DRY:
        cmd += ["--device", "cpu-1t", "--limit", "2"]
    t0 = time.monotonic()
    rc = boxed(cmd, limit_s, WORK / "collect.log")
    status = "done" if rc == 0 else "stopped at its limit (resumable)" if rc in (TIMED_OUT, *INTERRUPTED) \
        else "failed: see collect.log"
    update_summary("collect", {"rc": rc, "status": status, "seconds": round(time.monotonic() - t0),
                               "limit_s": round(limit_s), "rows": store_rows(store)})
    print(f"collect rc={rc} ({status}) in {time.monotonic() - t0:.0f} s (limit {limit_s:.0f} s)", flush=True)


def store_rows(store: Path) -> dict[str, int]:
    """Rows per table of the store (empty when there is none)."""
    if not store.exists():
        return {}
    with contextlib.closing(sqlite3.connect(store)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: int(db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]) for t in tables}


def record(step: str, rc: str, seconds: str, limit_s: str) -> None:
    """A shell step's outcome (124/137: its `timeout -k` box; 130: it stopped on SIGTERM) into summary.json."""
    code = int(rc)
    status = {0: "ok", 124: "timed out (SIGTERM)", 137: "killed (SIGKILL after the grace period)",
              130: "interrupted (stopped on SIGTERM)"}.get(code, "failed")
    steps = load_summary().get("steps", {})
    steps[step] = {"rc": code, "status": status, "seconds": int(seconds), "limit_s": int(limit_s)}
    update_summary("steps", steps)


def pack_store() -> list[Path]:
    """The store checkpointed, gzipped and cut into OUT/store/hase_gpu.sqlite.gz.part-NNN (15 MiB each)."""
    store = WORK / "store" / "hase_gpu.sqlite"
    dest = OUT / "store"
    for old in dest.glob("hase_gpu.sqlite*"):
        old.unlink()
    if not store.exists():
        return []
    with contextlib.closing(sqlite3.connect(store)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    dest.mkdir(parents=True, exist_ok=True)
    return cut(gzip.compress(store.read_bytes(), compresslevel=6), dest / "hase_gpu.sqlite.gz")


def cut(data: bytes, path: Path) -> list[Path]:
    """`data` as PATH.part-000, ... of at most PART_BYTES each."""
    parts = []
    for i in range(0, max(len(data), 1), PART_BYTES):
        part = path.with_name(f"{path.name}.part-{i // PART_BYTES:03d}")
        part.write_bytes(data[i:i + PART_BYTES])
        parts.append(part)
    return parts


def pack_results() -> list[Path]:
    """WORK but the store as OUT/results.tar.gz (cut into parts only if over PART_BYTES)."""
    for old in OUT.glob("results.tar.gz*"):
        old.unlink()
    tmp = WORK.parent / f"{WORK.name}.results.tar.gz"
    with tarfile.open(tmp, "w:gz") as tar:
        for item in sorted(WORK.iterdir()):
            if item.name != "store" and not item.name.endswith(".tmp"):
                tar.add(item, arcname=item.name)
    data = tmp.read_bytes()
    tmp.unlink()
    if len(data) <= PART_BYTES:
        (OUT / "results.tar.gz").write_bytes(data)
        return [OUT / "results.tar.gz"]
    return cut(data, OUT / "results.tar.gz")


def return_problems(out: Path) -> list[str]:
    """Why `out` would not all come back from a device call ([] when it would): more than 8 files, a file over
    16 MiB, over 64 MiB in all (less a margin for the log), deeper than 2 folders, or not a plain file."""
    files = sorted(p for p in out.rglob("*") if not p.is_dir())
    problems = [f"{len(files)} files (at most {RETURN_FILES} come back)"] if len(files) > RETURN_FILES else []
    total = 0
    for f in files:
        rel = f.relative_to(out)
        if f.is_symlink() or not f.is_file():
            problems.append(f"{rel}: not a plain file")
            continue
        size = f.stat().st_size
        total += size
        if size > RETURN_FILE_BYTES:
            problems.append(f"{rel}: {size / 2**20:.1f} MiB (at most 16 MiB a file)")
        if len(rel.parts) - 1 > RETURN_DEPTH:
            problems.append(f"{rel}: {len(rel.parts) - 1} folders down (at most {RETURN_DEPTH})")
    if total > RETURN_BYTES - RETURN_MARGIN:
        problems.append(f"{total / 2**20:.1f} MiB in all (at most 64 MiB, less {RETURN_MARGIN >> 20} MiB margin)")
    return problems


def pack() -> None:
    """OUT holds only what comes back: log.txt, summary.json, results.tar.gz, the store parts; the store is
    dropped (said in the summary) when it would push the rest over the limits. Then the summaries to stdout."""
    OUT.mkdir(parents=True, exist_ok=True)
    for extra in OUT.iterdir():  # anything else a step left in OUT would count against the 8 files
        if extra.name not in ("log.txt", "summary.json", "store") and not extra.name.startswith("results.tar.gz"):
            shutil.rmtree(extra) if extra.is_dir() and not extra.is_symlink() else extra.unlink()
    info: dict[str, Any] = {"store_parts": [p.name for p in pack_store()]}
    update_summary("pack", info)
    info["results"] = [p.name for p in pack_results()]
    shutil.copyfile(summary_path(), OUT / "summary.json")
    problems = return_problems(OUT)
    if problems and info["store_parts"]:
        shutil.rmtree(OUT / "store")
        info["store_dropped"] = f"the store would not come back with the rest ({'; '.join(problems)}): dropped"
        info["store_parts"] = []
        problems = return_problems(OUT)
    info["problems"] = problems
    info["files"] = {str(p.relative_to(OUT)): p.stat().st_size for p in sorted(OUT.rglob("*")) if p.is_file()}
    update_summary("pack", info)
    shutil.copyfile(summary_path(), OUT / "summary.json")
    print("== summary.json", flush=True)
    print(json.dumps(load_summary(), indent=1), flush=True)
    print("== pytest summary", flush=True)
    print(pytest_summary(WORK / "pytest.txt"), flush=True)


def pytest_summary(path: Path) -> str:
    """pytest's short summary (its -rs/-ra lines and the final count), or why there is none."""
    if not path.exists():
        return "(no pytest output)"
    lines = path.read_text(errors="replace").splitlines()
    at = next((i for i, ln in enumerate(lines) if "short test summary info" in ln), None)
    keep = lines[at:] if at is not None else lines[-5:]
    return "\n".join(keep[-40:])


STEPS = {"env": env, "pack": pack}
LIMITED = {"profiles": profiles, "fixtures": fixtures, "collect": collect}


if __name__ == "__main__":
    step, args = sys.argv[1], sys.argv[2:]
    WORK.mkdir(parents=True, exist_ok=True)
    try:
        if step in LIMITED:
            LIMITED[step](float(args[0]))
        elif step == "profile-one":
            profile_one(*args)
        elif step == "record":
            record(*args)
        else:
            STEPS[step]()
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception:
        traceback.print_exc()
        sys.exit(1)
