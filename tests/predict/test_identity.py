"""hase.predict.identity: every predictor says what it is, and how this host differs from the machine it describes."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import SHIPPED_DEVICES
from test_bundle import current_manifest, fitted  # noqa: F401  (fitted: a module-scoped fixture)

from hase import paths
from hase.predict.bundle import save_bundle
from hase.predict.identity import (
    HostInfo,
    PredictorIdentity,
    describe,
    host_info,
    host_mismatches,
    installed,
    open_predictor,
    predictor_identity,
)
from hase.predict.locate import SHIPPED, USER, FoundPredictor
from hase.predict.manifest import MANIFEST
from hase.runtime.types import DEVICE_META_COLS

CPU = "CPUExecutionProvider"
HOME = HostInfo(cpu_model="cpu", ort_version="1.20", providers=(CPU,), gpu_name="", n_cpus=2)  # the sample's host


def identity(**changes: object) -> PredictorIdentity:
    """The identity of the sample manifest (trained on HOME), with `changes`."""
    found = FoundPredictor("cpu-1t", Path("/p/cpu-1t"), USER)
    ident = predictor_identity(current_manifest(), found)
    meta = {k: v for k, v in changes.items() if k in DEVICE_META_COLS}
    rest = {k: v for k, v in changes.items() if k not in meta}
    return dataclasses.replace(ident, meta=dataclasses.replace(ident.meta, **meta), **rest)  # type: ignore[arg-type]


def test_identity_carries_every_fact_of_the_manifest():
    m = current_manifest()
    ident = predictor_identity(m, FoundPredictor("cpu-1t", Path("/p/cpu-1t"), USER))
    held = m.target("warm").held_out
    assert (ident.device, ident.source, ident.path, ident.cpu_model, ident.ort_version) == (
        "cpu-1t", USER, "/p/cpu-1t", "cpu", "1.20")
    assert (ident.execution_provider, ident.intra_op_threads, ident.inter_op_threads, ident.opt_level) == (
        CPU, 1, 1, "extended")
    assert (ident.trained_on, ident.default_target, ident.target) == ("2026-01-01", "warm", "warm")
    assert (ident.acc10, ident.rmspe, ident.n_held_out, ident.n_models) == (held.acc10, held.rmspe, held.n, 3)
    assert json.loads(json.dumps(ident.to_dict()))["families"] == ["a", "b"]
    line = describe(ident)
    for fact in ("cpu-1t", CPU, "on cpu", "ORT 1.20", "1 intra-op / 1 inter-op", "extended optimization",
                 "trained 2026-01-01 on 3 models", "held-out (warm)", f"RMSPE {held.rmspe:.1f} %", "user: /p/cpu-1t"):
        assert fact in line, fact


def test_a_matching_host_has_no_mismatch_and_each_difference_is_named():
    assert host_mismatches(identity(), HOME) == []
    assert host_mismatches(identity(), dataclasses.replace(HOME, gpu_name="A100")) == []  # a CPU predictor
    cases = {
        "CPU 'AMD EPYC', the predictor's 'cpu'": dataclasses.replace(HOME, cpu_model="AMD EPYC"),
        "ONNX Runtime 1.22, the predictor's 1.20": dataclasses.replace(HOME, ort_version="1.22"),
        "no onnxruntime installed": dataclasses.replace(HOME, ort_version="", providers=()),
        "1 usable CPUs, fewer than the predictor's 2 intra-op": dataclasses.replace(HOME, n_cpus=1),
    }
    threads = identity(intra_op_threads=2)
    for expected, host in cases.items():
        found = host_mismatches(threads, host)
        assert len(found) == 1 and found[0].startswith(expected), (expected, found)


def test_a_cuda_predictor_needs_the_gpu_and_the_provider():
    cuda = identity(execution_provider="CUDAExecutionProvider", gpu_name="H100", gpu_driver="550")
    assert host_mismatches(cuda, dataclasses.replace(HOME, providers=(CPU, "CUDAExecutionProvider"),
                                                     gpu_name="H100")) == []
    found = host_mismatches(cuda, HOME)
    assert found[0] == "GPU 'none found', the predictor's 'H100'"
    assert found[1].startswith("CUDAExecutionProvider is not available in this ONNX Runtime build (it has CPU")
    assert "+ H100 (driver 550)" in describe(cuda)


def test_this_host_is_described_from_the_running_runtime():
    import onnxruntime

    from hase.runtime.sessions import cpu_model

    host = host_info()
    assert host.cpu_model == cpu_model() and host.ort_version == onnxruntime.__version__
    assert CPU in host.providers and host.n_cpus >= 1 and host.gpu_name == ""


def test_installed_verifies_each_predictor_and_lists_a_broken_one(fitted, tmp_path, monkeypatch):  # noqa: F811
    user = tmp_path / "user"
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(user))
    save_bundle(user / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    broken = save_bundle(user / "cpu-2t", current_manifest("cpu-2t"), {"warm": fitted[0]})
    (broken / "warm.json").write_text("{}")
    listed = installed(host=HOME)
    assert [(p.found.device, p.found.source, p.found.shadowed) for p in listed] == [
        ("cpu-1t", USER, False), ("cpu-2t", USER, False),
        *[(d, SHIPPED, d == "cpu-1t") for d in SHIPPED_DEVICES]]  # lookup order
    mine, bad = listed[:2]
    (shipped,) = [p for p in listed[2:] if p.found.device == "cpu-1t"]
    assert all(p.identity is not None and p.error == "" for p in listed[2:])  # every shipped one verifies
    assert mine.identity is not None and mine.mismatches == () and mine.error == ""
    assert shipped.identity is not None and shipped.identity.ort_version != "1.20"
    assert any(m.startswith("ONNX Runtime 1.20, the predictor's") for m in shipped.mismatches)
    assert bad.identity is None and "sha256" in bad.error and "retrain" in bad.error
    flat = json.loads(json.dumps([p.to_dict() for p in listed]))
    assert flat[0]["source"] == USER and flat[0]["cpu_model"] == "cpu" and flat[0]["error"] is None
    assert flat[1]["error"] == bad.error and "cpu_model" not in flat[1]


def test_open_predictor_loads_the_shipped_one_with_its_identity():
    used = open_predictor(paths.DEFAULT_DEVICE, host=HOME)
    ident = used.identity
    assert ident.source == SHIPPED and Path(ident.path) == paths.SHIPPED_PREDICTORS / paths.DEFAULT_DEVICE
    assert list(used.bundle.predictors) == [ident.default_target] == [ident.target]
    assert (Path(ident.path) / MANIFEST).is_file() and ident.n_held_out > 0 and 0 < ident.acc10 <= 1
    assert ident.cpu_model in " ".join(used.mismatches)  # HOME is not the machine it was trained on
    assert used.to_dict()["host_mismatches"] == list(used.mismatches)
    # a target whose forests were not shipped (only the default target's are; the 2026-11-29 `cpu-1t` was trained
    # on in-model spans alone, so its manifest scored no other): a one-line error naming the targets it has
    unshipped = sorted({"warm", "cold", "span"} - {ident.default_target})
    with pytest.raises(Exception, match=rf"no predictor for target.*it has \['{ident.default_target}'\]"):
        open_predictor(paths.DEFAULT_DEVICE, target=unshipped[0], host=HOME)


def test_threads_text_names_ort_default_threads():
    from hase.predict.identity import threads_text

    assert threads_text(1, 1) == "1 intra-op / 1 inter-op thread(s)"
    assert threads_text(0, 1).startswith("ORT's default intra-op (one per physical core) / 1 inter-op")
    assert "0 intra-op" not in threads_text(0, 0) and "ORT's default inter-op" in threads_text(0, 0)
