"""hase.predict.survey on real ONNX Runtime runs: a survey of this host measured with the tiny store's predictor
(tiny transfer models, a tiny real model), saved and read back unchanged, adapted from without measuring again,
and scored on its real models; broken survey files are one-line errors."""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model
from tiny_store import TINY_MODELS

from hase.errors import HaseError
from hase.measure.types import MeasureSettings, ModelSource
from hase.predict.adapt import TRANSFER_PASSES
from hase.predict.bundle import load_bundle, read_manifest
from hase.predict.survey import (
    adapt_from_survey,
    adapt_in_memory,
    check_matches,
    load_survey,
    real_predictions,
    save_survey,
    survey_dict,
    survey_host,
)
from hase.runtime.host import host_fingerprint
from hase.runtime.types import TimingPolicy

FAST = TimingPolicy(warmup=1, min_runs=5, max_runs=10, min_time_s=0.0, max_time_s=0.05)
SETTINGS = MeasureSettings(kernel=FAST, model=FAST, model_blocks=2, profile_warmup=1, profile_runs=3,
                           cold_sessions=2)


@pytest.fixture(scope="module")
def surveyed(tiny_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This host surveyed for the tiny predictor: the survey file and the predictors folder."""
    tmp = tmp_path_factory.mktemp("survey")
    transfer = [ModelSource(p.stem, p.stem.rstrip("0123456789"), p) for p in sorted(tiny_root.glob("*.onnx"))]
    assert len(transfer) == sum(len(v) for v in TINY_MODELS.values())
    real = tmp / "real.onnx"
    onnx.save(conv_bn_relu_model(c=12, hw=20), real)
    s = survey_host(["cpu-1t"], transfer, [ModelSource("real", "real", real)], transfer_s=5,
                    signature_s=2, predictors_dir=tiny_root / "predictors", settings=SETTINGS)
    return save_survey(s, tmp / "host.survey.json.gz"), tiny_root / "predictors"


def test_a_survey_holds_this_host_its_transfer_set_and_real_models(surveyed):
    path, _ = surveyed
    s = load_survey(path)
    assert s.host == host_fingerprint() and list(s.devices) == ["cpu-1t"]
    d = s.devices["cpu-1t"]
    assert d.intra_op_threads == 1 and d.signature["probes"]
    assert d.transfer and all(m.latency_ms > 0 for m in d.transfer) and math.isfinite(d.others_cores)
    assert sum(math.isfinite(v) for m in d.transfer for v in m.target_ms) > 0
    assert all(1 <= len(m.pass_ms) <= TRANSFER_PASSES and m.latency_ms == min(m.pass_ms) for m in d.transfer)
    (real,) = d.real
    assert real.name == "real" and len(real.pass_ms) == 5 and real.latency_ms == min(real.pass_ms)
    assert 0 <= real.spread <= real.full_spread and real.n_runs >= 10 and len(real.sha256) == 64
    assert [k.op_type for k in d.specs(real)]  # its kernel graph, as ORT built it here
    assert survey_dict(load_survey(path)) == survey_dict(s)  # read back unchanged


def test_a_first_format_survey_with_a_kernel_table_per_configuration_still_reads(surveyed, tmp_path):
    path, _ = surveyed
    s = load_survey(path)
    d = survey_dict(s)
    assert d["format"] == 3 and "kernels" not in d["devices"]["cpu-1t"]  # one table, named by every configuration
    old = {**{k: v for k, v in d.items() if k != "kernels"}, "format": 1,
           "devices": {n: {**v, "kernels": d["kernels"]} for n, v in d["devices"].items()}}
    (tmp_path / "old.survey.json.gz").write_bytes(gzip.compress(json.dumps(old).encode()))
    assert survey_dict(load_survey(tmp_path / "old.survey.json.gz")) == d
    # format 2 had no transfer passes: each model reads as measured once, at its latency
    def once(v: dict) -> dict:
        return {**v, "transfer": [{k: x for k, x in m.items() if k != "pass_ms"} for m in v["transfer"]]}

    two = {**d, "format": 2, "devices": {n: once(v) for n, v in d["devices"].items()}}
    (tmp_path / "two.survey.json.gz").write_bytes(gzip.compress(json.dumps(two).encode()))
    again = load_survey(tmp_path / "two.survey.json.gz").devices["cpu-1t"].transfer
    assert all(m.pass_ms == (m.latency_ms,) and math.isnan(m.spread) for m in again)


def test_adapting_from_a_survey_measures_nothing_and_names_the_survey(surveyed, tmp_path):
    path, predictors = surveyed
    r = adapt_from_survey("cpu-1t", load_survey(path), path, tmp_path, predictors)
    assert r.name == f"cpu-1t@{host_fingerprint().digest}" and r.spent_s < 30
    manifest = read_manifest(r.out_dir)
    assert manifest.adaptation is not None and manifest.adaptation["survey"] == str(path)
    assert manifest.host == host_fingerprint()
    assert load_bundle(r.out_dir).predictors[r.target] is not None


def test_real_models_are_scored_from_the_survey_alone(surveyed):
    path, predictors = surveyed
    s = load_survey(path)
    d = s.devices["cpu-1t"]
    bundle = load_bundle(predictors / "cpu-1t")
    check_matches(bundle, d, "survey")
    a = adapt_in_memory(bundle, d)
    (row,) = real_predictions(a.predictor, a.calibration, d)
    assert row["model"] == "real" and row["predicted_ms"] > 0 and row["measured_ms"] == d.real[0].latency_ms
    assert row["error_pct"] == pytest.approx((row["predicted_ms"] / row["measured_ms"] - 1) * 100)


def test_host_ratios_lays_out_the_transfer_kernels_by_forest_size_and_intensity(surveyed):
    """benchmarks/host_ratios.py's table, from the survey alone: every measured transfer kernel, once."""
    spec = importlib.util.spec_from_file_location(
        "host_ratios", Path(__file__).resolve().parents[2] / "benchmarks" / "host_ratios.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path, predictors = surveyed
    d = load_survey(path).devices["cpu-1t"]
    bundle = load_bundle(predictors / "cpu-1t")
    df = mod.kernel_ratios(bundle.predictors[bundle.default_target], d)
    assert len(df) == sum(math.isfinite(v) and v > 0 for m in d.transfer for v in m.target_ms)
    assert (df["ratio"] > 0).all() and (df["intensity"] >= 0).all() and df["forest"].notna().all()
    assert df["size"].notna().all()


def test_a_survey_of_other_settings_is_refused(surveyed, tmp_path):
    path, predictors = surveyed
    raw = json.loads(gzip.decompress(path.read_bytes()))
    raw["devices"]["cpu-1t"]["intra_op_threads"] = 4
    other = tmp_path / "other.survey.json.gz"
    other.write_bytes(gzip.compress(json.dumps(raw).encode()))
    with pytest.raises(HaseError, match="4 intra-op thread"):
        adapt_from_survey("cpu-1t", load_survey(other), other, tmp_path / "out", predictors)
    with pytest.raises(HaseError, match="no device configuration 'cpu-mt'"):
        load_survey(path).device("cpu-mt")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("content", "match"), [
    (None, "does not exist"),
    (b"not gzip", "not a gzip'd JSON survey"),
    (gzip.compress(b'{"format": 99}'), "has format 99"),
    (gzip.compress(b'{"format": 1, "devices": {}}'), "is malformed"),
])
def test_a_broken_survey_file_is_one_error_naming_it(content, match, tmp_path):
    p = tmp_path / "s.survey.json.gz"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(HaseError, match=match):
        load_survey(p)


def test_real_models_moved_to_threads_by_a_thread_model(surveyed):
    """A threaded device's survey score: the one-thread forests' node times moved by a thread model (at one thread
    the move changes nothing)."""
    from hase.predict.thread_estimate import SHIPPED_THREAD_MODELS
    from hase.predict.threads import load_thread_model

    path, predictors = surveyed
    d = load_survey(path).devices["cpu-1t"]
    bundle = load_bundle(predictors / "cpu-1t")
    a = adapt_in_memory(bundle, d)
    model = load_thread_model(sorted(SHIPPED_THREAD_MODELS.glob("*.npz"))[0])
    (plain,) = real_predictions(a.predictor, a.calibration, d)
    (one,) = real_predictions(a.predictor, a.calibration, d, (model, 1))
    (two,) = real_predictions(a.predictor, a.calibration, d, (model, 2))
    assert one["predicted_ms"] == pytest.approx(plain["predicted_ms"], rel=1e-12)
    assert two["predicted_ms"] != pytest.approx(plain["predicted_ms"], rel=1e-6)
    assert two["measured_ms"] == plain["measured_ms"]
