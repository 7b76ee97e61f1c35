"""hase.predict.bundle: predictor directories hold data, never code; tampered, edited and escaping ones are refused."""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_manifest import sample_manifest

from hase import paths
from hase.errors import HaseError
from hase.files import file_sha256
from hase.kernels.types import KernelSpec, TensorSpec
from hase.predict.bundle import (
    CV_MODELS_CSV,
    PredictorBundle,
    feature_schema,
    load_bundle,
    predictor_dir,
    read_manifest,
    save_bundle,
    schema_sha,
)
from hase.predict.calibration import Calibration
from hase.predict.manifest import DIGEST, MANIFEST, PICKLE_FORMAT, Manifest, manifest_digest
from hase.predict.predictor import KernelPredictor
from hase.runtime.types import EPConfig

RETRAIN = "retrain with `make train`"


def add_spec(n: int) -> KernelSpec:
    t = TensorSpec("a", (1, n), "float32")
    return KernelSpec(f"add{n}", "Add", "", (), (t, TensorSpec("b", (1, n), "float32")),
                      (TensorSpec("y", (1, n), "float32"),))


@pytest.fixture(scope="module")
def fitted() -> tuple[KernelPredictor, list[KernelSpec]]:
    specs = [add_spec(n) for n in (64, 128, 256, 512, 1024, 2048)]
    y = [0.001 + 1e-6 * n for n in (64, 128, 256, 512, 1024, 2048)]
    return KernelPredictor({"default": {"n_estimators": 4}}, min_samples=3).fit(specs, y), specs


def current_manifest(device: str = "cpu-1t", targets: tuple[str, ...] = ("warm",)) -> Manifest:
    """A manifest with this Hase version's feature schema (so it loads)."""
    return sample_manifest(device, targets, schema_sha=schema_sha(feature_schema()))


def rewrite_manifest(d: Path, edit: Callable[[dict[str, Any]], None], sign: bool = True) -> None:
    """Edit manifest.json; with `sign`, recompute its digest as a forger (or a careless tool) would."""
    raw = json.loads((d / MANIFEST).read_text())
    edit(raw)
    if sign:
        raw[DIGEST] = manifest_digest(raw)
    (d / MANIFEST).write_text(json.dumps(raw))


def list_file(d: Path, name: str) -> Callable[[dict[str, Any]], None]:
    """An edit that lists `name` in the manifest with the sha256 of the file now there."""
    def edit(raw: dict[str, Any]) -> None:
        raw["files"][name] = file_sha256(d / name)
    return edit


