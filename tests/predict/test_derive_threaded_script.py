"""scripts/derive_threaded.py: the shipped cpu-1t moved to ORT's default threads by a given thread model, run as a
user runs it; bad input is one line, exit 2, nothing written."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

from hase.predict.bundle import load_bundle
from hase.predict.thread_estimate import SHIPPED_THREAD_MODELS
from hase.predict.threaded import is_threaded

SCRIPT = REPO / "scripts" / "derive_threaded.py"
CPU_1T = REPO / "hase" / "predictors" / "cpu-1t"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_derives_a_threaded_device_with_the_thread_model_given(tmp_path):
    model = sorted(SHIPPED_THREAD_MODELS.glob("*.npz"))[0]
    out = tmp_path / "new" / "cpu-dflt"
    r = run("--source", str(CPU_1T), "--out", str(out), "--device", "cpu-dflt", "--thread-model", str(model))
    assert r.returncode == 0, r.stderr
    bundle = load_bundle(out)
    assert is_threaded(bundle) and bundle.device == "cpu-dflt" and bundle.ep_config().intra_op_threads == 0
    assert bundle.manifest.threads["moved_from"] == "cpu-1t"
    assert bundle.manifest.threads["thread_model"]["host"] == model.stem  # the given model, not the source's


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "new" / "cpu-dflt"
    for args in (["--thread-model", str(tmp_path / "none.npz")], []):
        source = CPU_1T if args else REPO / "hase" / "predictors" / "cpu-mt"  # a threaded device is no source
        r = run("--source", str(source), "--out", str(out), "--device", "cpu-dflt", *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("derive_threaded: error:")
        assert "Traceback" not in r.stderr and not (tmp_path / "new").exists()
