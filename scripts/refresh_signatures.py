"""Describe again the stored kernels of some op types (signature only; ids and measurements stay).

    python scripts/refresh_signatures.py --store data/hase.sqlite --op Pow

For a store collected before `hase.kernels.split` recorded a Pow's exponent: `hase train` on it then sees the same
features a fresh `make collect` gives. Sources are read relative to the current folder (the project root).
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from hase.errors import HaseError
from hase.measure.resign import refresh_signatures
from hase.measure.store import Store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--op", action="append", required=True, help="op type whose kernels to describe again")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.store.is_file():  # Store() would create an empty one
        print(f"error: measurement store not found: {args.store} (give the store `hase collect` wrote)",
              file=sys.stderr)
        return 2
    try:
        with Store(args.store) as store:
            report = refresh_signatures(store, args.op)
    except HaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{report.kernels} kernels of {report.models} models described again; sources missing: "
          f"{', '.join(report.missing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
