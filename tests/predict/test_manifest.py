"""hase.predict.manifest: the typed manifest parses the shipped one, round-trips, and names what is missing."""
from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from conftest import REPO

from hase.commands.common import DEFAULT_OPT_LEVEL
from hase.errors import HaseError
from hase.predict.calibration import Calibration
from hase.predict.manifest import (
    DIGEST,
    FORMAT,
    MANIFEST,
    PICKLE_FORMAT,
    CalibrationEntry,
    Manifest,
    PredictorSummary,
    TargetEntry,
    TrainingData,
    manifest_digest,
)
from hase.predict.metrics import score
from hase.runtime.types import DeviceMeta

SHIPPED = REPO / "hase" / "predictors" / "cpu-1t" / MANIFEST


def sample_entry(kernels_seen: bool = True) -> TargetEntry:
    """A target entry with real scores of made-up predictions (what `hase train` writes, in miniature)."""
    s = score([1.0, 2.0, 4.0], [1.1, 1.9, 4.0])
    fit = ({"model_id": "m0", "measured_ms": 1.0, "fitted_ms": 1.1},)
    return TargetEntry(
        doc="in-model node span", calibration=CalibrationEntry(Calibration("scale", "ols", 1.1, 0.01), fit),
        calibration_candidates=({"calibration": "scale/ols", **s.to_dict()},), held_out=s,
        held_out_by_family=({"family": "a", **s.to_dict()},), held_out_raw_sum=s, train=s,
        kernels_held_out=s if kernels_seen else None, kernels_held_out_by_key=(),
        predictor=PredictorSummary({"Conv": 40}, ("conv",), {"Add": "3 training kernels"}, {"Add": 3}, 43,
                                   {"Conv": (1e-9, 0.0, 0.01)}))


def sample_manifest(device: str = "cpu-1t", targets: tuple[str, ...] = ("warm",), schema_sha: str = "0" * 64,
                    files: dict[str, str] | None = None) -> Manifest:
    """A complete manifest of made-up content for `device` and `targets` (the first is the default)."""
    meta = DeviceMeta(device=device, cpu_model="cpu", gpu_name="", gpu_driver="", ort_version="1.20",
                      execution_provider="CPUExecutionProvider", intra_op_threads=1, inter_op_threads=1,
                      opt_level="extended", hase_version="0.1.0")
    return Manifest(
        device=device, device_meta=meta, fixed_cost_ms=0.04, created_at="2026-01-01T00:00:00+0000",
        library_versions={"numpy": "2.0"}, feature_schema={"conv": {"ops": ["Conv"], "columns": ["flops"]}},
        feature_schema_sha=schema_sha, default_target=targets[0],
        training_data=TrainingData("store.sqlite", 3, ("a", "b"), 43, 60), config={"min_samples": 8},
        evaluation="leave-family-out", targets={t: sample_entry() for t in targets},
        baselines_held_out=({"baseline": "flops", **score([1.0], [2.0]).to_dict()},), files=files or {})


def as_json(m: Manifest) -> dict[str, Any]:
    return json.loads(json.dumps(m.to_dict()))


def test_the_shipped_manifest_parses_and_round_trips_exactly():
    raw = json.loads(SHIPPED.read_text())
    m = Manifest.from_dict(raw)
    assert m.device == "cpu-1t" and m.default_target in m.targets and m.device_meta.intra_op_threads == 1
    entry = m.target(m.default_target)
    assert entry.held_out.n == raw["targets"][m.default_target]["held_out"]["n"]
    assert entry.calibration.calibration.name == raw["targets"][m.default_target]["calibration"]["name"]
    assert set(entry.predictor.skipped) == set(raw["targets"][m.default_target]["predictor"]["skipped"])
    assert as_json(m) == raw and raw[DIGEST] == manifest_digest(raw)
    target = m.default_target  # only its forests are shipped
    trained = {"threads.npz"} if raw.get("threads") else set()  # the host's thread model, trained beside it
    assert trained and raw["threads"]["threads"] == 2  # the 2026-11-29 `cpu-1t`: the zoo at 1 and at 2 threads
    assert set(m.files) == {f"{target}.npz", f"{target}.json", "baselines.csv", "cv_kernels.csv", "cv_models.csv",
                            *trained}
    assert {p.name for p in SHIPPED.parent.iterdir()} == {*m.files, SHIPPED.name}  # nothing else, nothing missing
    # the shipped predictor describes the default device configuration: ORT's default level, one thread
    assert (m.device_meta.opt_level, m.device_meta.inter_op_threads) == (DEFAULT_OPT_LEVEL, 1)


def test_a_built_manifest_round_trips():
    m = sample_manifest(targets=("span", "warm"), files={"span.npz": "ab" * 32, "span.json": "cd" * 32})
    d = as_json(m)
    assert d["format"] == FORMAT and d["targets"]["span"]["calibration"]["name"] == "scale/ols"
    assert Manifest.from_dict(d) == m
    empty = dataclasses.replace(m, targets={"span": sample_entry(kernels_seen=False)})
    d = as_json(empty)
    assert d["targets"]["span"]["kernels_held_out"] == {}  # the file format: an empty object, not null
    assert Manifest.from_dict(d).targets["span"].kernels_held_out is None


