"""`hase collect --budget-s` and `--spans-only`: a run cut short by its budget resumes exactly, and a spans-only
store (full models profiled, no standalone kernel timings) trains the `span` target."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from collect_cases import FAST, check_complete, integrity
from conftest import conv_bn_relu_model, embedding_model
from tiny_store import TINY_CONFIG

from hase.cli import main
from hase.measure import collect as coll
from hase.measure.store import Store
from hase.predict.bundle import load_bundle


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
