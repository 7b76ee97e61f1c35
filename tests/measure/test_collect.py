"""hase.measure.collect: end-to-end collect on real models, resumable after SIGKILL, skips recorded."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from conftest import REPO, conv_bn_relu_model, embedding_model

from hase.cli import main
from hase.measure import collect as coll
from hase.measure.store import Store

FAST = """
[kernel_timing]
warmup = 2
min_runs = 5
max_runs = 20
min_time_s = 0.0
max_time_s = 0.05
[model_timing]
warmup = 2
min_runs = 5
max_runs = 20
min_time_s = 0.0
max_time_s = 0.2
[profile]
warmup = 1
runs = 3
[cold]
sessions = 3
max_mb = 64
[[device]]
name = "cpu-test"
ep = "cpu"
intra_op_threads = 1
opt_level = "extended"
"""


@pytest.fixture
def fast_config(tmp_path: Path) -> Path:
    p = tmp_path / "devices.toml"
    p.write_text(FAST)
    return p


@pytest.fixture
def models(tmp_path: Path, exported_dir: Path) -> list[Path]:
    a, b = tmp_path / "conv8.onnx", tmp_path / "emb.onnx"
    onnx.save(conv_bn_relu_model(c=8), a)
    onnx.save(embedding_model(), b)
    return [a, b, exported_dir / "hf_bert_tiny_s64_b2.onnx", exported_dir / "timm_semnasnet_050_cls10_b1.onnx"]


def check_complete(store_path: Path, n_models: int) -> dict[str, int]:
    """Every model measured once, every unique kernel measured warm+cold once (or skipped), db intact."""
    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(store_path) as s:
        mm, km = s.table("model_measurements"), s.table("kernel_measurements")
        mn, skips = s.table("model_nodes"), s.table("skips")
        counts = s.counts()
    assert len(mm) == mm.model_id.nunique() == n_models
    assert not km.duplicated(["kernel_id", "device", "variant"]).any()
    measured = set(km.kernel_id)
    skipped = {j.split(":", 1)[1] for j in skips.job if j.startswith("kernel:")}
    assert set(mn.kernel_id) == measured | skipped
    assert (km.groupby("kernel_id").variant.nunique() == 2).all()
    assert (mm.median_ms > 0).all() and (km.median_ms > 0).all()
    for col in ("device", "cpu_model", "ort_version", "execution_provider", "intra_op_threads", "opt_level"):
        assert km[col].notna().all() and mm[col].notna().all()
    return counts


@pytest.mark.slow
def test_collect_end_to_end(tmp_path, fast_config, models, capsys):
    store = tmp_path / "s.sqlite"
    argv = ["collect", "--zoo", "none", "--devices", str(fast_config), "--store", str(store)]
    for m in models:
        argv += ["--model", str(m)]
    assert main(argv) == 0
    counts = check_complete(store, len(models))
    with Store(store) as s:
        spans, mm = s.table("node_spans"), s.table("model_measurements")
    assert (spans.span_source == "kernel_time").all()  # current CPU builds emit no fence events
    assert spans.kernel_id.notna().all()  # every profiled node maps back to its kernel
    assert (mm.model_run_us >= mm.execute_us).all()
    # rerun: nothing new is measured, nothing duplicated
    assert main(argv) == 0
    assert check_complete(store, len(models)) == counts


@pytest.mark.slow
def test_collect_resumes_after_sigkill(tmp_path, fast_config, models):
    store = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "hase.cli", "-q", "collect", "--zoo", "none", "--devices", str(fast_config),
            "--store", str(store)]
    for m in models:
        argv += ["--model", str(m)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    n = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        if store.exists():
            try:
                n = sqlite3.connect(store, timeout=1).execute("SELECT COUNT(*) FROM kernel_measurements").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if n >= 20:
                break
    assert proc.poll() is None, "collect finished before it could be killed; make the job list longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(store) as s:
        partial = s.counts()
    assert 0 < partial["model_measurements"] < len(models) or partial["kernel_measurements"] < 2 * partial["kernels"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    check_complete(store, len(models))


def test_skip_is_recorded_not_fatal(tmp_path, fast_config, conv_model_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    cfg = coll.load_collect_config(fast_config)
    sources = [coll.ModelSource("broken", "user", bad), coll.ModelSource("conv", "user", conv_model_path)]
    with Store(tmp_path / "s.sqlite") as s:
        report = coll.collect(sources, cfg, s)
        skips = s.table("skips")
    assert report.models_done == 1 and report.models_skipped == 1
    assert skips.target.tolist() == ["broken"] and "not a valid ONNX file" in skips.reason[0]


def test_bad_device_config(tmp_path, fast_config):
    from hase.errors import HaseError

    with pytest.raises(HaseError, match="unknown device"):
        coll.load_collect_config(fast_config, ["gpu-9"])
    cuda = tmp_path / "cuda.toml"
    cuda.write_text('[[device]]\nname = "g"\nep = "cuda"\n')
    cfg = coll.load_collect_config(cuda)
    with Store(tmp_path / "s.sqlite") as s, pytest.raises(HaseError, match="CUDAExecutionProvider is not available"):
        coll.collect([], cfg, s)


def test_cuda_unavailable_is_an_error_and_writes_nothing(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    assert main(["collect", "--ep", "cuda", "--zoo", "none", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "CUDAExecutionProvider is not available" in err and "Traceback" not in err
    assert not store.exists()
