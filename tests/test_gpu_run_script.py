"""scripts/gpu/run_on_device.sh and capture.py on the CPU: what a device call returns fits its limits (at most 8
files from $OUT, 16 MiB each, 64 MiB in all, 2 folders down), the store comes back in 15 MiB gzip parts that
join_store.py joins, a model over its time box is killed, an interrupted one stops the step, and the dry run
(`HASE_GPU_DRY=1`, the CPU EP) prints summary.json and the pytest summary. What the GPU makes of it is unverified
until a GPU run."""
from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[1]
GPU = ROOT / "scripts" / "gpu"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", GPU / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    mod = _module("capture")
    monkeypatch.setattr(mod, "OUT", tmp_path / "out")
    monkeypatch.setattr(mod, "WORK", tmp_path / "work")
    (tmp_path / "work").mkdir()
    return mod


def test_return_problems_name_each_limit(capture: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "ret"
    (out / "a" / "b" / "c").mkdir(parents=True)
    assert capture.return_problems(out) == []
    for i in range(8):
        (out / f"f{i}").write_bytes(b"x")
    assert capture.return_problems(out) == []
    (out / "a" / "b" / "c" / "deep").write_bytes(b"x")
    (out / "big").write_bytes(b"\0" * (16 * 2**20 + 1))
    problems = capture.return_problems(out)
    assert any("10 files" in p for p in problems) and any("big: 16.0 MiB" in p for p in problems)
    assert any("3 folders down" in p for p in problems)


def test_the_store_comes_back_in_15_mib_gzip_parts_that_join_store_joins(capture: ModuleType,
                                                                          tmp_path: Path) -> None:
    store = capture.WORK / "store" / "hase_gpu.sqlite"
    store.parent.mkdir(parents=True)
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE t (x BLOB)")
        db.executemany("INSERT INTO t VALUES (?)", [(os.urandom(1 << 20),) for _ in range(40)])  # incompressible
    db.close()
    parts = capture.pack_store()
    assert len(parts) == 3 and all(p.stat().st_size <= 15 * 2**20 for p in parts)
    assert [p.name for p in parts] == [f"hase_gpu.sqlite.gz.part-00{i}" for i in range(3)]
    joined = tmp_path / "joined.sqlite"
    assert _module("join_store").join(capture.OUT / "store", joined) == 0
    with sqlite3.connect(joined) as db:
        assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 40
    db.close()


def test_a_model_over_its_box_is_killed(capture: ModuleType, tmp_path: Path) -> None:
    t0 = time.monotonic()
    rc = capture.boxed([sys.executable, "-c", "import time; time.sleep(30)"], 0.5, tmp_path / "log")
    assert rc == capture.TIMED_OUT and time.monotonic() - t0 < 10


def test_an_interrupted_model_stops_the_step_and_the_summary_says_so(capture: ModuleType,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    outcomes = iter([0, 130])

    def boxed(cmd: list[str], limit_s: float, log: Path) -> int:
        calls.append(cmd)
        rc = next(outcomes)
        if rc == 0:
            (Path(cmd[-1]).with_suffix(".json")).write_text(json.dumps({"check": {"gpu": None, "cupti": "on"}}))
        return rc

    monkeypatch.setattr(capture, "boxed", boxed)
    with pytest.raises(SystemExit) as stop:
        capture.profiles(300.0)
    assert stop.value.code == 130 and len(calls) == 2  # the third and fourth models never start
    summary = json.loads((capture.WORK / "summary.json").read_text())["profiles"]
    assert summary["resnet_b1"]["cupti"] == "on" and summary["resnet_b64"]["status"] == "interrupted"


@pytest.mark.slow
def test_the_dry_run_returns_at_most_8_files_under_the_limits(tmp_path: Path) -> None:
    env = {**os.environ, "HASE_GPU_DRY": "1", "OUT": str(tmp_path / "out"), "HASE_GPU_WORK": str(tmp_path / "work"),
           "HASE_GPU_MODELS": str(tmp_path / "models"), "PY": sys.executable}
    done = subprocess.run(["bash", str(GPU / "run_on_device.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert 3 <= len(files) <= 8, files
    assert all(p.stat().st_size <= 16 * 2**20 and len(p.relative_to(out).parts) <= 3 for p in files)
    assert sum(p.stat().st_size for p in files) <= 64 * 2**20
    assert _module("capture").return_problems(out) == []
    assert {"log.txt", "summary.json", "results.tar.gz"} <= {p.name for p in files}
    assert any(p.name.startswith("hase_gpu.sqlite.gz.part-") for p in files)
    summary = json.loads((out / "summary.json").read_text())
    assert "cuda.bindings" in summary["env"] and summary["env"]["cupti"]["on"] is False
    assert set(summary["profiles"]) == {"resnet_b1", "resnet_b64", "bert_b1", "bert_b64"}
    assert all(s["rc"] == 0 for s in summary["steps"].values()) and summary["collect"]["rows"]["models"] >= 1
    tail = done.stdout[-12_000:]  # what the device call's reply keeps
    assert "== summary.json" in tail and "== pytest summary" in tail and "skipped" in tail
