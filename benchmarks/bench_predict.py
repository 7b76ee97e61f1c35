"""Benchmark of `hase predict` against measuring the same models: a ResNet-50 (224 px), a ~500 MB model and a
batch of 100 model files, each predicted by the `hase predict --json` command (wall time and peak RSS of the
process, median over --repeat runs) and measured the way a user would check it (a fresh process: create an
ONNX Runtime session in the predictor's configuration and run the model --runs times); plus the shipped
predictor's held-out accuracy from its manifest.

Targets (issue 11): ResNet-50 predicted in under 0.5 s of command wall time, a 500 MB model in under 1 s and
300 MB peak RSS, 100 models in under 3 s; prediction far cheaper than measurement.

Every child runs as an installed Hase does: with its compiled .pyc files (a wheel install compiles them; here they
are written once, by the warm-up run, into a temporary PYTHONPYCACHEPREFIX, even where PYTHONDONTWRITEBYTECODE is
set), so start-up is not Python compiling Hase's sources on every call.
Usage: python benchmarks/bench_predict.py [--device cpu-1t] [--predictors DIR] [--repeat 5] [--batch 100]
       [--big-mb 500] [--runs 10] [--json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import print_figures

from hase import paths

REPO = Path(__file__).resolve().parents[1]
HASE = [sys.executable, "-m", "hase.cli"]

# A child builds each model, so that its memory is never in a measured process's peak RSS.
RESNET50 = ("import onnx, sys; from hase.zoo import build_model, get_family; "
            "spec = get_family('resnet').spec({'depth': 50, 'width': 1.0, 'resolution': 224, 'batch': 1}); "
            "onnx.save(build_model(spec), sys.argv[1])")
BIG = """
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
path, n, d = sys.argv[1], int(sys.argv[2]), 2048  # n blocks of MatMul 2048x2048 (16 MB) + Add + Gelu-like Tanh
rng = np.random.default_rng(0)
nodes, inits, cur = [], [], "x"
for i in range(n):
    inits += [numpy_helper.from_array((rng.standard_normal((d, d), dtype=np.float32) * 0.02), f"w{i}"),
              numpy_helper.from_array(np.zeros(d, np.float32), f"b{i}")]
    nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
              helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
              helper.make_node("Tanh", [f"a{i}"], [f"t{i}"], name=f"tanh{i}")]
    cur = f"t{i}"
g = helper.make_graph(nodes, "matmul_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, d])],
                      [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 128, d])], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, path)
"""
# What a user does to check a model: a fresh process, an ORT session in the predictor's configuration, N runs.
MEASURE = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np, onnxruntime as ort
threads, inter, level, runs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
levels = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}
session_s = run_s = 0.0
for path in sys.argv[5:]:
    t1 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, inter
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, levels[level])
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        dtype = np.int64 if "int64" in i.type else np.int32 if "int32" in i.type else np.float32
        feeds[i.name] = np.zeros(i.shape, dtype) if dtype != np.float32 else np.random.rand(*i.shape).astype(dtype)
    t2 = time.perf_counter()
    for _ in range(runs):
        sess.run(None, feeds)
    t3 = time.perf_counter()
    session_s, run_s = session_s + t2 - t1, run_s + t3 - t2
print(json.dumps({"import_s": t1 - t0 if sys.argv[5:] else 0.0, "session_s": session_s, "runs_s": run_s}))
"""


def build(code: str, path: Path, *args: str) -> Path:
    subprocess.run([sys.executable, "-c", code, str(path), *args], check=True, cwd=REPO)
    return path


