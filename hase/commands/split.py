"""`hase split MODEL.onnx --out DIR`: write ORT's optimized graph and one single-kernel ONNX model per unique
node of it (the kernels), with kernels.csv mapping every node to its kernel."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape

from hase.commands.common import (
    add_ep_args,
    add_input_shape_arg,
    add_json_arg,
    input_shapes,
    plural,
    stdout_console,
    titled_table,
)
from hase.files import check_output_dir, removed_on_error
from hase.kernels.split import split_to_dir
from hase.runtime.types import EPConfig


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `split` subcommand."""
    p = sub.add_parser("split", help="split a model into single-kernel ONNX models",
                       description="Apply ONNX Runtime's fusions (graph optimization level) and write into --out: "
                                   "optimized.onnx (the graph ORT runs, the kernel graph), one single-node ONNX "
                                   "model <kernel_id>.onnx per unique kernel, kernels.csv (each node of "
                                   "optimized.onnx -> its kernel file) and signatures.jsonl (each kernel's "
                                   "signature).")
    p.add_argument("model", help="path to an .onnx model")
    p.add_argument("--out", required=True, help="output directory")
    add_input_shape_arg(p)
    add_ep_args(p, threads=False)
    add_json_arg(p, "print a JSON summary instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Split the model into one ONNX file per unique kernel and print (or print as JSON) what was written."""
    ep = EPConfig(name=args.ep, ep=args.ep, opt_level=args.opt_level)
    out = check_output_dir(args.out, "--out")
    shapes = input_shapes(args, args.model)
    with removed_on_error(out):  # a failed split (bad model, full disk) leaves no kernel files behind
        result = split_to_dir(args.model, out, ep, shapes)
    if args.json:
        print(json.dumps(result))
        return 0
    table = titled_table(f"{escape(Path(args.model).name)}: {plural(result['n_nodes'], 'kernel node')}, "
                        f"{plural(result['n_unique'], 'unique kernel')} -> {escape(str(out))}")
    for col in ("op type", "nodes", "unique"):
        table.add_column(col, justify="right" if col != "op type" else "left")
    for op, (n, u) in sorted(result["by_op"].items(), key=lambda kv: -kv[1][0]):
        table.add_row(escape(op), str(n), str(u))
    console = stdout_console()
    console.print(table)
    console.print(f"optimized graph: {result['optimized']}; node -> kernel: {out / 'kernels.csv'}", markup=False,
                  soft_wrap=True)
    return 0
