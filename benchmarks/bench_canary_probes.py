"""Benchmark: which interference does each canary probe see?

The canary (`hase/measure/canary.py`) times a 256x256 MatMul and a one-Add session run; both stay in the cache.
This times them, two memory-bound probes (an Add over 1M and 4M floats: 12 and 48 MB moved a run) and a real
model, on one intra-op thread, three ways: quiet, with a busy loop in another process (`cpu`), and with another
process streaming 512 MB copies (`mem`, memory-bandwidth contention). Each figure is the median of `--rounds`
rounds (every probe once a round, interleaved); the ratios are against the quiet rounds.

Only a benchmark: the figures depend on the machine and on the other tenants of the minute, so quote them with the
date, the machine and the command.

Usage: python benchmarks/bench_canary_probes.py MODEL.onnx [--rounds 7] [--json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from hase.measure.canary import canary_timer
from hase.measure.types import CanaryPolicy
from hase.runtime import sessions
from hase.runtime.types import EPConfig

EP = EPConfig("cpu-1t", intra_op_threads=1)
LOADS = {"quiet": None, "cpu": "while True: pass",
         "mem": "import numpy as np\na = np.ones(1 << 27, np.float32); b = np.empty_like(a)\n"
                "while True: np.copyto(b, a)"}


def _add_model(n: int) -> onnx.ModelProto:
    a, b, y = (helper.make_tensor_value_info(x, TensorProto.FLOAT, [n]) for x in ("a", "b", "y"))
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "stream", [a, b], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _stream_probe(n: int, runs: int) -> Callable[[], float]:
    """Mean ms of `runs` runs of an Add over n floats (inputs bound once, as the canary binds its own)."""
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal(n).astype(np.float32) for x in ("a", "b")}
    runner = sessions.BoundRunner(sessions.make_session(_add_model(n).SerializeToString(), EP, opt_level="disabled"),
                                 feeds, EP)
    runner.run()

    def once() -> float:
        t0 = time.perf_counter()
        for _ in range(runs):
            runner.run()
        return (time.perf_counter() - t0) * 1e3 / runs
    return once


def _model_probe(path: str, runs: int = 5) -> Callable[[], float]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.random.default_rng(0).standard_normal(
        [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in sess.get_inputs()}
    sess.run(None, feeds)

    def once() -> float:
        t0 = time.perf_counter()
        for _ in range(runs):
            sess.run(None, feeds)
        return (time.perf_counter() - t0) * 1e3 / runs
    return once


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a float-input ONNX model to time beside the probes")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    canary = canary_timer(EP, CanaryPolicy())
    probes: dict[str, Callable[[], float]] = {}
    probes["canary MatMul"] = lambda: canary()[0]
    probes["canary session run"] = lambda: canary()[1]
    probes["Add 1M floats"] = _stream_probe(1 << 20, 10)
    probes["Add 4M floats"] = _stream_probe(1 << 22, 3)
    probes["model"] = _model_probe(args.model)
    medians: dict[str, dict[str, float]] = {}
    for load, code in LOADS.items():
        other = subprocess.Popen([sys.executable, "-c", code]) if code else None
        try:
            time.sleep(2)
            rounds = [{k: f() for k, f in probes.items()} for _ in range(args.rounds)]
        finally:
            if other is not None:
                other.kill()
                other.wait()
        medians[load] = {k: float(np.median([r[k] for r in rounds])) for k in probes}
        time.sleep(2)
    ratios = {load: {k: v / medians["quiet"][k] for k, v in m.items()} for load, m in medians.items()}
    if args.json:
        print(json.dumps({"ms": medians, "ratio": ratios, "rounds": args.rounds}, indent=1))
        return
    print(f"{'probe':20s}" + "".join(f"{load:>22s}" for load in LOADS))
    for k in probes:
        print(f"{k:20s}" + "".join(f"{medians[load][k]:10.3f} ms ({ratios[load][k]:4.2f}x)" for load in LOADS))


if __name__ == "__main__":
    main()