def one_line_error(exc: pytest.ExceptionInfo[HaseError]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and RETRAIN in msg
    return msg


class Canary:
    """Unpickling this creates `path`: the proof that a file ran code when loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def test_save_load_round_trip_predicts_identically(fitted, tmp_path):
    model, specs = fitted
    extra = {CV_MODELS_CSV: pd.DataFrame({"model_id": ["m0"], "pred_ms": [1.0]})}
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": model}, extra)
    on_disk = json.loads((d / MANIFEST).read_text())
    assert set(on_disk["files"]) == {"warm.npz", "warm.json", CV_MODELS_CSV}
    assert sorted(p.name for p in d.iterdir()) == sorted([*on_disk["files"], MANIFEST])
    assert "allow_pickle=False" in on_disk["security"] and on_disk[DIGEST] == manifest_digest(on_disk)
    bundle = load_bundle(d)
    assert isinstance(bundle, PredictorBundle) and bundle.device == "cpu-1t" and bundle.path == d
    assert bundle.manifest == read_manifest(d) and bundle.manifest.files == on_disk["files"]
    probe = [*specs, add_spec(4096), add_spec(7)]
    frame, draws = bundle.predictors["warm"].predict_detail(probe)
    frame0, draws0 = model.predict_detail(probe)
    assert frame.equals(frame0) and np.array_equal(draws, draws0)  # bit for bit, not approximately
    assert bundle.target(None) == "warm" and bundle.calibration("warm") == Calibration("scale", "ols", 1.1, 0.01)
    # the manifest's level (sample_manifest's is `extended`), not EPConfig's default `all`
    assert bundle.ep_config() == EPConfig(name="cpu-1t", ep="cpu", opt_level="extended")
    assert list(load_bundle(d, ["default"]).predictors) == ["warm"]
    with pytest.raises(HaseError, match=r"no predictor for target\(s\) \['span'\]"):
        load_bundle(d, ["span"])
    with pytest.raises(HaseError, match="no 'span' target"):
        bundle.target("span")


def test_saving_is_reproducible_and_refuses_what_loading_would(fitted, tmp_path):
    a = save_bundle(tmp_path / "a", current_manifest(), {"warm": fitted[0]})
    b = save_bundle(tmp_path / "b", current_manifest(), {"warm": fitted[0]})
    assert all(file_sha256(a / n) == file_sha256(b / n) for n in ("warm.npz", "warm.json", MANIFEST))
    with pytest.raises(ValueError, match="no target of the manifest"):
        save_bundle(tmp_path / "c", current_manifest(), {"cold": fitted[0]})
    with pytest.raises(ValueError, match="holds only"):
        save_bundle(tmp_path / "c", current_manifest(), {}, {"../notes.csv": pd.DataFrame()})
    assert not (tmp_path / "c").exists()


def test_ep_config_follows_the_device_metadata(fitted, tmp_path):
    m = current_manifest(device="gpu")
    meta = dataclasses.replace(m.device_meta, execution_provider="CUDAExecutionProvider", intra_op_threads=0,
                               inter_op_threads=2, opt_level="all")
    bundle = PredictorBundle(dataclasses.replace(m, device_meta=meta), {"warm": fitted[0]})
    # 0 intra-op threads is ORT's default thread count (the `cpu-mt` device), kept as it is, not read as 1
    assert bundle.ep_config() == EPConfig(name="gpu", ep="cuda", intra_op_threads=0, inter_op_threads=2,
                                          opt_level="all")


def test_predictor_dir_lists_the_devices_it_has(fitted, tmp_path):
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    assert predictor_dir("cpu-1t", tmp_path / "p") == d
    with pytest.raises(HaseError, match=r"searched --predictors .*p: \['cpu-1t'\]"):
        predictor_dir("gpu", tmp_path / "p")
    assert (predictor_dir("cpu-1t") / MANIFEST).is_file()  # the shipped predictor


def test_saving_over_the_shipped_predictors_is_refused(fitted, tmp_path, monkeypatch):
    shipped = tmp_path / "pkg" / "predictors"  # a stand-in: the real package data is never written, even by a test
    (shipped / "cpu-1t").mkdir(parents=True)
    (shipped / "cpu-1t" / "marker").write_text("shipped")
    monkeypatch.setattr(paths, "SHIPPED_PREDICTORS", shipped)
    for out in (shipped / "cpu-1t", shipped / "new-device", shipped / "x" / ".." / "cpu-1t"):
        with pytest.raises(HaseError, match="inside the predictors shipped with Hase"):
            save_bundle(out, current_manifest(), {"warm": fitted[0]})
    assert sorted(p.name for p in shipped.rglob("*")) == ["cpu-1t", "marker"]  # untouched, no temporary left
    assert (save_bundle(tmp_path / "user" / "cpu-1t", current_manifest(), {"warm": fitted[0]}) / MANIFEST).is_file()


def test_tampered_incomplete_and_broken_directories_are_refused(fitted, tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    raw = (d / "warm.npz").read_bytes()
    (d / "warm.npz").write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(HaseError, match=r"sha256 .* does not match the manifest") as exc:
        load_bundle(d)
    one_line_error(exc)
    (d / "warm.npz").unlink()
    with pytest.raises(HaseError, match="incomplete"):
        read_manifest(d)
    (d / MANIFEST).write_text("{")
    with pytest.raises(HaseError, match="not valid JSON"):
        read_manifest(d)
    (d / MANIFEST).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(HaseError, match="not valid JSON"):
        read_manifest(d)
    (d / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(HaseError, match="not valid JSON"):
        read_manifest(d)
    (d / MANIFEST).write_text(json.dumps({"files": {}}))
    with pytest.raises(HaseError, match="not a hase-predictor/2 manifest"):
        read_manifest(d)
    (d / MANIFEST).unlink()
    with pytest.raises(HaseError, match=r"no manifest\.json"):
        read_manifest(d)
    with pytest.raises(HaseError, match="not found"):
        read_manifest(tmp_path / "missing")


def test_an_edited_manifest_is_refused(fitted, tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    before = (d / MANIFEST).read_text()
    rewrite_manifest(d, lambda raw: raw["targets"]["warm"]["calibration"].update(alpha=900.0), sign=False)
    with pytest.raises(HaseError, match=r"manifest\.json does not match its digest: it was edited") as exc:
        load_bundle(d)
    one_line_error(exc)
    (d / MANIFEST).write_text(before.replace('"device": "cpu-1t"', '"device": "cpu-2t"', 1))  # text-level edit
    with pytest.raises(HaseError, match="does not match its digest"):
        read_manifest(d)
    rewrite_manifest(d, lambda raw: raw.pop(DIGEST), sign=False)
    with pytest.raises(HaseError, match="has no digest"):
        read_manifest(d)
    (d / MANIFEST).write_text(before)
    assert read_manifest(d).target("warm").calibration.calibration.alpha == 1.1
    reordered = dict(reversed(json.loads(before).items()))
    (d / MANIFEST).write_text(json.dumps(reordered, indent=4))  # whitespace and key order are no edit
    assert read_manifest(d).target("warm").calibration.calibration.alpha == 1.1


def object_array_npz(d: Path, canary: Path) -> None:
    np.savez(d / "warm.npz", **{"m0.left": np.array([Canary(canary)], dtype=object)})


def pickle_named_npz(d: Path, canary: Path) -> None:
    (d / "warm.npz").write_bytes(pickle.dumps(Canary(canary)))


def npy_pickle_named_npz(d: Path, canary: Path) -> None:
    np.save(d / "warm.npy", np.array([Canary(canary)], dtype=object))
    (d / "warm.npy").rename(d / "warm.npz")


@pytest.mark.parametrize("plant", [object_array_npz, pickle_named_npz, npy_pickle_named_npz])
def test_a_malicious_array_file_with_a_matching_manifest_runs_no_code(fitted, tmp_path, plant):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    canary = tmp_path / "canary"
    plant(d, canary)
    rewrite_manifest(d, list_file(d, "warm.npz"))  # every hash matches: only the loader stands in the way
    assert read_manifest(d).files["warm.npz"] == file_sha256(d / "warm.npz")
    with pytest.raises(HaseError, match=r"warm\.npz holds pickled objects, which Hase never loads") as exc:
        load_bundle(d)
    one_line_error(exc)
    assert not canary.exists()


def test_pickle_files_are_never_loaded(fitted, tmp_path):
    canary = tmp_path / "canary"
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    (d / "warm.joblib").write_bytes(pickle.dumps(Canary(canary)))
    assert load_bundle(d).predictors["warm"] is not None  # a leftover file the manifest does not name: ignored
    rewrite_manifest(d, list_file(d, "warm.joblib"))  # named in a manifest with a valid digest: refused
    with pytest.raises(HaseError, match=r"names 'warm\.joblib', which is no file of a hase-predictor/2") as exc:
        load_bundle(d)
    one_line_error(exc)

    def old_format(raw: dict[str, Any]) -> None:  # what every manifest of Hase before the .npz files said
        raw.update(format=PICKLE_FORMAT, files={"warm.joblib": file_sha256(d / "warm.joblib")})
        raw.pop(DIGEST)
    rewrite_manifest(d, old_format, sign=False)
    with pytest.raises(HaseError, match=r"old hase-predictor/1 predictor of pickle files.*no longer loads") as exc:
        load_bundle(d)
    one_line_error(exc)
    assert not canary.exists()
    pickle.loads((d / "warm.joblib").read_bytes())  # the payload is real: unpickled, it does write the canary
    assert canary.exists()


@pytest.mark.parametrize("name", ["../outside.npz", "../outside", "/etc/hostname", "sub/warm.npz", "..",
                                  "warm.npz/../../outside.npz", "C:\\outside.npz", ".hidden.csv", "warm.npz\0"])
def test_names_outside_the_directory_are_refused(fitted, tmp_path, name):
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    rewrite_manifest(d, lambda raw: raw["files"].update({name: file_sha256(d / "warm.npz")}))
    with pytest.raises(HaseError, match="a path rather than a file of the predictor directory") as exc:
        read_manifest(d)
    one_line_error(exc)


def test_unexpected_names_and_targets_that_are_paths_are_refused(fitted, tmp_path):
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    for name in ("notes.txt", MANIFEST, "cold.npz", "warm.npy"):
        rewrite_manifest(d, lambda raw, n=name: raw["files"].update({n: file_sha256(d / "warm.npz")}))
        with pytest.raises(HaseError, match=f"names '{name}', which is no file of a hase-predictor/2"):
            read_manifest(d)
        rewrite_manifest(d, lambda raw, n=name: raw["files"].pop(n))
    (tmp_path / "p" / "outside.npz").write_bytes((d / "warm.npz").read_bytes())

    def escaping_target(raw: dict[str, Any]) -> None:
        raw["targets"]["../outside"] = raw["targets"]["warm"]
        raw["files"]["../outside.npz"] = raw["files"]["warm.npz"]
    rewrite_manifest(d, escaping_target)
    with pytest.raises(HaseError, match=r"names '\.\./outside\.npz', a path rather than a file"):
        load_bundle(d, ["../outside"])
    rewrite_manifest(d, lambda raw: [raw["targets"].pop("../outside"), raw["files"].pop("../outside.npz"),
                                     raw["files"].pop("warm.json")])
    with pytest.raises(HaseError, match=r"only one of \.npz and \.json for target\(s\) \['warm'\]"):
        read_manifest(d)


def test_links_out_of_the_directory_are_refused(fitted, tmp_path):
    d = save_bundle(tmp_path / "p" / "cpu-1t", current_manifest(), {"warm": fitted[0]},
                    {CV_MODELS_CSV: pd.DataFrame({"model_id": ["m0"]})})
    outside = tmp_path / "p" / "outside.csv"
    outside.write_bytes((d / CV_MODELS_CSV).read_bytes())  # same bytes, same sha256
    (d / CV_MODELS_CSV).unlink()
    os.symlink(outside, d / CV_MODELS_CSV)
    with pytest.raises(HaseError, match=r"cv_models\.csv is a link to .*outside\.csv, outside the predictor") as exc:
        read_manifest(d)
    one_line_error(exc)
    (d / CV_MODELS_CSV).unlink()
    os.symlink("../outside.csv", d / CV_MODELS_CSV)  # relative links are resolved too
    with pytest.raises(HaseError, match="outside the predictor directory"):
        read_manifest(d)
    (d / CV_MODELS_CSV).unlink()
    outside.rename(d / ".kept.csv")
    os.symlink(".kept.csv", d / CV_MODELS_CSV)  # a link to a file of the directory itself is fine
    assert CV_MODELS_CSV in read_manifest(d).files
    (tmp_path / "elsewhere.json").write_text((d / MANIFEST).read_text())
    (d / MANIFEST).unlink()
    os.symlink(tmp_path / "elsewhere.json", d / MANIFEST)
    with pytest.raises(HaseError, match=r"manifest\.json is a link to .*, outside the predictor directory"):
        read_manifest(d)
    linked = tmp_path / "linked"
    os.symlink(d, linked)
    (d / MANIFEST).unlink()
    (d / MANIFEST).write_text((tmp_path / "elsewhere.json").read_text())
    assert read_manifest(linked).device == "cpu-1t"  # the directory itself may be a link


def drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        inner = raw
        for key in path[:-1]:
            inner = inner[key]
        del inner[path[-1]]
    return edit


def put(value: Any, *path: str) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        inner = raw
        for key in path[:-1]:
            inner = inner[key]
        inner[path[-1]] = value
    return edit


@pytest.mark.parametrize(("edit", "match"), [
    (drop("targets", "warm", "held_out"), r"lacks 'targets\.warm\.held_out'"),
    (drop("default_target"), "lacks 'default_target'"),
    (put([], "files"), "a list at 'files', not an object"),
    (put({"warm.npz": 3}, "files"), "at 'files', not an object of text"),
    (put(["warm"], "targets"), "a list at 'targets', not an object"),
    (put("span", "targets", "warm"), r"a str at 'targets\.warm', not an object"),
    (put("x", "targets", "warm", "calibration", "alpha"), r"targets\.warm\.calibration lacks \['alpha'\]"),
    (put("bogus", "targets", "warm", "calibration", "form"), "calibration bogus/ols"),
    (put({"Conv": "many"}, "targets", "warm", "predictor", "forests"), r"'targets\.warm\.predictor\.forests'"),
    (put([1, 2], "training_data", "families"), r"'training_data\.families', not a list of text"),
    (put({"numpy": 2}, "library_versions"), "'library_versions', not an object of text"),
    (put("slow", "fixed_cost_ms"), "a str at 'fixed_cost_ms', not a number"),
    (put(None, "device_meta"), "a NoneType at 'device_meta', not an object"),
    (put(True, "training_data", "n_models"), r"a bool at 'training_data\.n_models', not an integer"),
])
def test_a_manifest_of_the_wrong_shape_is_one_hase_error(fitted, tmp_path, edit, match):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    rewrite_manifest(d, edit)  # signed: the shape check itself must catch it
    with pytest.raises(HaseError, match=r"manifest\.json: predictor manifest .*" + match) as exc:
        load_bundle(d)
    one_line_error(exc)


@pytest.mark.parametrize("value", [[], "text", 3, None, True])
def test_a_manifest_that_is_no_json_object_is_one_hase_error(tmp_path, value):
    (tmp_path / MANIFEST).write_text(json.dumps(value))
    with pytest.raises(HaseError, match=r"holds a JSON \w+, not a predictor manifest") as exc:
        read_manifest(tmp_path)
    one_line_error(exc)


def test_damaged_predictor_files_with_matching_hashes_are_one_hase_error(fitted, tmp_path):
    d = save_bundle(tmp_path / "cpu-1t", current_manifest(), {"warm": fitted[0]})
    meta = json.loads((d / "warm.json").read_text())
    with np.load(d / "warm.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    cases: list[tuple[Any, dict[str, Any], str]] = [
        ([meta], arrays, r"warm\.json holds a JSON list, not a predictor"),
        ({**meta, "generic": 99}, arrays, "generic refers to member 99"),
        ({k: v for k, v in meta.items() if k != "params"}, arrays, "params is missing"),
        (meta, {**arrays, "m0.left": arrays["m0.left"].astype(np.int64)}, "'left' is int64"),
        (meta, {**arrays, "m0.right": np.full_like(arrays["m0.right"], 10**6)}, "'right' has indices outside"),
        (meta, {**arrays, "extra": arrays["m0.left"]}, r"\['extra'\] do not match"),
    ]
    for bad_meta, bad_arrays, match in cases:
        (d / "warm.json").write_text(json.dumps(bad_meta))
        np.savez(d / "warm.npz", **bad_arrays)
        rewrite_manifest(d, lambda raw: [list_file(d, n)(raw) for n in ("warm.json", "warm.npz")])
        with pytest.raises(HaseError, match=match) as exc:
            load_bundle(d)
        one_line_error(exc)
    (d / "warm.json").write_text(json.dumps(meta))
    np.savez(d / "warm.npz", **arrays)  # written by numpy itself rather than Hase: loads
    rewrite_manifest(d, lambda raw: [list_file(d, n)(raw) for n in ("warm.json", "warm.npz")])
    probe = [add_spec(300)]
    assert np.array_equal(load_bundle(d).predictors["warm"].predict(probe), fitted[0].predict(probe))
    (d / "warm.npz").write_bytes((d / "warm.npz").read_bytes()[:100])
    rewrite_manifest(d, list_file(d, "warm.npz"))
    with pytest.raises(HaseError, match="not an array archive Hase can read"):
        load_bundle(d)


def test_feature_schema_change_requires_retraining(fitted, tmp_path):
    d = save_bundle(tmp_path / "x", sample_manifest(schema_sha="0" * 64), {"warm": fitted[0]})
    with pytest.raises(HaseError, match="another feature schema"):
        load_bundle(d)


def test_the_shipped_predictor_is_data_only_and_predicts():
    d = predictor_dir("cpu-1t")
    manifest = read_manifest(d)
    assert all(Path(name).suffix in (".npz", ".json", ".csv") for name in manifest.files)
    assert not list(d.glob("*.joblib")) and not list(d.glob("*.pkl"))
    bundle = load_bundle(d, ["default"])
    pred = bundle.predictors[bundle.default_target]
    assert isinstance(pred, KernelPredictor) and pred.predict([add_spec(4096)])[0] > 0
