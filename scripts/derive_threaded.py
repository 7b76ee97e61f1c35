"""Write a threaded device: a one-thread predictor moved to ORT's default threads by a thread model.

    python scripts/derive_threaded.py --source hase/predictors/cpu-1t --out hase/predictors/cpu-mt --device cpu-mt \\
        [--thread-model hase/predictors/threads/56e9708810e3.npz]

How the shipped `cpu-mt` is made from the shipped `cpu-1t` (`hase.predict.threaded`); without --thread-model the
source's own thread model moves it. The device is written to a temporary folder (training never writes into the
shipped `hase/predictors/`), then copied over --out, which is replaced whole.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from hase.errors import HaseError
from hase.predict.threaded import derive_threaded
from hase.predict.threads import load_thread_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, required=True, help="a one-thread CPU predictor folder")
    ap.add_argument("--out", type=Path, required=True, help="the threaded device's folder (replaced)")
    ap.add_argument("--device", required=True, help="its device name, e.g. cpu-mt")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default 0: ORT's default)")
    ap.add_argument("--thread-model", type=Path, default=None, help="a thread model (.npz) of the source's host")
    args = ap.parse_args()
    try:
        model = load_thread_model(args.thread_model) if args.thread_model is not None else None
        with tempfile.TemporaryDirectory(prefix="hase-threaded-") as tmp:  # outside the shipped folder: see below
            made = derive_threaded(args.source, Path(tmp) / args.device, args.device, args.threads, model)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            if args.out.exists():
                shutil.rmtree(args.out)
            shutil.copytree(made, args.out)
    except HaseError as exc:
        print(f"derive_threaded: error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.device} written to {args.out} (from {args.source}"
          f"{f', thread model {args.thread_model}' if args.thread_model else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
