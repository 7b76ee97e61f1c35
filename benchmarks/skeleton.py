"""Real models without their weights, to carry to another machine in kilobytes and time there.

`strip` keeps a model's graph, every tensor's name, dtype and shape and every small initializer (integer ones
always: indices, shapes and axes change what runs), and empties the large floating-point initializers, noting each
one's mean and standard deviation; `inflate` fills those again with seeded normal values of that mean, spread, dtype
and shape. On the CPU EP fp32 arithmetic has no data-dependent paths except denormal numbers: weights of a made-up
scale (N(0, 0.02) everywhere) let ConvNeXt-atto's activations fade into denormals and ran it 22 % slower, so the
trained weights' own scale is kept; with it an inflated model times like the original (same graph, fusions, shapes).

    python benchmarks/skeleton.py strip DIR... --out SKELETONS     # here: .onnx -> small .onnx
    python benchmarks/skeleton.py inflate SKELETONS --out MODELS    # there: back to runnable models
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

MARK = "hase_skeleton"  # metadata key listing the emptied initializers
MIN_ELEMENTS = 4096


def strip(model: onnx.ModelProto, min_elements: int = MIN_ELEMENTS) -> onnx.ModelProto:
    """The model with every top-level float initializer of at least `min_elements` elements emptied (dims kept)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    emptied = []
    for t in out.graph.initializer:
        dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
        if np.issubdtype(dtype, np.floating) and int(np.prod(t.dims)) >= min_elements:
            values = numpy_helper.to_array(t).astype(np.float64)
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.ClearField("double_data")
            emptied.append(f"{t.name}\t{values.mean():.6g}\t{values.std():.6g}")
    out.metadata_props.add(key=MARK, value="\n".join(emptied))
    return out


def inflate(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A stripped model with its emptied initializers filled with normal values of their own mean and spread."""
    marks = [p.value for p in model.metadata_props if p.key == MARK]
    stats = {}
    for line in (marks[0].split("\n") if marks and marks[0] else []):
        name, mean, std = line.rsplit("\t", 2)
        stats[name] = (float(mean), float(std))
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, t in enumerate(out.graph.initializer):
        if t.name in stats:
            dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
            mean, std = stats[t.name]
            values = (rng.standard_normal(tuple(t.dims), dtype=np.float32) * std + mean).astype(dtype)
            out.graph.initializer[i].CopyFrom(numpy_helper.from_array(values, t.name))
    props = [p for p in out.metadata_props if p.key != MARK]
    del out.metadata_props[:]
    out.metadata_props.extend(props)
    return out


def main(argv: list[str] | None = None) -> int:
    """strip: every .onnx of the folders into --out; inflate: every skeleton of a folder into --out."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["strip", "inflate"])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--names", default="", help="comma-separated file stems to keep (default: all)")
    args = ap.parse_args(argv)
    keep = {n for n in args.names.split(",") if n}
    args.out.mkdir(parents=True, exist_ok=True)
    for d in args.dirs:
        for path in sorted(d.glob("*.onnx")):
            if keep and path.stem not in keep:
                continue
            model = onnx.load(str(path))
            new = strip(model) if args.action == "strip" else inflate(model)
            onnx.save(new, str(args.out / path.name))
            print(f"{args.action} {path.name}: {path.stat().st_size / 1e6:.1f} MB -> "
                  f"{(args.out / path.name).stat().st_size / 1e6:.2f} MB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