def zoo_files(tmp: Path) -> list[Path]:
    """The zoo's model files (built into tmp with `hase zoo` when `make zoo` has not been run) and the
    exported models on disk."""
    files = sorted((REPO / paths.ZOO_DIR).rglob("*.onnx"))
    if not files:
        subprocess.run([*HASE, "-q", "zoo", "--out", str(tmp / "zoo")], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
        files = sorted((tmp / "zoo").rglob("*.onnx"))
    return files + sorted((REPO.parent / "shared/models/exported").glob("*.onnx"))


def child_env(pycache: Path) -> dict[str, str]:
    """The environment of the measured children: this one, with .pyc files cached under `pycache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB of this child alone, stdout) of one process."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not the max over all children
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} ... exited with {os.waitstatus_to_exitcode(status)}")
        out.seek(0)
        return wall, usage.ru_maxrss / 1024, out.read()


def compare(models: list[Path], extra: list[str], measure_args: list[str], repeat: int,
            env: dict[str, str]) -> dict[str, Any]:
    """Predict and measure `models` `repeat` times, interleaved; medians (and ranges) of each figure."""
    child([*HASE, "-q", "predict", *map(str, models), "--json", *extra], env)  # warm the page cache and .pyc files
    pw, prss, graph, mw, mrss, msess = [], [], [], [], [], []
    for _ in range(repeat):
        wall, rss, out = child([*HASE, "-q", "predict", *map(str, models), "--json", *extra], env)
        got = json.loads(out)
        got = got if isinstance(got, list) else [got]
        if any("error" in g for g in got):
            raise SystemExit(f"hase predict failed: {next(g['error'] for g in got if 'error' in g)}")
        pw.append(wall)
        prss.append(rss)
        graph.append(sum(g["timings_s"]["graph_s"] + g["timings_s"]["predict_s"] for g in got))
        wall, rss, out = child([sys.executable, "-c", MEASURE, *measure_args, *map(str, models)], env)
        mw.append(wall)
        mrss.append(rss)
        msess.append(json.loads(out)["session_s"] + json.loads(out)["runs_s"])
    med = statistics.median
    return {"predict_wall_s": round(med(pw), 3), "predict_wall_range_s": [round(min(pw), 3), round(max(pw), 3)],
            "predict_rss_mb": round(med(prss), 1), "predict_work_s": round(med(graph), 3),
            "measure_wall_s": round(med(mw), 3), "measure_wall_range_s": [round(min(mw), 3), round(max(mw), 3)],
            "measure_rss_mb": round(med(mrss), 1), "measure_session_and_runs_s": round(med(msess), 3),
            "measure_over_predict": round(med(mw) / med(pw), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=paths.DEFAULT_DEVICE)
    ap.add_argument("--predictors", default=None)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each command; medians are reported")
    ap.add_argument("--batch", type=int, default=100, help="model files in the batch call")
    ap.add_argument("--big-mb", type=int, default=500, help="size of the large model (MatMul chain), MB")
    ap.add_argument("--runs", type=int, default=10, help="inferences per model when measuring")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import onnxruntime

    from hase.predict.bundle import load_bundle, predictor_dir, read_manifest
    from hase.runtime.sessions import cpu_model

    extra = ["--device", args.device] + (["--predictors", args.predictors] if args.predictors else [])
    where = predictor_dir(args.device, args.predictors)
    manifest, ep = read_manifest(where), load_bundle(where).ep_config()
    measure_args = [str(ep.intra_op_threads), str(ep.inter_op_threads), ep.opt_level, str(args.runs)]
    with tempfile.TemporaryDirectory(prefix="hase_bench_predict_") as tmp_dir:
        tmp = Path(tmp_dir)
        env = child_env(tmp / "pycache")
        resnet = build(RESNET50, tmp / "resnet50_r224_b1.onnx")
        big = build(BIG, tmp / "matmul_chain.onnx", str(max(1, round(args.big_mb / 16.8))))
        batch = list(itertools.islice(itertools.cycle(zoo_files(tmp)), args.batch))
        r50 = compare([resnet], extra, measure_args, args.repeat, env)
        large = compare([big], extra, measure_args, args.repeat, env)
        many = compare(batch, extra, measure_args, max(1, args.repeat // 2), env)
        big_mb = big.stat().st_size / 1e6
    target = manifest.default_target
    held = manifest.target(target).held_out
    figures: dict[str, Any] = {
        "device": manifest.device, "ort_version": onnxruntime.__version__, "host_cpu": cpu_model(),
        "host_cpus": os.cpu_count(), "config": f"{ep.provider}, {ep.intra_op_threads} intra-op / "
                                               f"{ep.inter_op_threads} inter-op threads, {ep.opt_level}",
        "repeat": args.repeat, "measure_runs_per_model": args.runs,
        **{f"resnet50_{k}": v for k, v in r50.items()},
        "big_model_mb": round(big_mb, 1), **{f"big_{k}": v for k, v in large.items()},
        f"batch_{args.batch}_models": len(batch), **{f"batch_{k}": v for k, v in many.items()},
        "target": target, "held_out_acc10": round(held.acc10, 3), "held_out_rmspe": round(held.rmspe, 2),
        "predictor_cpu_model": manifest.device_meta.cpu_model,
    }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
