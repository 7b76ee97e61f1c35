"""Benchmark of `hase predict`: one ResNet-50-sized model (work time, wall time, peak memory) and a batch
of 100 model files, plus the shipped predictor's held-out accuracy from its manifest.

Targets (issue 3): work after process start < 1 s, command wall time < 3 s, peak RSS < 500 MB,
100 models < 60 s; held-out ±10 % accuracy >= 90 %, RMSPE <= 8 %.
Usage: python benchmarks/bench_predict.py [--device cpu-1t] [--predictors DIR] [--model PATH] [--json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import print_figures

from hase import paths

REPO = Path(__file__).resolve().parents[1]
HASE = [sys.executable, "-m", "hase.cli"]


def resnet50(out_dir: Path) -> Path:
    """A ResNet-50 (width 1, 224x224, batch 1) from the zoo, written to out_dir by a child process: built
    here, its ~600 MB would be in every forked child's peak RSS before exec (ru_maxrss counts it)."""
    path = out_dir / "resnet_d50_w1.0_r224_b1.onnx"
    code = ("import onnx, sys; from hase.zoo import build_model, get_family; "
            "spec = get_family('resnet').spec({'depth': 50, 'width': 1.0, 'resolution': 224, 'batch': 1}); "
            "onnx.save(build_model(spec), sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, cwd=REPO)
    return path


def batch_files(n: int) -> list[Path]:
    """n model paths, cycling over the zoo and exported models on disk (each is predicted from scratch)."""
    files = sorted((REPO / paths.ZOO_DIR).rglob("*.onnx"))
    files += sorted((REPO.parent / "shared/models/exported").glob("*.onnx"))
    if not files:
        raise SystemExit("no models on disk: run `make zoo` (or `make collect`) first")
    return list(itertools.islice(itertools.cycle(files), n))


def run_predict(models: list[Path], extra: list[str]) -> tuple[float, float, object]:
    """(wall seconds, peak RSS MB of this child alone, parsed JSON) of one `hase predict --json` process."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*HASE, "-q", "predict", *map(str, models), "--json", *extra], stdout=out,
                                stderr=subprocess.DEVNULL, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not the max over all children
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"hase predict exited with {proc.returncode}")
        out.seek(0)
        return wall, usage.ru_maxrss / 1024, json.loads(out.read())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default=paths.DEFAULT_DEVICE)
    ap.add_argument("--predictors", default=None)
    ap.add_argument("--model", default=None, help="the single model to time (default: a zoo ResNet-50)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from hase.predict.bundle import predictor_dir, read_manifest

    extra = ["--device", args.device] + (["--predictors", args.predictors] if args.predictors else [])
    manifest = read_manifest(predictor_dir(args.device, args.predictors))
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else resnet50(Path(tmp))
        run_predict([model], extra)  # warm the page cache and .pyc files
        wall, peak, one = run_predict([model], extra)
        t = one["timings_s"]
        bwall, _, many = run_predict(batch_files(args.batch), extra)
    target = manifest.default_target
    held = manifest.target(target).held_out
    figures = {
        "model": Path(str(one["model"])).name, "n_kernels": one["n_kernels"],
        "predicted_ms": round(one["latency_ms"], 3),
        "work_s": round(t["load_predictor_s"] + t["graph_s"] + t["predict_s"], 3),
        "load_predictor_s": round(t["load_predictor_s"], 3), "graph_s": round(t["graph_s"], 3),
        "predict_s": round(t["predict_s"], 3), "command_wall_s": round(wall, 2), "peak_rss_mb": round(peak, 1),
        f"batch_{args.batch}_wall_s": round(bwall, 1), "batch_errors": sum(1 for m in many if "error" in m),
        "target": target, "calibration": manifest.target(target).calibration.calibration.name,
        "held_out_acc10": round(held.acc10, 3), "held_out_rmspe": round(held.rmspe, 2),
        "baselines_held_out": {b["baseline"]: round(b["rmspe"], 1) for b in manifest.baselines_held_out},
        "device": manifest.device, "cpu_model": manifest.device_meta.cpu_model,
    }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
