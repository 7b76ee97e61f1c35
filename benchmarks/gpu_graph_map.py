"""How well `hase.kernels.cuda_map` rebuilds, on a CPU-only host, the kernel graph the CUDA EP ran: for every model
of a GPU store (`hase collect` on configs/devices_gpu.toml, joined by `make train-gpu`), the CPU EP's `extended`
graph mapped to CUDA kernels against the CUDA graph the store recorded, kernel for kernel (op type and input shapes).

    python benchmarks/gpu_graph_map.py --store data/hase_gpu.sqlite --models model_zoo/zoo_small [--models DIR ...]

A model is found by its store id (`<id>.onnx` in one of the folders; build the zoo with `hase zoo` first). Prints one
line per model whose graphs differ (what the mapped graph has too many / too few) and the count of exact matches.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pandas as pd

from hase.kernels import cuda_map, graph, split
from hase.runtime.types import EPConfig

Signature = tuple[str, tuple[tuple[int, ...], ...]]


def recorded(store: Path) -> dict[str, Counter[Signature]]:
    """model id -> the multiset of (op type, input shapes) of the kernels its CUDA graph ran."""
    with sqlite3.connect(store) as db:
        rows = pd.read_sql("SELECT n.model_id, n.op_type, k.signature_json FROM model_nodes n "
                           "JOIN kernels k USING (kernel_id)", db)
    out: dict[str, Counter[Signature]] = {}
    for r in rows.itertuples():
        shapes = tuple(tuple(t["shape"]) for t in json.loads(r.signature_json)["inputs"])
        out.setdefault(r.model_id, Counter())[(r.op_type, shapes)] += 1
    return out


def mapped(path: Path, ep: EPConfig) -> Counter[Signature]:
    """The same multiset from the CPU EP's graph mapped to CUDA kernels."""
    kg = cuda_map.to_cuda(graph.file_kernel_graph(path, cuda_map.cpu_config(ep), with_weights=False), ep.opt_level)
    return Counter((n.spec.op_type, tuple(t.shape for t in n.spec.inputs)) for n in split.split(kg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--models", type=Path, action="append", required=True, help="folder of the store's models")
    args = ap.parse_args()
    ep = EPConfig(name="h100-cuda", ep="cuda")
    exact = missing = 0
    graphs = recorded(args.store)
    for model_id, want in sorted(graphs.items()):
        path = next((d / f"{model_id}.onnx" for d in args.models if (d / f"{model_id}.onnx").exists()), None)
        if path is None:
            missing += 1
            continue
        got = mapped(path, ep)
        if got == want:
            exact += 1
        else:
            extra, lacking = Counter(s[0] for s in (got - want).elements()), Counter(
                s[0] for s in (want - got).elements())
            print(f"{model_id}: mapped graph has extra {dict(extra)}, lacks {dict(lacking)}")
    print(f"{exact} of {len(graphs) - missing} models: the mapped graph is the CUDA graph kernel for kernel "
          f"(op type and input shapes); {missing} not found in {', '.join(map(str, args.models))}")


if __name__ == "__main__":
    main()
