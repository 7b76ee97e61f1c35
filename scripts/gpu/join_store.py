"""Join the parts of a store brought back from the GPU machine (`<name>.part-000`, ...) into one SQLite file.

    python scripts/gpu/join_store.py DIR_WITH_PARTS OUT.sqlite

Refuses to overwrite OUT (it may be a store already trained on) and checks the result opens as SQLite.
"""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path


def join(parts_dir: Path, out: Path) -> int:
    parts = sorted(parts_dir.glob("*.sqlite.part-*"))
    if not parts:
        print(f"no *.sqlite.part-* files in {parts_dir}: pass the store/ folder the GPU run brought back",
              file=sys.stderr)
        return 2
    if out.exists():
        print(f"{out} exists: remove it or choose another STORE", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".joining")
    with tmp.open("wb") as fh:
        for p in parts:
            fh.write(p.read_bytes())
    with sqlite3.connect(tmp) as db:
        ok = db.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        tmp.unlink()
        print(f"the joined store fails SQLite's quick_check ({ok}): are all parts there?", file=sys.stderr)
        return 2
    tmp.rename(out)
    print(f"{out}: {len(parts)} parts joined")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(join(Path(sys.argv[1]), Path(sys.argv[2])))
