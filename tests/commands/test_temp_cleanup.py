"""Temporary folders (`hase_kg_*`, `hase_probe_*`, `hase_prof_*`, `hase_profile_*`, `hase-pipeline-*`) are removed on
every way out of a command: success, bad input, MemoryError, Ctrl-C. The bad-input corpus checks the same for its
cases; these interrupt real runs part-way, where the temporary folders are full."""
from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase import paths
from hase.cli import main
from hase.kernels import probe
from hase.profiling import run as profile_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile's folder for the test, with the working directory next to it."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.chdir(tmp_path)
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    return root


def _raiser(exc: BaseException):
    def fail(*args, **kwargs):
        raise exc
    return fail


@pytest.mark.parametrize(("exc", "code"), [(KeyboardInterrupt(), 130), (MemoryError("Unable to allocate"), 2)])
def test_split_interrupted_in_the_probe(exc, code, tmp_root, monkeypatch, capfd):
    monkeypatch.setattr(probe, "observe_values", _raiser(exc))
    assert main(["split", "m.onnx", "--out", "kernels"]) == code
    assert len(capfd.readouterr().err.strip().splitlines()) == 1
    assert not list(tmp_root.iterdir()) and not Path("kernels").exists()


@pytest.mark.parametrize("where", ["infer_shapes", "observe_shapes"])
def test_predict_interrupted_in_the_shapes_probe(where, tmp_root, monkeypatch, capfd):
    if where == "observe_shapes":  # the run that learns shapes where ORT's type inference leaves one open
        monkeypatch.setattr(probe, "infer_shapes", _raiser(probe.ShapesUnavailableError("a shape left open")))
    monkeypatch.setattr(probe, where, _raiser(KeyboardInterrupt()))
    assert main(["predict", "m.onnx"]) == 130
    assert not list(tmp_root.iterdir())


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), MemoryError("Unable to allocate 3 TiB")])
def test_profile_interrupted_mid_run(exc, tmp_root, monkeypatch, capfd):
    monkeypatch.setattr(profile_run, "_run", _raiser(exc))
    assert main(["profile", "m.onnx", "--workdir", "prof"]) in (2, 130)
    assert not list(tmp_root.iterdir()) and not Path("prof").exists()


@pytest.mark.slow
def test_collect_with_a_failing_profile_leaves_no_temporary_folder(tmp_root, monkeypatch, capfd):
    """`hase_prof_*` (the model profile of collect) and `hase_kg_*` go whatever collect makes of the failure."""
    monkeypatch.setattr(profile_run, "_run", _raiser(MemoryError("Unable to allocate 3 TiB")))
    main(["-q", "collect", "--zoo", "none", "--model", "m.onnx", "--devices", str(REPO / paths.DEVICES_CONFIG),
          "--store", "s.sqlite"])
    assert not list(tmp_root.iterdir())


def test_pipeline_failing_before_the_run(tmp_root, capfd):
    assert main(["pipeline", "simulate", "--batches", "2", "--width", "8", "--layers", "1",
                 "--dp", "cpu,ov:NOSUCH"]) == 2
    assert not list(tmp_root.iterdir())
