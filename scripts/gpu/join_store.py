"""Join the parts of a store brought back from the GPU machine into one SQLite file: `<name>.sqlite.gz.part-000`,
... (run_on_device.sh packs the store gzipped) or `<name>.sqlite.part-000`, ... (plain, from older runs).

    python scripts/gpu/join_store.py DIR_WITH_PARTS OUT.sqlite

Refuses to overwrite OUT (it may be a store already trained on) and checks the result opens as SQLite.
"""
from __future__ import annotations

import gzip
import sqlite3
import sys
from pathlib import Path


def join(parts_dir: Path, out: Path) -> int:
    zipped = sorted(parts_dir.glob("*.sqlite.gz.part-*"))
    parts = zipped or sorted(parts_dir.glob("*.sqlite.part-*"))
    if not parts:
        print(f"no *.sqlite.gz.part-* or *.sqlite.part-* files in {parts_dir}: pass the store/ folder the GPU run "
              f"brought back", file=sys.stderr)
        return 2
    if out.exists():
        print(f"{out} exists: remove it or choose another STORE", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".joining")
    data = b"".join(p.read_bytes() for p in parts)
    try:
        tmp.write_bytes(gzip.decompress(data) if zipped else data)
    except (OSError, EOFError) as exc:  # a truncated or missing gzip part
        print(f"the parts do not unzip ({exc}): are all parts there?", file=sys.stderr)
        return 2
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
