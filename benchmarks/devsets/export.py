#!/usr/bin/env python3
"""Build one of the later development sets (its table, specs/devNN.csv) into OUT, one folder a part.

Every model is a third-party architecture (timm or transformers) built from its library config with random weights
(nothing downloaded from a model hub), BatchNorm statistics set from two train-mode passes over random input,
exported with `torch.onnx.export` (TorchScript exporter, opset 17, static shapes; the dynamo exporter at opset 18
only as a fallback, for the rows whose `dynamo_fallback` is true), checked with onnx.checker, run once in ONNX Runtime
and compared with torch, then timed roughly (ONNX Runtime CPU, 1 thread; re-measure before relying on it).

    python benchmarks/devsets/export.py --set 11 --out models/dev11        # everything (normally via build.sh)
    python benchmarks/devsets/export.py --set 11 --out models/dev11 --only NAME,NAME
    python benchmarks/devsets/export.py --set 2 --list                     # the specs, their family and part
    python benchmarks/devsets/export.py --specs my_table.csv --out OUT     # a table not (yet) in specs/

The table's `part` column puts each model in `check` or `heldout` (the second set's split, frozen; every later set is
all held out). Writes OUT/<part>/<name>.onnx, OUT/<part>/models.tsv (one folder per part, each usable as
`hase evaluate --devset OUT/<part>`), OUT/models.tsv (all parts, `file` relative to OUT), OUT/failed.tsv (name,
family, reason) and OUT/logs/<name>.json (everything recorded about one export).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from specs import PARTS, Spec, TensorLiteral, read_table, table_of  # noqa: E402

OPSET = 17
MAX_MB = 400.0


# ------------------------------------------------------------------ building one model


def _torchvision_stub() -> None:
    """timm imports torchvision (FrozenBatchNorm2d, and dataset/transform names in timm.data at import time), and
    PyPI's torchvision does not load beside the CPU torch wheel. Give timm inert stand-ins: every name under
    `torchvision` (but `torchvision.models`, so timm's FX helpers report themselves unavailable) is a class that
    fails only when called. None of the exported models uses one."""
    try:
        import torchvision  # noqa: F401  (a working real one is fine)
        return
    except Exception:
        for k in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:
            del sys.modules[k]
    import importlib.abc
    import importlib.machinery

    class Inert(type):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Inert(name, (), {})

        def __call__(cls, *a, **k):
            raise RuntimeError(f"torchvision stand-in {cls.__name__} called")

    class Module(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            val = Inert(name, (), {})
            setattr(self, name, val)
            return val

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] == "torchvision" and not fullname.startswith("torchvision.models"):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            m = Module(spec.name)
            m.__path__ = []
            m.__version__ = "0.0.0+stand-in"
            return m

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Finder())


def build(s: Spec):
    import torch

    if s.lib == "timm":
        _torchvision_stub()
        import timm

        return timm.create_model(s.model, pretrained=False, exportable=True, **s.config_kwargs).eval()
    import transformers

    cfg = getattr(transformers, s.config)(**s.config_kwargs)
    cfg._attn_implementation = "eager"  # what the TorchScript exporter traces reliably
    m = getattr(transformers, s.model)(cfg)
    if s.sub:
        m = getattr(m, s.sub)()
    names = [n for n, *_ in s.inputs]
    call_kwargs = {k: torch.tensor(v.data) if isinstance(v, TensorLiteral) else v for k, v in s.call_kwargs.items()}

    class Plain(torch.nn.Module):
        """Inputs by position (as the exporter passes them), one tensor out."""

        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, *args):
            out = self.m(**dict(zip(names, args, strict=True)), **call_kwargs)
            if isinstance(out, torch.Tensor):  # a model that returns a bare tensor (a vocoder)
                return out
            return getattr(out, s.attr) if s.attr and hasattr(out, s.attr) else out[0]

    return Plain().eval()


def feeds_for(inputs, seed: int = 0, batch: int | None = None) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for name, spec_shape, kind, hi in inputs:
        shape = (batch, *spec_shape[1:]) if batch else tuple(spec_shape)
        if kind == "f32":
            out[name] = rng.standard_normal(shape).astype(np.float32)
        elif kind == "ids":
            out[name] = rng.integers(0, hi, size=shape, dtype=np.int64)
        elif kind == "mask":
            out[name] = np.ones(shape, dtype=np.int64)
        else:
            raise ValueError(kind)
    return out


def inputs_str(inputs) -> str:
    dt = {"f32": "float32", "ids": "int64", "mask": "int64"}
    return ";".join(f"{n}:{dt[k]}[{'x'.join(map(str, s))}]" for n, s, k, _ in inputs)


def set_bn_stats(model, s: Spec) -> int:
    """Random init leaves BatchNorm at running stats (0, 1), so deep random CNNs drift to denormal or huge
    activations (slow paths on CPUs, unlike a trained net). Reset BN to torch's defaults and take its statistics
    from two train-mode passes over random input (batch >= 4), so every BN output is about unit scale."""
    import torch

    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for m in bns:
        m.reset_parameters()
        m.momentum = None  # cumulative average over the passes
    model.train()
    with torch.no_grad():
        for seed in (1, 2):
            f = feeds_for(s.inputs, seed=seed, batch=max(4, s.batch))
            model(*(torch.from_numpy(f[n]) for n, *_ in s.inputs))
    model.eval()
    for m in bns:
        m.momentum = 0.1
    return len(bns)


def export_one(s: Spec, out: Path) -> dict:  # noqa: PLR0912, PLR0915  (one linear recipe)
    """Export and verify one model into out/<part>/; record everything in out/logs/<name>.json."""
    import numpy as np
    import torch

    name, part = s.name, s.part
    path = out / part / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    res = dict(name=name, family=s.family, kind=s.kind, part=part, file=f"{part}/{name}.onnx", source=s.source,
               inputs=inputs_str(s.inputs), batch=s.batch, seq=s.seq, ok=False)
    t0 = time.time()
    try:
        model = build(s)
        res["params_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 3)
        res["bn_set"] = set_bn_stats(model, s)
        if s.reparam:
            from timm.utils.model import reparameterize_model

            model = reparameterize_model(model.eval())
        feeds = feeds_for(s.inputs)
        args = tuple(torch.from_numpy(feeds[n]) for n, *_ in s.inputs)
        stats = dict(min_std=float("inf"), max_abs=0.0, denormals=0)

        def watch(mod, inp, o):
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 1:
                o = o.detach().float()
                stats["min_std"] = min(stats["min_std"], float(o.std()))
                stats["max_abs"] = max(stats["max_abs"], float(o.abs().max()))
                stats["denormals"] += int(((o != 0) & (o.abs() < 1.1754944e-38)).sum())

        hooks = [m.register_forward_hook(watch) for m in model.modules() if not list(m.children())]
        with torch.no_grad():
            ref = model(*args)
        for h in hooks:
            h.remove()
        res.update({f"act_{k}": v for k, v in stats.items()})
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        names = [n for n, *_ in s.inputs]
        errors = []
        for dynamo in (False, True) if s.dynamo_fallback else (False,):
            try:
                path.unlink(missing_ok=True)
                with torch.no_grad():
                    if dynamo:
                        torch.onnx.export(model, args, str(path), input_names=names, output_names=["output"],
                                          opset_version=18, dynamo=True, external_data=False)
                    else:
                        torch.onnx.export(model, args, str(path), input_names=names, output_names=["output"],
                                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
                res["exporter"] = "dynamo" if dynamo else "torchscript"
                break
            except Exception as e:
                errors.append(f"{'dynamo' if dynamo else 'torchscript'}: {type(e).__name__}: {str(e)[:300]}")
        if "exporter" not in res:
            raise RuntimeError(" | ".join(errors))
        if errors:
            res["torchscript_error"] = errors[0]
        res["export_s"] = round(time.time() - t0, 1)
        del model
        mb = path.stat().st_size / 2**20
        res["onnx_mb"] = round(mb, 2)
        if mb > MAX_MB:
            raise RuntimeError(f"ONNX file is {mb:.0f} MB > {MAX_MB:.0f} MB")

        import onnx
        import onnxruntime as ort

        mp = onnx.load(str(path))
        onnx.checker.check_model(mp)
        res["nodes"] = len(mp.graph.node)
        res["opset"] = max(o.version for o in mp.opset_import if o.domain in ("", "ai.onnx"))
        ops: dict[str, int] = {}
        for n in mp.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        res["top_ops"] = ",".join(f"{k}:{v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:6])
        for vi in mp.graph.input:
            if any(not d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim):
                raise RuntimeError(f"input {vi.name} has a symbolic dimension")
        dims = mp.graph.output[0].type.tensor_type.shape.dim
        if len(dims) != ref.dim() or any(not d.HasField("dim_value") for d in dims):
            # the TorchScript exporter sometimes leaves an output dimension symbolic: pin torch's shape
            mp.graph.output[0].type.tensor_type.ClearField("shape")
            for v in ref.shape:
                mp.graph.output[0].type.tensor_type.shape.dim.add().dim_value = int(v)
            onnx.save(mp, str(path))
            res["output_shape_pinned"] = True
        del mp
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        got = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        ref = ref.detach().numpy()
        if got.shape != ref.shape:
            raise RuntimeError(f"onnxruntime output shape {got.shape} != torch {ref.shape}")
        if not np.all(np.isfinite(got)):
            raise RuntimeError("non-finite values in the onnxruntime output")
        diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
        scale = float(np.max(np.abs(ref))) or 1.0
        res.update(max_abs_diff_vs_torch=diff, rel_diff_vs_torch=diff / scale,
                   output_shape="x".join(map(str, got.shape)))
        if diff / scale > 1e-2:
            raise RuntimeError(f"onnxruntime output differs from torch: max |diff| {diff:.3g} vs max |out| {scale:.3g}")
        res["ok"] = True
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {str(e)[:800]}"
        res["trace"] = traceback.format_exc()[-3000:]
        path.unlink(missing_ok=True)
    res["total_s"] = round(time.time() - t0, 1)
    (out / "logs" / f"{name}.json").write_text(json.dumps(res, indent=1))
    return res


# ------------------------------------------------------------------ timing and tables


def time_model(path: Path, s: Spec, warmup: int = 3, runs: int = 5, min_s: float = 1.0, max_runs: int = 50):
    """Rough ONNX Runtime CPU latency, 1 thread: median of at least `runs` runs and at least `min_s` seconds."""
    import statistics

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feeds = feeds_for(s.inputs)
    for _ in range(warmup):
        sess.run(None, feeds)
    ts: list[float] = []
    while len(ts) < runs or (sum(ts) < min_s * 1e3 and len(ts) < max_runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts), min(ts), max(ts), len(ts)


COLS = ["file", "name", "family", "kind", "part", "source", "exporter", "opset", "inputs", "batch", "seq",
        "output_shape", "onnx_mb", "nodes", "params_m", "ort_cpu_1t_median_ms", "ort_cpu_1t_min_ms",
        "ort_cpu_1t_max_ms", "timed_runs"]


def load(out: Path, name: str) -> dict | None:
    p = out / "logs" / f"{name}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def write_tables(out: Path, specs: list[Spec]) -> tuple[list[dict], list[dict]]:
    ok, failed = [], []
    for s in specs:
        r = load(out, s.name)
        if r is None:
            continue
        if not r.get("ok"):
            failed.append(r)
        elif "ort_cpu_1t_median_ms" in r:  # exported but not timed yet: in neither table
            ok.append(r)

    def tsv(path: Path, rows: list[dict], base: str = "") -> None:
        with open(path, "w") as f:
            f.write("\t".join(COLS) + "\n")
            for row in rows:
                r = dict(row, file=row["file"][len(base):] if base else row["file"])
                f.write("\t".join(str(r.get(c, "")) for c in COLS) + "\n")

    tsv(out / "models.tsv", ok)
    for part in [p for p in PARTS if any(s.part == p for s in specs)]:
        (out / part).mkdir(parents=True, exist_ok=True)
        tsv(out / part / "models.tsv", [r for r in ok if r["part"] == part], base=f"{part}/")
    with open(out / "failed.tsv", "w") as f:
        f.write("name\tfamily\tpart\tsource\treason\n")
        for r in failed:
            why = r.get("error", "").replace("\t", " ").replace("\n", " ")
            f.write(f"{r['name']}\t{r.get('family', '')}\t{r.get('part', '')}\t{r.get('source', '')}\t{why}\n")
    return ok, failed


def main() -> int:  # noqa: PLR0912, PLR0915
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--set", help="the dev set's number (its table is specs/devNN.csv)")
    which.add_argument("--specs", help="a spec table (CSV, specs.py's columns) not in specs/")
    ap.add_argument("--out", default=None, help="output folder (default models/dev<set>)")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # export one model in this process
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--measure-only", action="store_true", help="only (re)time the exports already there")
    ap.add_argument("--skip-existing", action="store_true", help="keep models already exported and verified")
    ap.add_argument("--timeout", type=int, default=600, help="per-model export timeout (s)")
    a = ap.parse_args()
    try:
        table = table_of(a.set) if a.set else Path(a.specs)
        specs = read_table(table)
    except (ValueError, OSError) as e:
        ap.error(str(e))
    by_name = {s.name: s for s in specs}
    if a.list:
        for s in specs:
            print(f"{s.name}\t{s.family}\t{s.kind}\t{s.part}\t{inputs_str(s.inputs)}\t{s.source}")
        return 0
    if a.out is None and not a.set:
        ap.error("--specs needs --out")
    names = [s.name for s in specs]
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        bad = [n for n in names if n not in by_name]
        if bad:
            print(f"unknown model names: {bad} (not in {table})", file=sys.stderr)
            return 2
    out = Path(a.out or f"models/dev{int(a.set)}")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    if a.one:
        r = export_one(by_name[a.one], out)
        print(json.dumps({k: v for k, v in r.items() if k != "trace"}))
        return 0 if r["ok"] else 1

    t_all = time.time()
    if not a.measure_only:
        for i, name in enumerate(names, 1):
            old = load(out, name)
            if a.skip_existing and old and old.get("ok") and (out / old["file"]).is_file():
                print(f"[{i}/{len(names)}] {name}: kept", flush=True)
                continue
            t = time.time()
            try:
                p = subprocess.run([sys.executable, __file__, "--one", name, "--out", str(out), "--specs", str(table)],
                                   check=False, capture_output=True, text=True, timeout=a.timeout)
                rc, tail = p.returncode, (p.stdout + p.stderr)[-1500:]
            except subprocess.TimeoutExpired:
                rc, tail = -1, f"timed out after {a.timeout} s"
            r = load(out, name)
            if rc not in (0, 1) or r is None or r.get("total_s") is None:
                s = by_name[name]
                r = dict(name=name, family=s.family, kind=s.kind, part=s.part, source=s.source,
                         file=f"{s.part}/{name}.onnx", ok=False,
                         error=f"export process exited with {rc}: {tail[-600:]}")
                (out / "logs" / f"{name}.json").write_text(json.dumps(r, indent=1))
                (out / r["file"]).unlink(missing_ok=True)
            status = (f"ok {r.get('exporter')} {r.get('onnx_mb')} MB {r.get('nodes')} nodes" if r.get("ok")
                      else "FAILED " + r.get("error", "")[:300])
            print(f"[{i}/{len(names)}] {name} ({r['family']}, {r['part']}): {status} ({time.time() - t:.0f} s)",
                  flush=True)
    os.sync()  # let the freshly written models reach the disk before timing
    time.sleep(2)
    for name in names:
        r = load(out, name)
        if not r or not r.get("ok"):
            continue
        try:
            med, lo, hi, n = time_model(out / r["file"], by_name[name])
            r.update(ort_cpu_1t_median_ms=round(med, 3), ort_cpu_1t_min_ms=round(lo, 3), ort_cpu_1t_max_ms=round(hi, 3),
                     timed_runs=n)
            print(f"[time] {name}: {med:.1f} ms", flush=True)
        except Exception as e:
            r.update(ok=False, error=f"timing failed: {type(e).__name__}: {str(e)[:500]}")
            print(f"[time] {name}: FAILED {r['error']}", flush=True)
        (out / "logs" / f"{name}.json").write_text(json.dumps(r, indent=1))
    ok, failed = write_tables(out, specs)
    by_part = {p: sum(r["part"] == p for r in ok) for p in PARTS}
    print(f"\n{len(ok)} models ok ({by_part['check']} check, {by_part['heldout']} heldout), {len(failed)} failed, "
          f"{time.time() - t_all:.0f} s -> {out}/models.tsv, {out}/failed.tsv")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
