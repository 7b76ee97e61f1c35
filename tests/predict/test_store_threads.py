"""hase.predict.store_threads and `hase train`: a store holding one host's in-model spans at one thread and at two
gives the one-thread predictor its thread model, saved in the bundle, listed in the manifest and picked by
`hase predict --threads` on that host."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model, embedding_model
from tiny_store import TINY_CONFIG

from hase.cli import main
from hase.measure import collect as coll
from hase.measure.store import Store
from hase.predict.bundle import THREADS_FILE, load_bundle
from hase.predict.store_threads import fit_store_threads, partner_device
from hase.predict.thread_estimate import pick_thread_model
from hase.runtime.host import host_fingerprint

REAL = Path(__file__).resolve().parents[1] / "data" / "models" / "timm_semnasnet_050_cls10_b1.onnx"
DEVICES = """
[model_timing]
warmup = 1
min_runs = 3
max_runs = 10
min_time_s = 0.0
max_time_s = 0.1
[profile]
warmup = 1
runs = 3
[[device]]
name = "cpu-one"
ep = "cpu"
intra_op_threads = 1
opt_level = "all"
[[device]]
name = "cpu-two"
ep = "cpu"
intra_op_threads = 2
opt_level = "all"
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spans of four models (two conv nets, an embedding, a real exported MnasNet) at one and at two threads."""
    root = tmp_path_factory.mktemp("threads_store")
    (root / "devices.toml").write_text(DEVICES)
    sources = []
    for name, family, model in (("conv4", "conv", conv_bn_relu_model(c=4)), ("conv8", "conv", conv_bn_relu_model(c=8)),
                                ("emb", "embed", embedding_model())):
        onnx.save(model, root / f"{name}.onnx")
        sources.append(coll.ModelSource(name, family, root / f"{name}.onnx"))
    sources.append(coll.ModelSource("semnasnet", "mnasnet", REAL))
    path = root / "s.sqlite"
    with Store(path) as s:
        coll.collect(sources, coll.load_collect_config(root / "devices.toml"), s, spans_only=True)
    return path


@pytest.mark.slow
def test_the_one_thread_device_pairs_with_the_same_hosts_two_thread_spans(store):
    assert partner_device(store, "cpu-one") == ("cpu-two", 2)
    assert partner_device(store, "cpu-two") is None  # not a one-thread configuration
    assert partner_device(store, "cpu-none") is None
    fitted = fit_store_threads(store, "cpu-one")
    assert fitted is not None and fitted.partner == "cpu-two" and fitted.threads == 2
    assert fitted.models == 4 and fitted.kernels >= 50 and fitted.kernel_speedup > 0
    assert fitted.model.host == host_fingerprint().digest and fitted.model.threads == (2,)
    assert fitted.describe()["kernels"] == fitted.kernels


@pytest.mark.slow
def test_train_ships_the_thread_model_and_predict_threads_uses_it(store, tmp_path, capsys):
    config = tmp_path / "p.toml"
    config.write_text(TINY_CONFIG.replace('targets = ["warm", "span"]', 'targets = ["span"]'))
    out = tmp_path / "predictors"
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(out),
                 "--device", "cpu-one"]) == 0
    bundle = load_bundle(out / "cpu-one")
    assert THREADS_FILE in bundle.manifest.files
    entry = bundle.manifest.threads
    assert entry["partner"] == "cpu-two" and entry["threads"] == 2 and entry["models"] == 4
    trained = bundle.thread_model()
    assert trained is not None and trained.threads == (2,)
    model, which = pick_thread_model(host_fingerprint(), bundle=bundle)
    assert model.host == trained.host and "trained with predictor 'cpu-one'" in which
    capsys.readouterr()
    assert main(["predict", str(REAL), "--predictors", str(out), "--device", "cpu-one", "--threads", "1,2"]) == 0
    assert "trained with predictor 'cpu-one'" in capsys.readouterr().out
    config.write_text(config.read_text().replace("[training]", "[training]\nthread_model = false"))
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(out),
                 "--device", "cpu-one"]) == 0
    plain = load_bundle(out / "cpu-one")
    assert THREADS_FILE not in plain.manifest.files and not plain.manifest.threads and plain.thread_model() is None


@pytest.mark.slow
def test_train_threaded_writes_the_one_thread_predictor_moved_to_ort_default_threads(store, tmp_path, capsys):
    """`hase train --threaded NAME`: NAME is the one-thread forests moved by the thread model trained with them, so
    `hase predict --device NAME` gives what `--threads` gives at this host's cores; adapting it adapts its
    one-thread kernels (measured at one thread) and keeps the thread model."""
    from hase.api import load_predictor
    from hase.errors import HaseError
    from hase.measure.types import ModelSource
    from hase.predict.adapt import adapt
    from hase.predict.threaded import derive_threaded, is_threaded

    config = tmp_path / "p.toml"
    config.write_text(TINY_CONFIG.replace('targets = ["warm", "span"]', 'targets = ["span"]'))
    out = tmp_path / "predictors"
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(out), "--device", "cpu-one",
                 "--threaded", "cpu-dflt"]) == 0
    one, moved = load_bundle(out / "cpu-one"), load_bundle(out / "cpu-dflt")
    cores = host_fingerprint().cores
    assert is_threaded(moved) and not is_threaded(one) and moved.moved_threads() == cores
    assert moved.manifest.threads["moved_from"] == "cpu-one" and moved.ep_config().intra_op_threads == 0
    assert moved.manifest.files[THREADS_FILE] == one.manifest.files[THREADS_FILE]  # the same thread model
    at_cores = load_predictor("cpu-one", predictors_dir=out).predict_threads(str(REAL), [1, cores])
    threaded = load_predictor("cpu-dflt", predictors_dir=out).predict(str(REAL))
    assert threaded.latency_ms == pytest.approx(at_cores["latency_ms"].iloc[1], rel=1e-9)
    assert threaded.sum_ms == pytest.approx(at_cores["sum_ms"].iloc[1], rel=1e-9)
    if cores > 1:  # moved to more threads than one: not the one-thread prediction
        assert threaded.latency_ms != pytest.approx(at_cores["latency_ms"].iloc[0], rel=1e-6)
    assert threaded.low_ms <= threaded.latency_ms <= threaded.high_ms
    r = adapt("cpu-dflt", [ModelSource("real", "real", REAL)], 30.0, tmp_path / "adapted", out)
    adapted = load_bundle(r.out_dir)
    assert r.name == f"cpu-dflt@{host_fingerprint().digest}" and r.n_models == 1
    assert is_threaded(adapted) and adapted.moved_threads() == cores and adapted.ep_config().intra_op_threads == 0
    assert adapted.manifest.adaptation is not None and adapted.manifest.adaptation["kernel_threads"] == 1
    assert THREADS_FILE in adapted.manifest.files  # the thread model travels with the adapted device
    with pytest.raises(HaseError, match="one-thread CPU predictor"):
        derive_threaded(out / "cpu-dflt", tmp_path / "again", "cpu-again")  # not twice
    config.write_text(config.read_text().replace("[training]", "[training]\nthread_model = false"))
    capsys.readouterr()
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(tmp_path / "plain"),
                 "--device", "cpu-one", "--threaded", "cpu-dflt"]) == 2  # no thread model: one line, no traceback
    err = capsys.readouterr().err
    assert "has no thread model" in err and "Traceback" not in err and not (tmp_path / "plain" / "cpu-dflt").exists()
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(tmp_path / "two"),
                 "--device", "cpu-one", "--device", "cpu-two", "--threaded", "cpu-dflt"]) == 2  # before any training
    err = capsys.readouterr().err
    assert "--threaded cpu-dflt moves one one-thread device" in err and not (tmp_path / "two").exists()