@pytest.mark.parametrize(("path", "named"), [
    (("default_target",), "'default_target'"),
    (("device_meta", "opt_level"), "'device_meta.opt_level'"),
    (("targets", "warm", "held_out"), "'targets.warm.held_out'"),
    (("targets", "warm", "predictor", "skipped"), "'targets.warm.predictor.skipped'"),
    (("targets", "warm", "calibration", "fit_data"), "'targets.warm.calibration.fit_data'"),
    (("training_data", "n_models"), "'training_data.n_models'"),
])
def test_a_missing_key_is_a_hase_error_naming_it(path, named):
    d = as_json(sample_manifest())
    inner = d
    for key in path[:-1]:
        inner = inner[key]
    del inner[path[-1]]
    with pytest.raises(HaseError, match=f"lacks {named}: retrain with `make train`"):
        Manifest.from_dict(d)


def test_missing_scores_or_coefficients_and_wrong_types_are_named():
    d = as_json(sample_manifest())
    broken = copy.deepcopy(d)
    del broken["targets"]["warm"]["train"]["acc10"]
    with pytest.raises(HaseError, match=r"targets\.warm\.train lacks numeric \['acc10'\]"):
        Manifest.from_dict(broken)
    broken = copy.deepcopy(d)
    del broken["targets"]["warm"]["calibration"]["alpha"]
    with pytest.raises(HaseError, match=r"targets\.warm\.calibration lacks \['alpha'\]"):
        Manifest.from_dict(broken)
    broken = copy.deepcopy(d)
    broken["training_data"]["n_models"] = "three"
    with pytest.raises(HaseError, match=r"a str at 'training_data\.n_models', not an integer"):
        Manifest.from_dict(broken)
    with pytest.raises(HaseError, match=f"not a {FORMAT} manifest"):
        Manifest.from_dict({**d, "format": "something-else/2"})


def test_target_lookup_lists_the_targets():
    m = sample_manifest(targets=("span", "warm"))
    assert m.target("warm") is m.targets["warm"]
    with pytest.raises(HaseError, match=r"no target 'cold': it has \['span', 'warm'\]"):
        m.target("cold")


def test_the_digest_covers_every_value_and_only_the_values():
    m = sample_manifest()
    d = as_json(m)
    assert d[DIGEST] == manifest_digest(d) == manifest_digest({k: d[k] for k in reversed(list(d))})
    for edit in (lambda x: x["targets"]["warm"]["calibration"].update(alpha=1.2),
                 lambda x: x["files"].update({"warm.npz": "0" * 64}), lambda x: x.update(fixed_cost_ms=None),
                 lambda x: x["training_data"]["families"].append("c")):
        edited = copy.deepcopy(d)
        edit(edited)
        assert manifest_digest(edited) != d[DIGEST]
    assert as_json(dataclasses.replace(m, fixed_cost_ms=0.05))[DIGEST] != d[DIGEST]  # to_dict signs what it writes
    assert Manifest.from_dict({k: v for k, v in d.items() if k != DIGEST}) == m  # parsing leaves the check to load


@pytest.mark.parametrize("value", [[], "text", 3, None])
def test_a_manifest_that_is_no_object_is_a_hase_error(value):
    with pytest.raises(HaseError, match="not a predictor manifest \\(an object\\)"):
        Manifest.from_dict(value)


def test_the_old_pickle_format_is_refused_with_the_fix():
    d = {**as_json(sample_manifest(files={"warm.joblib": "ab" * 32})), "format": PICKLE_FORMAT}
    with pytest.raises(HaseError, match=r"old hase-predictor/1 predictor of pickle files.*retrain with `make train`"):
        Manifest.from_dict(d)


@pytest.mark.parametrize(("path", "value", "named"), [
    (("files",), {"warm.npz": 1}, "a dict at 'files', not an object of text"),
    (("library_versions",), {"numpy": 2.0}, "at 'library_versions', not an object of text"),
    (("targets", "warm", "predictor", "family_forests"), [1], r"'targets\.warm\.predictor\.family_forests'"),
    (("targets", "warm", "predictor", "skipped_n"), {"Add": "3"}, r"'targets\.warm\.predictor\.skipped_n'"),
    (("targets", "warm", "predictor", "bases"), {"Conv": [1, 2, "c"]}, r"'targets\.warm\.predictor\.bases'"),
    (("targets", "warm", "calibration", "fitter"), "magic", "calibration scale/magic"),
    (("targets", "warm", "calibration", "fit_data"), [1, 2], "not a list of records"),
])
def test_mistyped_values_inside_tables_are_named(path, value, named):
    d = as_json(sample_manifest())
    inner = d
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    with pytest.raises(HaseError, match=f"{named}.*retrain with `make train`"):
        Manifest.from_dict(d)
