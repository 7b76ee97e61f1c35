"""The Python half of scripts/gpu/run_on_device.sh: everything the lent GPU machine does for Hase, in one process
per step, writing under OUT. Steps (argv[1]): `profiles`, `fixtures`, `collect`, `pack`.

  profiles  `hase profile --ep cuda --json` (and the text report) on a ResNet-50-size and a BERT-base-size
            zoo model at batch 1 and 64, built here offline; summary.json: per model the nodes' GPU time
            against the run's GPU busy time (the 5 % check) and the CPU-bound / GPU-bound verdict
  fixtures  small real CUDA profiles with their CUPTI records and clock pair (gpu_fixtures/), to replace the
            constructed ones in tests/profiling/gpu/cupti_cases.py
  collect   `hase collect` of the default zoo + tests/data/models on configs/devices_gpu.toml, stopped at the
            time limit (resumable: what was committed stays)
  pack      the store checkpointed and cut into parts of at most 16 MiB (store/hase_gpu.sqlite.part-*)

HASE_GPU_DRY=1 runs it all on the CPU EP with small models, to check the script on a machine without a GPU.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from pathlib import Path

import onnx

DRY = os.environ.get("HASE_GPU_DRY") == "1"
EP = "cpu" if DRY else "cuda"
OUT = Path(os.environ.get("OUT", "gpu_out"))
MODELS = Path(os.environ.get("HASE_GPU_MODELS", "/tmp/hase_gpu_models"))
PART_BYTES = 16 * 1024 * 1024
RESNET50 = {"depth": 50, "width": 1.0, "resolution": 224}
BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "seq": 128, "vocab": 30522}
if DRY:
    RESNET50 = {"depth": 10, "width": 0.25, "resolution": 64}
    BERT_BASE = {"layers": 1, "hidden": 64, "heads": 2, "seq": 32, "vocab": 2048}


def zoo_model(family: str, params: dict[str, object]) -> Path:
    """A zoo model built offline (random weights, static shapes) under MODELS."""
    from hase.zoo.build import build_model
    from hase.zoo.registry import get_family

    spec = get_family(family).spec(params)
    path = MODELS / f"{spec.name}.onnx"
    if not path.exists():
        MODELS.mkdir(parents=True, exist_ok=True)
        onnx.save(build_model(spec), path)
    return path


def hase(argv: list[str]) -> tuple[int, str]:
    """`hase ARGV` in this process: exit code and stdout."""
    from hase.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    return rc, buf.getvalue()


def profiles() -> None:
    out = OUT / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for family, params in (("resnet", RESNET50), ("bert", BERT_BASE)):
        for batch in (1, 64):
            path = zoo_model(family, {**params, "batch": batch})
            keep = ["--keep-profile", str(out / path.stem)] if batch == 1 else []
            args = ["profile", str(path), "--ep", EP, "--runs", "20", "--warmup", "5", *keep]
            t0 = time.perf_counter()
            rc, text = hase(args)
            (out / f"{path.stem}.txt").write_text(text)
            rc_json, js = hase([*args[:8], "--json"])
            (out / f"{path.stem}.json").write_text(js)
            summary[path.stem] = {"rc": [rc, rc_json], "seconds": round(time.perf_counter() - t0, 1),
                                  **_check(json.loads(js) if rc_json == 0 else {})}
            print(path.stem, summary[path.stem], flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


def _check(report: dict) -> dict:
    """The 5 % check (Σ nodes' GPU busy vs the run's GPU busy, medians) and the verdict of one profile."""
    gpu = report.get("gpu")
    if not gpu:
        return {"gpu": None, "findings": report.get("findings")}
    busy = sorted(r["gpu_busy_us"] for r in gpu["runs"])[len(gpu["runs"]) // 2]
    nodes = sum(n["gpu_busy_us"] for n in gpu["nodes"])
    return {"node_sum_us": nodes, "busy_us": busy, "ratio": nodes / busy if busy else None,
            "within_5pct": bool(busy) and abs(nodes / busy - 1) <= 0.05, "verdict": gpu["verdict"]}


def fixtures() -> None:
    from hase.measure.types import EPConfig
    from hase.profiling.run import profile_model

    out = OUT / "gpu_fixtures"
    out.mkdir(parents=True, exist_ok=True)
    ep = EPConfig(name=f"{EP}0", ep=EP)
    for family, params in (("resnet", {"depth": 10, "width": 0.25, "resolution": 64, "batch": 1}),
                           ("bert", {"layers": 1, "hidden": 64, "heads": 2, "seq": 32, "vocab": 2048})):
        path = zoo_model(family, params)
        work = out / path.stem
        res = profile_model(path, ep, runs=3, warmup=1, workdir=work, cupti=None if DRY else True)
        shutil.move(str(res.profile_path), str(out / f"{path.stem}.profile.json"))
        shutil.rmtree(work, ignore_errors=True)
        if res.gpu is not None:
            res.gpu.records.to_csv(out / f"{path.stem}.cupti.csv", index=False)
            clock = res.gpu.clock
            (out / f"{path.stem}.clock.json").write_text(json.dumps(
                {"cupti_ns": clock.cupti_ns, "wall_ns": clock.wall_ns, "profile_start_ns": clock.profile_start_ns,
                 "monotonic_ns_now": time.monotonic_ns(), "time_ns_now": time.time_ns(),
                 "metadata": res.metadata}, indent=1))
        print("fixture", path.stem, "cupti" if res.gpu is not None else "no cupti", flush=True)


def collect(limit_s: float) -> None:
    store = OUT / "store" / "hase_gpu.sqlite"
    store.parent.mkdir(parents=True, exist_ok=True)
    devices = "configs/devices.toml" if DRY else "configs/devices_gpu.toml"
    cmd = [sys.executable, "-c", "import sys; from hase.cli import main; sys.exit(main(sys.argv[1:]))", "collect",
           "--devices", devices, "--store", str(store), "--zoo", "configs/zoo_small.toml",
           "--zoo-dir", str(MODELS / "zoo"), "--models-dir", "tests/data/models"]
    if DRY:
        cmd += ["--device", "cpu-1t", "--limit", "2"]
    t0 = time.perf_counter()
    with (OUT / "collect.log").open("w") as log:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=limit_s, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout (resumable: rerun to continue)"
    print(f"collect rc={rc} in {time.perf_counter() - t0:.0f} s (limit {limit_s:.0f} s)", flush=True)


def pack() -> None:
    store = OUT / "store" / "hase_gpu.sqlite"
    if not store.exists():
        print("pack: no store", flush=True)
        return
    with contextlib.closing(sqlite3.connect(store)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = store.read_bytes()
    for i in range(0, len(data), PART_BYTES):
        (store.parent / f"{store.name}.part-{i // PART_BYTES:03d}").write_bytes(data[i:i + PART_BYTES])
    store.unlink()
    for extra in store.parent.glob(store.name + "[-.]*"):  # -wal, -shm, .lock (not the parts)
        if ".part-" not in extra.name:
            extra.unlink()
    print(f"pack: {len(data)} bytes in {(len(data) + PART_BYTES - 1) // PART_BYTES} parts", flush=True)


if __name__ == "__main__":
    step = sys.argv[1]
    try:
        if step == "collect":
            collect(float(sys.argv[2]))
        else:
            {"profiles": profiles, "fixtures": fixtures, "pack": pack}[step]()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
