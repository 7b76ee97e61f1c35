"""hase.predict.bundle: saving and loading verified predictor directories, and refusing tampered ones."""
from __future__ import annotations

import dataclasses
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from test_manifest import sample_manifest

from hase.errors import HaseError
from hase.kernels.types import KernelSpec, TensorSpec
from hase.measure.types import EPConfig
from hase.predict.bundle import (
    CV_MODELS_CSV,
    PredictorBundle,
    feature_schema,
    load_bundle,
    predictor_dir,
    read_manifest,
    save_bundle,
    schema_sha,
    sha256_file,
)
from hase.predict.calibration import Calibration
from hase.predict.manifest import MANIFEST, Manifest
from hase.predict.predictor import KernelPredictor


def add_spec(n: int) -> KernelSpec:
    t = TensorSpec("a", (1, n), "float32")
    return KernelSpec(f"add{n}", "Add", "", (), (t, TensorSpec("b", (1, n), "float32")),
                      (TensorSpec("y", (1, n), "float32"),))


@pytest.fixture(scope="module")
def fitted() -> tuple[KernelPredictor, list[KernelSpec]]:
    specs = [add_spec(n) for n in (64, 128, 256, 512, 1024, 2048)]
    y = [0.001 + 1e-6 * n for n in (64, 128, 256, 512, 1024, 2048)]
    return KernelPredictor({"default": {"n_estimators": 4}}, min_samples=3).fit(specs, y), specs


def current_manifest(device: str = "cpu-1t") -> Manifest:
    """A manifest with this Hase version's feature schema (so it loads)."""
    return sample_manifest(device, schema_sha=schema_sha(feature_schema()))


def test_save_load_roundtrip(fitted, tmp_path):
    model, specs = fitted
    extra = {CV_MODELS_CSV: pd.DataFrame({"model_id": ["m0"], "pred_ms": [1.0]})}
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": model}, extra)
    on_disk = json.loads((d / MANIFEST).read_text())
    assert set(on_disk["files"]) == {"warm.joblib", CV_MODELS_CSV} and "pickles" in on_disk["security"]
    bundle = load_bundle(d)
    assert isinstance(bundle, PredictorBundle) and bundle.device == "cpu-1t" and bundle.path == d
    assert bundle.manifest == read_manifest(d) and bundle.manifest.files == on_disk["files"]
    assert np.allclose(bundle.predictors["warm"].predict(specs), model.predict(specs))
    assert bundle.target(None) == "warm" and bundle.calibration("warm") == Calibration("scale", "ols", 1.1, 0.01)
    assert bundle.ep_config() == EPConfig(name="cpu-1t", ep="cpu")
    assert list(load_bundle(d, ["default"]).predictors) == ["warm"]
    with pytest.raises(HaseError, match=r"no predictor for target\(s\) \['span'\]"):
        load_bundle(d, ["span"])
    with pytest.raises(HaseError, match="no 'span' target"):
        bundle.target("span")


def test_ep_config_follows_the_device_metadata(fitted, tmp_path):
    m = current_manifest(device="gpu")
    meta = dataclasses.replace(m.device_meta, execution_provider="CUDAExecutionProvider", intra_op_threads=0,
                               inter_op_threads=2, opt_level="all")
    bundle = PredictorBundle(dataclasses.replace(m, device_meta=meta), {"warm": fitted[0]})
    assert bundle.ep_config() == EPConfig(name="gpu", ep="cuda", intra_op_threads=1, inter_op_threads=2,
                                          opt_level="all")


def test_predictor_dir_lists_the_devices_it_has(fitted, tmp_path):
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    assert predictor_dir("cpu-1t", tmp_path / "p") == d
    with pytest.raises(HaseError, match=r"have: \['cpu-1t'\]"):
        predictor_dir("gpu", tmp_path / "p")
    assert (predictor_dir("cpu-1t") / MANIFEST).is_file()  # the shipped predictor


def test_tampered_incomplete_and_broken_directories_are_refused(fitted, tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    raw = (d / "warm.joblib").read_bytes()
    (d / "warm.joblib").write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(HaseError, match=r"sha256 .* does not match"):  # refused before it is unpickled
        load_bundle(d)
    (d / "warm.joblib").unlink()
    with pytest.raises(HaseError, match="incomplete"):
        read_manifest(d)
    (d / MANIFEST).write_text("{")
    with pytest.raises(HaseError, match="not valid JSON"):
        read_manifest(d)
    (d / MANIFEST).write_text(json.dumps({"files": {}}))
    with pytest.raises(HaseError, match="not a hase-predictor/1 manifest"):
        read_manifest(d)
    (d / MANIFEST).unlink()
    with pytest.raises(HaseError, match=r"no manifest\.json"):
        read_manifest(d)
    with pytest.raises(HaseError, match="not found"):
        read_manifest(tmp_path / "missing")


def test_a_manifest_missing_a_key_names_the_file_and_the_key(fitted, tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    raw = json.loads((d / MANIFEST).read_text())
    del raw["targets"]["warm"]["held_out"]
    (d / MANIFEST).write_text(json.dumps(raw))
    with pytest.raises(HaseError, match=r"manifest\.json: predictor manifest lacks 'targets\.warm\.held_out'"):
        load_bundle(d)


def test_a_joblib_file_that_is_no_predictor_is_refused(tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {})
    joblib.dump({"not": "a predictor"}, d / "warm.joblib")
    raw = json.loads((d / MANIFEST).read_text())
    raw["files"]["warm.joblib"] = sha256_file(d / "warm.joblib")
    (d / MANIFEST).write_text(json.dumps(raw))
    with pytest.raises(HaseError, match="holds a dict, not a KernelPredictor"):
        load_bundle(d)


def test_feature_schema_change_requires_retraining(fitted, tmp_path):
    d = save_bundle(tmp_path / "x", sample_manifest(schema_sha="0" * 64), {"warm": fitted[0]})
    with pytest.raises(HaseError, match="another feature schema"):
        load_bundle(d)


def test_the_shipped_predictor_loads_and_predicts():
    bundle = load_bundle(predictor_dir("cpu-1t"), ["default"])
    pred = bundle.predictors[bundle.default_target]
    assert isinstance(pred, KernelPredictor) and pred.predict([add_spec(4096)])[0] > 0
