"""The tracked tree stays under 35 MiB: a GPU device call carries the working tree plus the GPU kit's `.gpu/`
(25.4 MiB on 2026-11-28) in 64 MiB, and ../shared/gpu/setup-local.sh refuses past 62 MiB. The shipped h100-cuda
predictor (4.4 MB) took the tree to 33.9 MiB: 59.2 MiB travelled. docs/gpu.md says what to
ignore when the tree grows."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LIMIT_MIB = 35


def tracked_sizes(root: Path) -> dict[str, int] | None:
    """Bytes of every tracked file present in the working tree (`git ls-files`), by path; None when `root` is not
    a git checkout git can read (no git, an sdist or installed copy, a checkout git refuses)."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=False)
    if done.returncode != 0:
        return None
    paths = [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]
    return {p: (root / p).stat().st_size for p in paths if (root / p).is_file()}


def test_the_tracked_tree_stays_under_35_mib() -> None:
    sizes = tracked_sizes(ROOT)
    if sizes is None:
        pytest.skip("not a git checkout git can read (an sdist or an installed copy): no tracked tree to size")
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total < LIMIT_MIB << 20, (
        f"the tracked tree is {total / 2**20:.1f} MiB, over {LIMIT_MIB} MiB: a GPU run would not fit its 64 MiB "
        f"(docs/gpu.md, 'What travels'); largest: " + ", ".join(f"{p} {s / 2**20:.1f} MiB" for p, s in largest))
