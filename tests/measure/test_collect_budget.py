"""`hase collect --budget-s` and `--spans-only`: a run cut short by its budget resumes exactly, and a spans-only
store (full models profiled, no standalone kernel timings) trains the `span` target."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest
from collect_cases import FAST, check_complete, integrity
from conftest import conv_bn_relu_model, embedding_model
from tiny_store import TINY_CONFIG

from hase import paths
from hase.cli import main
from hase.measure import collect as coll
from hase.measure import jobs
from hase.measure.store import Store
from hase.predict.bundle import load_bundle
from hase.runtime.types import EPConfig


@pytest.fixture
def argv(tmp_path: Path) -> list[str]:
    (tmp_path / "devices.toml").write_text(FAST)
    out = ["collect", "--zoo", "none", "--devices", str(tmp_path / "devices.toml")]
    for name, model in (("conv4", conv_bn_relu_model(c=4)), ("conv8", conv_bn_relu_model(c=8)),
                        ("conv16", conv_bn_relu_model(c=16, hw=12)), ("emb", embedding_model())):
        onnx.save(model, tmp_path / f"{name}.onnx")
        out += ["--model", str(tmp_path / f"{name}.onnx")]
    return out


@pytest.mark.slow
def test_a_spent_budget_stops_the_run_and_a_rerun_finishes_it(tmp_path, argv, capsys):
    store = tmp_path / "s.sqlite"
    assert main([*argv, "--store", str(store), "--budget-s", "1e-9"]) == 0
    assert "spent: rerun to go on" in capsys.readouterr().out
    assert integrity(store) == "ok"
    with Store(store) as s:
        assert s.table("model_measurements").empty and s.table("kernel_measurements").empty
    assert main([*argv, "--store", str(store), "--budget-s", "600"]) == 0
    assert "not reached" in capsys.readouterr().out
    check_complete(store, 4)


@pytest.mark.slow
def test_spans_only_profiles_models_and_trains_the_span_target(tmp_path, argv):
    store = tmp_path / "s.sqlite"
    sources = [coll.ModelSource(p.stem, p.stem.rstrip("0123456789"), p) for p in sorted(tmp_path.glob("*.onnx"))]
    with Store(store) as s:  # two families (conv, emb), which training's leave-family-out needs
        coll.collect(sources, coll.load_collect_config(tmp_path / "devices.toml"), s, spans_only=True)
    with Store(store) as s:
        mm, km, spans = s.table("model_measurements"), s.table("kernel_measurements"), s.table("node_spans")
        modelled = set(s.table("model_nodes").kernel_id)
    assert len(mm) == 4 and set(spans.kernel_id) == modelled
    assert not modelled & set(km.kernel_id)  # no standalone timing of any model's kernel
    config = tmp_path / "p.toml"
    config.write_text(TINY_CONFIG.replace('targets = ["warm", "span"]', 'targets = ["span"]'))
    out = tmp_path / "predictors"
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(out),
                 "--device", "cpu-test"]) == 0
    bundle = load_bundle(out / "cpu-test")
    assert bundle.default_target == "span" and list(bundle.predictors) == ["span"]
    # a full collect of the same store adds the standalone timings and measures no model twice
    assert main([*argv, "--store", str(store)]) == 0
    check_complete(store, 4)


def test_a_budget_of_zero_is_refused_before_the_store_is_opened(tmp_path, argv, capsys):
    assert main([*argv, "--store", str(tmp_path / "s.sqlite"), "--budget-s", "0"]) == 2
    assert "--budget-s 0 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def test_without_a_checkout_the_packaged_configs_are_used(tmp_path, monkeypatch):
    """An installed wheel in an empty folder: the default zoo, device and predictor configs are the package's."""
    monkeypatch.chdir(tmp_path)
    for default in (paths.ZOO_CONFIG, paths.DEVICES_CONFIG, paths.PREDICTOR_CONFIG):
        assert paths.config_file(default, default) == paths.PACKAGED_CONFIGS / Path(default).name
        assert paths.config_file(default, default).is_file()
    assert paths.config_file("mine.toml", paths.DEVICES_CONFIG) == Path("mine.toml")  # never replaces a given one


@pytest.mark.slow
def test_collect_runs_in_an_empty_folder_with_the_packaged_devices(tmp_path, monkeypatch):
    model = tmp_path / "m" / "conv4.onnx"
    model.parent.mkdir()
    onnx.save(conv_bn_relu_model(c=4), model)
    monkeypatch.chdir(tmp_path)
    assert main(["collect", "--zoo", "none", "--model", str(model), "--device", "cpu-1t", "--spans-only",
                 "--budget-s", "300"]) == 0
    with Store(tmp_path / paths.STORE) as s:
        assert len(s.table("model_measurements")) == 1 and set(s.table("model_measurements").device) == {"cpu-1t"}


def test_spans_only_times_a_sampled_block_lightly_and_everything_else_as_configured(tmp_path, argv):
    settings = coll.load_collect_config(tmp_path / "devices.toml").settings
    block = jobs.ModelJob("model:b", onnx.ModelProto(), coll.ModelSource("b", "sampled-conv", tmp_path / "b.onnx"),
                          "b", ())
    net = dataclasses.replace(block, src=coll.ModelSource("n", "resnet", tmp_path / "n.onnx"))
    with Store(tmp_path / "s.sqlite") as store:
        run = coll.DeviceRun(store, EPConfig(name="cpu-test"), settings, coll.CollectReport(), spans_only=True)
        light = run.settings_for(block).model
        assert light.min_runs == min(settings.model.min_runs, coll.BLOCK_TIMING.min_runs)
        assert light.min_time_s == min(settings.model.min_time_s, coll.BLOCK_TIMING.min_time_s)
        assert run.settings_for(block).model_blocks == settings.model_blocks  # still three blocks: noisy flags
        assert run.settings_for(net) == settings
        run.spans_only = False
        assert run.settings_for(block) == settings


def test_a_budget_or_spans_only_on_a_cluster_is_refused_before_anything_starts(tmp_path, argv, capsys):
    store = tmp_path / "s.sqlite"
    for extra in (["--budget-s", "60"], ["--spans-only"]):
        assert main([*argv, "--store", str(store), "--cluster", "auto", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--budget-s and --spans-only are for a collect on this host" in err
    assert not store.exists()
