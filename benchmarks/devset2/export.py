#!/usr/bin/env python3
"""Build the second development set (benchmarks/devset2/specs.py) into OUT, split into `check` and `heldout`.

Every model is a third-party architecture (timm or transformers) built from its library config with random weights
(nothing downloaded from a model hub), BatchNorm statistics set from two train-mode passes over random input,
exported with `torch.onnx.export` (TorchScript exporter, opset 17, static shapes; the dynamo exporter at opset 18
only as a fallback), checked with onnx.checker, run once in ONNX Runtime and compared with torch, then timed roughly
(ONNX Runtime CPU, 1 thread; re-measure before relying on it).

    python benchmarks/devset2/export.py --out models/dev2            # everything (normally via build.sh)
    python benchmarks/devset2/export.py --out models/dev2 --only NAME,NAME
    python benchmarks/devset2/export.py --list                       # the specs, their family and part
    python benchmarks/devset2/export.py --write-split                # add new specs to split.csv (never moves one)
    python benchmarks/devset2/export.py --specs benchmarks/devset3/specs.py --out models/dev3   # another spec list

`--specs FILE` reads another spec list (default: this folder's specs.py, the second dev set). A spec list whose
module sets `PART` (the third dev set: `PART = "heldout"`) puts every model in that part and needs no split.csv; one
that sets `DYNAMO_FALLBACK = False` keeps every model on the TorchScript exporter (opset 17).

Writes OUT/<part>/<name>.onnx, OUT/<part>/models.tsv (one folder per part, each usable as
`hase evaluate --devset OUT/<part>`), OUT/models.tsv (all parts, `file` relative to OUT), OUT/failed.tsv (name,
family, reason) and OUT/logs/<name>.json (everything recorded about one export).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
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
from specs import SPEC_BY_NAME, SPECS, Spec  # noqa: E402

OPSET = 17
SPLIT_CSV = HERE / "split.csv"
SPLIT_SALT = "hase-devset2-v1"
PARTS = ("check", "heldout")
MAX_MB = 400.0
FIXED_PART: str | None = None  # set by --specs from a spec list whose module has PART: every model in that part
DYNAMO_FALLBACK = True  # a spec list whose module sets DYNAMO_FALLBACK = False fails a model TorchScript cannot export


def use_specs(path: str) -> None:
    """Read the specs from another spec list (a specs.py like this folder's; it may import this folder's `specs`).
    If it sets PART, every model goes to that part and split.csv is not used; if it sets DYNAMO_FALLBACK = False, a
    model the TorchScript exporter cannot export fails instead of falling back to the dynamo exporter."""
    global SPECS, SPEC_BY_NAME, FIXED_PART, DYNAMO_FALLBACK  # noqa: PLW0603  (the spec list the CLI chose)
    spec = importlib.util.spec_from_file_location("devset_specs", Path(path).resolve())
    assert spec and spec.loader, path
    mod = importlib.util.module_from_spec(spec)
    sys.modules["devset_specs"] = mod
    spec.loader.exec_module(mod)
    SPECS, SPEC_BY_NAME = mod.SPECS, mod.SPEC_BY_NAME
    FIXED_PART = getattr(mod, "PART", None)
    DYNAMO_FALLBACK = getattr(mod, "DYNAMO_FALLBACK", True)
    if FIXED_PART is not None and FIXED_PART not in PARTS:
        raise SystemExit(f"{path}: PART {FIXED_PART!r} is not one of {PARTS}")


# ------------------------------------------------------------------ the split (frozen once written)


def _rank(family: str) -> str:
    return hashlib.sha256(f"{SPLIT_SALT}:{family}".encode()).hexdigest()


def proposed_parts(specs: list[Spec]) -> dict[str, str]:
    """family -> part: within each kind, families ordered by a fixed hash and dealt alternately, so both parts get
    about half of every kind and a family never straddles the parts."""
    out: dict[str, str] = {}
    kinds: dict[str, list[str]] = {}
    for s in specs:
        fams = kinds.setdefault(s.kind, [])
        if s.family not in fams:
            fams.append(s.family)
    for kind in sorted(kinds):
        for i, fam in enumerate(sorted(kinds[kind], key=_rank)):
            out[fam] = PARTS[i % 2] if _rank(kind)[0] < "8" else PARTS[(i + 1) % 2]
    return out


def read_split() -> dict[str, dict[str, str]]:
    if FIXED_PART is not None:
        return {s.name: dict(name=s.name, family=s.family, kind=s.kind, part=FIXED_PART) for s in SPECS}
    if not SPLIT_CSV.is_file():
        return {}
    with open(SPLIT_CSV, newline="") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def write_split() -> int:
    """Add the specs split.csv lacks (a family already split keeps its part); never moves or drops a row."""
    rows = read_split()
    fam_part = {r["family"]: r["part"] for r in rows.values()}
    new = [s for s in SPECS if s.name not in rows]
    proposal = proposed_parts(SPECS)
    for s in new:
        part = fam_part.setdefault(s.family, proposal[s.family])
        rows[s.name] = dict(name=s.name, family=s.family, kind=s.kind, part=part)
    with open(SPLIT_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, ["name", "family", "kind", "part"], lineterminator="\n")
        w.writeheader()
        for r in rows.values():
            w.writerow({k: r[k] for k in ["name", "family", "kind", "part"]})
    print(f"{SPLIT_CSV}: {len(new)} added, {len(rows)} in all "
          f"({sum(r['part'] == 'check' for r in rows.values())} check, "
          f"{sum(r['part'] == 'heldout' for r in rows.values())} heldout)")
    return 0


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

    class Plain(torch.nn.Module):
        """Inputs by position (as the exporter passes them), one tensor out."""

        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, *args):
            out = self.m(**dict(zip(names, args, strict=True)), **s.call_kwargs)
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


def export_one(name: str, out: Path) -> dict:  # noqa: PLR0912, PLR0915  (one linear recipe)
    """Export and verify one model into out/<part>/; record everything in out/logs/<name>.json."""
    import numpy as np
    import torch

    s = SPEC_BY_NAME[name]
    part = read_split()[name]["part"]
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
        for dynamo in (False, True) if DYNAMO_FALLBACK else (False,):
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


def write_tables(out: Path) -> tuple[list[dict], list[dict]]:
    ok, failed = [], []
    for s in SPECS:
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
    for part in PARTS if FIXED_PART is None else (FIXED_PART,):
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
    ap.add_argument("--out", default="models/dev2")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # export one model in this process
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write-split", action="store_true")
    ap.add_argument("--measure-only", action="store_true", help="only (re)time the exports already there")
    ap.add_argument("--skip-existing", action="store_true", help="keep models already exported and verified")
    ap.add_argument("--timeout", type=int, default=600, help="per-model export timeout (s)")
    ap.add_argument("--specs", default=None, help="another spec list (a specs.py; default: this folder's)")
    a = ap.parse_args()
    if a.specs:
        use_specs(a.specs)

    if a.write_split:
        if FIXED_PART is not None:
            ap.error(f"{a.specs} puts every model in {FIXED_PART!r}: it has no split to write")
        return write_split()
    split = read_split()
    missing = [s.name for s in SPECS if s.name not in split]
    if missing:
        print(f"not in {SPLIT_CSV.name} (run --write-split, then commit it): {missing}", file=sys.stderr)
        return 2
    if a.list:
        for s in SPECS:
            print(f"{s.name}\t{s.family}\t{s.kind}\t{split[s.name]['part']}\t{inputs_str(s.inputs)}\t{s.source}")
        return 0
    out = Path(a.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    if a.one:
        r = export_one(a.one, out)
        print(json.dumps({k: v for k, v in r.items() if k != "trace"}))
        return 0 if r["ok"] else 1

    names = [s.name for s in SPECS]
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        bad = [n for n in names if n not in SPEC_BY_NAME]
        if bad:
            print("unknown model names:", bad, file=sys.stderr)
            return 2
    t_all = time.time()
    if not a.measure_only:
        for i, name in enumerate(names, 1):
            old = load(out, name)
            if a.skip_existing and old and old.get("ok") and (out / old["file"]).is_file():
                print(f"[{i}/{len(names)}] {name}: kept", flush=True)
                continue
            t = time.time()
            try:
                p = subprocess.run([sys.executable, __file__, "--one", name, "--out", str(out),
                                *(["--specs", a.specs] if a.specs else [])], check=False,
                                   capture_output=True, text=True, timeout=a.timeout)
                rc, tail = p.returncode, (p.stdout + p.stderr)[-1500:]
            except subprocess.TimeoutExpired:
                rc, tail = -1, f"timed out after {a.timeout} s"
            r = load(out, name)
            if rc not in (0, 1) or r is None or r.get("total_s") is None:
                s = SPEC_BY_NAME[name]
                r = dict(name=name, family=s.family, kind=s.kind, part=split[name]["part"], source=s.source,
                         file=f"{split[name]['part']}/{name}.onnx", ok=False,
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
            med, lo, hi, n = time_model(out / r["file"], SPEC_BY_NAME[name])
            r.update(ort_cpu_1t_median_ms=round(med, 3), ort_cpu_1t_min_ms=round(lo, 3), ort_cpu_1t_max_ms=round(hi, 3),
                     timed_runs=n)
            print(f"[time] {name}: {med:.1f} ms", flush=True)
        except Exception as e:
            r.update(ok=False, error=f"timing failed: {type(e).__name__}: {str(e)[:500]}")
            print(f"[time] {name}: FAILED {r['error']}", flush=True)
        (out / "logs" / f"{name}.json").write_text(json.dumps(r, indent=1))
    ok, failed = write_tables(out)
    by_part = {p: sum(r["part"] == p for r in ok) for p in PARTS}
    print(f"\n{len(ok)} models ok ({by_part['check']} check, {by_part['heldout']} heldout), {len(failed)} failed, "
          f"{time.time() - t_all:.0f} s -> {out}/models.tsv, {out}/failed.tsv")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
