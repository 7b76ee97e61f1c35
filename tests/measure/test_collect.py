"""hase.measure.collect: end-to-end collect on real models; SIGKILL resume, bad models as skips, settings-bound
skips, content identity, two collects on one store."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from collect_cases import FAST, check_complete, integrity, relu_model, string_input_model, unknown_op_model
from conftest import REPO, conv_bn_relu_model, embedding_model

from hase.cli import main
from hase.errors import HaseError
from hase.measure import collect as coll
from hase.measure import jobs
from hase.measure.progress import CollectEvent, KernelStarted, ModelStarted, SignatureStarted
from hase.measure.store import Store
from hase.predict.dataset import load_device_data


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


def test_progress_is_told_in_typed_events(tmp_path, fast_config, conv_model_path):
    """The callback gets one frozen record per event, in order: a model's start, then each of its unique kernels."""
    cfg = coll.load_collect_config(fast_config)
    seen: list[CollectEvent] = []
    with Store(tmp_path / "s.sqlite") as s:
        coll.collect([coll.ModelSource("conv", "user", conv_model_path)], cfg, s, seen.append)
    devices = [ep.name for ep in cfg.devices]
    started = [e for e in seen if isinstance(e, ModelStarted)]
    assert started == [ModelStarted("conv", d) for d in devices]
    first = seen.index(started[0])
    kernels = [e for e in seen[first:] if isinstance(e, KernelStarted)]
    assert kernels and all(k.model == "conv" and k.total == kernels[0].total for k in kernels)
    assert [k.index for k in kernels[:kernels[0].total]] == list(range(kernels[0].total))
    assert all(isinstance(e, (ModelStarted, KernelStarted, SignatureStarted)) for e in seen)  # no fleet events here
    with pytest.raises(dataclasses.FrozenInstanceError):
        started[0].model = "other"


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


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_bad_models_become_skips_and_the_run_goes_on(tmp_path, fast_config, monkeypatch, capsys):
    """A garbage file, a model ORT rejects, a MemoryError and a string input: each a skip, every other model done."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    onnx.save(conv_bn_relu_model(c=8), zoo / "conv.onnx")
    onnx.save(embedding_model(), zoo / "emb.onnx")
    (zoo / "broken.onnx").write_bytes(b"\x08\x07garbage")
    onnx.save(unknown_op_model(), zoo / "noop.onnx")
    onnx.save(relu_model(32), zoo / "oom.onnx")
    onnx.save(string_input_model(), zoo / "strings.onnx")
    onnx.save(relu_model(64), zoo / "zlast.onnx")  # sorted last: it runs after every failure
    real = jobs.measure_model

    def measure_or_oom(model, src, *args, **kwargs):
        if src.name == "oom":
            raise MemoryError("Unable to allocate 224. GiB for an array with shape (1000000000, 3, 100, 100) and "
                              "data type float64")
        return real(model, src, *args, **kwargs)

    monkeypatch.setattr(jobs, "measure_model", measure_or_oom)
    store = tmp_path / "s.sqlite"
    argv = ["collect", "--zoo", "none", "--models-dir", str(zoo), "--devices", str(fast_config), "--store", str(store)]
    assert main(argv) == 0
    with Store(store) as s:
        mm, skips, nodes = s.table("model_measurements"), s.table("skips"), s.table("model_nodes")
        counts = s.counts()
    assert {"conv", "emb", "zlast"} <= set(mm.model_id)
    by_target = skips.set_index("target")
    assert by_target.loc["broken", "stage"] == "split" and "not a valid ONNX file" in by_target.loc["broken", "reason"]
    assert by_target.loc["noop", "stage"] == "split" and "NoSuchOp" in by_target.loc["noop", "reason"]
    assert by_target.loc["oom", "stage"] == "model"
    assert by_target.loc["oom", "reason"].startswith("Unable to allocate 224. GiB")
    assert by_target.loc["oom", "reason"].endswith("(MemoryError)")
    passed = nodes[(nodes.model_id == "strings") & (nodes.op_type == "Identity")]
    string_kernels = {f"kernel:{k}" for k in passed.kernel_id}
    assert string_kernels & set(skips.job) or "strings" in set(skips.target)  # the string input is a skip
    assert (skips.settings_hash.str.len() == 16).all()
    check_complete(store, len(mm))
    out = capsys.readouterr().out
    assert "skipped broken" in out and "Traceback" not in out
    assert main(argv) == 0  # a rerun neither retries the skips nor measures anything again
    with Store(store) as s:
        assert s.counts() == counts


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_interrupt_stops_the_run_and_resume_is_exact(tmp_path, fast_config, monkeypatch, stop):
    paths = [tmp_path / "a.onnx", tmp_path / "b.onnx"]
    onnx.save(relu_model(16), paths[0])
    onnx.save(relu_model(32), paths[1])
    sources = [coll.ModelSource(p.stem, "user", p) for p in paths]
    real = jobs.measure_model

    def interrupted(model, src, *args, **kwargs):
        if src.name == "b":
            raise stop()
        return real(model, src, *args, **kwargs)

    monkeypatch.setattr(jobs, "measure_model", interrupted)
    cfg = coll.load_collect_config(fast_config)
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(stop):
            coll.collect(sources, cfg, s)
        assert s.counts()["skips"] == 0 and s.counts()["model_measurements"] == 1
    monkeypatch.undo()
    with Store(tmp_path / "s.sqlite") as s:
        report = coll.collect(sources, cfg, s)
    assert report.models_done == 1 and report.kernels_measured == 0  # b's Relu was committed before the stop
    check_complete(tmp_path / "s.sqlite", 2)


def test_a_skip_holds_for_its_settings_only(tmp_path, fast_config, monkeypatch):
    """A job that failed under some settings is retried under others (here: more profiled runs)."""
    path = tmp_path / "relu.onnx"
    onnx.save(relu_model(), path)
    sources = [coll.ModelSource("relu", "user", path)]
    real = jobs.measure_model

    def needs_four_runs(model, src, nodes, ep, settings, **kwargs):
        if settings.profile_runs < 4:
            raise HaseError("too few profiled runs for this model")
        return real(model, src, nodes, ep, settings, **kwargs)

    monkeypatch.setattr(jobs, "measure_model", needs_four_runs)
    cfg = coll.load_collect_config(fast_config)
    with Store(tmp_path / "s.sqlite") as s:
        assert coll.collect(sources, cfg, s).models_skipped == 1
        again = coll.collect(sources, cfg, s)
        assert (again.models_skipped, again.models_done) == (0, 0)  # same settings: the skip holds
        more = coll.CollectConfig(cfg.devices, dataclasses.replace(cfg.settings, profile_runs=4))
        report = coll.collect(sources, more, s)
        assert report.models_done == 1 and s.counts()["skips"] == 0  # a success clears the skip


def test_retry_skips_tries_every_skip_again(tmp_path, fast_config, monkeypatch):
    path = tmp_path / "relu.onnx"
    onnx.save(relu_model(), path)
    store = tmp_path / "s.sqlite"
    argv = ["collect", "--zoo", "none", "--model", str(path), "--devices", str(fast_config), "--store", str(store)]
    def flaky(*args, **kwargs):
        raise RuntimeError("device lost\nsecond line")

    monkeypatch.setattr(jobs.measure, "measure_kernel", flaky)
    assert main(argv) == 0
    with Store(store) as s:
        assert s.table("skips").reason.tolist() == ["device lost (RuntimeError)"]
    monkeypatch.undo()
    assert main(argv) == 0
    with Store(store) as s:
        assert s.counts()["kernel_measurements"] == 0 and s.counts()["skips"] == 1  # same settings: not retried
    assert main([*argv, "--retry-skips"]) == 0
    with Store(store) as s:
        assert s.counts()["kernel_measurements"] == 2 and s.counts()["skips"] == 0
    check_complete(store, 1)


def test_models_are_identified_by_content(tmp_path, fast_config):
    """a/net.onnx and a different b/net.onnx are two models; a re-exported net.onnx is measured again."""
    a, b, c = (tmp_path / d / "net.onnx" for d in "abc")
    for p, n in ((a, 16), (b, 32), (c, 32)):
        p.parent.mkdir()
        onnx.save(relu_model(n), p)
    store = tmp_path / "s.sqlite"
    base = ["collect", "--zoo", "none", "--devices", str(fast_config), "--store", str(store)]
    assert main([*base, "--model", str(a), "--model", str(b)]) == 0
    first = sha(a)
    onnx.save(relu_model(48), a)  # re-exported: same name, new content
    assert main([*base, "--model", str(a), "--model", str(c)]) == 0  # c is b's content under another path
    with Store(store) as s:
        models, mm = s.table("models"), s.table("model_measurements")
    ids = dict(zip(models.sha256, models.model_id, strict=True))
    assert ids == {first: "net", sha(b): f"net-{sha(b)[:8]}", sha(a): f"net-{sha(a)[:8]}"}
    assert sorted(mm.model_id) == sorted(ids.values())
    check_complete(store, 3)
    data = load_device_data(store)
    assert sorted(data.models.model_id) == sorted(ids.values()) and (data.models.n_kernels == 1).all()


@pytest.mark.slow
def test_two_collects_on_one_store_at_once(tmp_path, fast_config, models):
    """Two processes on one store: both succeed, one waits for the other, nothing is measured twice."""
    store = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "hase.cli", "-q", "collect", "--zoo", "none", "--devices", str(fast_config),
            "--store", str(store)]
    for m in models:
        argv += ["--model", str(m)]
    env = {**os.environ, "COLUMNS": "300"}
    procs = [subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errs = [" ".join(p.communicate(timeout=300)[1].split()) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert any("waiting for it to finish" in e for e in errs), errs  # they did overlap
    assert integrity(store) == "ok"
    counts = check_complete(store, len(models))
    with Store(store) as s:
        assert counts["jobs"] == s.table("jobs").job.nunique()


def test_commit_rechecks_the_done_marker(tmp_path):
    """Two writers that both found a job undone: the second commit writes nothing and raises nothing."""
    row = {"kind": "empty_kernel", "device": "cpu", "median_ms": 0.01}
    with Store(tmp_path / "s.sqlite") as one, Store(tmp_path / "s.sqlite") as two:
        assert not one.is_done("fixed:empty_kernel", "cpu") and not two.is_done("fixed:empty_kernel", "cpu")
        assert one.commit_job("fixed:empty_kernel", "cpu", {"fixed_costs": [row]})
        assert not two.commit_job("fixed:empty_kernel", "cpu", {"fixed_costs": [row]})
        two.record_skip("fixed:empty_kernel", "cpu", "empty kernel", "fixed", "late failure")  # a done job: ignored
        assert two.counts()["fixed_costs"] == 1 and two.counts()["skips"] == 0


def test_bad_limit_and_config_write_nothing(tmp_path, fast_config, conv_model_path, capsys):
    store = tmp_path / "s.sqlite"
    base = ["collect", "--zoo", "none", "--model", str(conv_model_path), "--store", str(store)]
    assert main([*base, "--devices", str(fast_config), "--limit", "-1"]) == 2
    assert "--limit -1 is out of range" in capsys.readouterr().err
    assert main([*base, "--devices", str(fast_config), "--ep", "cpu", "--threads", "-1"]) == 2
    assert "--threads -1 is out of range" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(FAST.replace("runs = 3", "runs = 0"))
    assert main([*base, "--devices", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[profile] runs = 0 is out of range: use an integer from 1 to" in err
    assert main([*base, "--devices", str(fast_config), "--model", str(tmp_path / "missing.onnx")]) == 2
    assert "missing.onnx: no such file" in capsys.readouterr().err
    assert not store.exists()
