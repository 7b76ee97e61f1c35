"""The predictor manifest (`manifest.json`) as typed records, parsed once and checked key by key.

`hase train` builds a `Manifest` and writes `Manifest.to_dict()` as JSON; every reader gets the
`Manifest` that `Manifest.from_dict` parses from that JSON. A key missing from the file, or of the
wrong type, is a HaseError naming the key (e.g. ``targets.span.held_out``) and the fix, never a KeyError
deep inside a report. Tables kept in the manifest for people to read (fit data, per-family scores)
stay lists of records.

The JSON carries a `digest`: the sha256 of its own canonical form without that key (`manifest_digest`).
With `files` (the sha256 of every file) it covers the whole predictor, so an edited α or file is noticed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from hase.errors import HaseError
from hase.predict.calibration import FITTERS, FORMS, Calibration
from hase.predict.metrics import Scores
from hase.runtime.host import HostFingerprint
from hase.runtime.types import DeviceMeta

MANIFEST = "manifest.json"
FORMAT = "hase-predictor/2"
PICKLE_FORMAT = "hase-predictor/1"  # <target>.joblib pickles: refused, never loaded
DIGEST = "digest"
SECURITY_NOTE = ("no file here is a pickle: arrays load with allow_pickle=False, so loading runs no code; the digest "
                 "and sha256 values detect damaged or edited files, not a forger who recomputes them")
RETRAIN = "retrain with `make train`"


def check_format(raw: object, where: str) -> None:
    """Refuse anything but a JSON object in today's format; an old pickle bundle is named as such (never loaded)."""
    if not isinstance(raw, Mapping):
        raise HaseError(f"{where} holds a JSON {type(raw).__name__}, not a predictor manifest (an object): {RETRAIN}")
    if raw.get("format") == PICKLE_FORMAT:
        raise HaseError(f"{where} is an old {PICKLE_FORMAT} predictor of pickle files, which can run code when "
                        f"loaded; Hase no longer loads them: {RETRAIN}")
    if raw.get("format") != FORMAT:
        raise HaseError(f"{where} is not a {FORMAT} manifest: {RETRAIN}")
Records = tuple[Mapping[str, Any], ...]


def _value(d: Mapping[str, Any], key: str, where: str) -> Any:
    """d[key]; a missing key is a HaseError naming `where.key`."""
    if key not in d:
        raise HaseError(f"predictor manifest lacks {_name(where, key)!r}: {RETRAIN}")
    return d[key]


def _name(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _mistyped(where: str, key: str, value: Any, expected: str) -> HaseError:
    return HaseError(f"predictor manifest has a {type(value).__name__} at {_name(where, key)!r}, "
                     f"not {expected}: {RETRAIN}")


def _str(d: Mapping[str, Any], key: str, where: str) -> str:
    value = _value(d, key, where)
    if not isinstance(value, str):
        raise _mistyped(where, key, value, "text")
    return value


def _int(d: Mapping[str, Any], key: str, where: str) -> int:
    value = _value(d, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _mistyped(where, key, value, "an integer")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(d: Mapping[str, Any], key: str, where: str) -> float:
    value = _value(d, key, where)
    if not _is_number(value):
        raise _mistyped(where, key, value, "a number")
    return float(value)


def _table(d: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = _value(d, key, where)
    if not isinstance(value, dict):
        raise _mistyped(where, key, value, "an object")
    return value


def _list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = _value(d, key, where)
    if not isinstance(value, list):
        raise _mistyped(where, key, value, "a list")
    return value


def _records(d: Mapping[str, Any], key: str, where: str) -> Records:
    rows = _list(d, key, where)
    if not all(isinstance(r, dict) for r in rows):
        raise _mistyped(where, key, rows, "a list of records")
    return tuple(rows)


def _str_map(d: Mapping[str, Any], key: str, where: str, kind: type, expected: str) -> dict[str, Any]:
    """d[key] as an object whose every value is a `kind` (never a bool for numbers)."""
    table = _table(d, key, where)
    if not all(isinstance(v, kind) and not isinstance(v, bool) for v in table.values()):
        raise _mistyped(where, key, table, f"an object of {expected}")
    return table


def _texts(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = _list(d, key, where)
    if not all(isinstance(v, str) for v in values):
        raise _mistyped(where, key, values, "a list of text")
    return tuple(values)


def _scores(d: Mapping[str, Any], key: str, where: str) -> Scores:
    return Scores.from_dict(_table(d, key, where), f"predictor manifest {where}.{key}")


@dataclass(frozen=True)
class CalibrationEntry:
    """A target's calibration: its coefficients, and the models it was fitted on (one record per model)."""

    calibration: Calibration
    fit_data: Records = ()

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry: form, fitter, coefficients, name and fit data side by side."""
        return {**self.calibration.to_dict(), "name": self.calibration.name, "fit_data": list(self.fit_data)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> CalibrationEntry:
        """The entry parsed from the manifest."""
        cal = Calibration.from_dict(d, f"predictor manifest {where}")
        if cal.form not in FORMS or cal.fitter not in FITTERS:
            raise HaseError(f"predictor manifest has calibration {cal.form}/{cal.fitter} at {where!r}, "
                            f"not a form of {FORMS} and a fitter of {FITTERS}: {RETRAIN}")
        return cls(cal, _records(d, "fit_data", where))


@dataclass(frozen=True)
class PredictorSummary:
    """What a fitted KernelPredictor holds: forests per key (with training sizes), family forests, skipped keys."""

    forests: Mapping[str, int]
    family_forests: tuple[str, ...]
    skipped: Mapping[str, str]
    skipped_n: Mapping[str, int]
    n_kernels: int
    bases: Mapping[str, tuple[float, float, float]]
    #: per feature family, the band [low, high] x roofline its predictions are clamped to (`hase.predict.roofline`);
    #: empty without the host's peaks (and then left out of the JSON, so older digests still match)
    bands: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry (`bands` only when there are some)."""
        out = {"forests": dict(self.forests), "family_forests": list(self.family_forests),
               "skipped": dict(self.skipped), "skipped_n": dict(self.skipped_n), "n_kernels": self.n_kernels,
               "bases": {k: list(v) for k, v in self.bases.items()}}
        return {**out, "bands": {k: list(v) for k, v in self.bands.items()}} if self.bands else out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> PredictorSummary:
        """The summary parsed from the manifest."""
        bases = _table(d, "bases", where)
        if not all(isinstance(v, list) and len(v) == 3 and all(_is_number(x) for x in v) for v in bases.values()):
            raise _mistyped(where, "bases", bases, "(a, b, c) per key")
        return cls(_str_map(d, "forests", where, int, "integers"), _texts(d, "family_forests", where),
                   _str_map(d, "skipped", where, str, "text"), _str_map(d, "skipped_n", where, int, "integers"),
                   _int(d, "n_kernels", where), {k: (float(v[0]), float(v[1]), float(v[2])) for k, v in bases.items()},
                   _bands(d, where))


def _bands(d: Mapping[str, Any], where: str) -> dict[str, tuple[float, float]]:
    """The summary's bands: [low, high] per family, none where the key is absent."""
    bands = _table(d, "bands", where) if "bands" in d else {}
    if not all(isinstance(v, list) and len(v) == 2 and all(_is_number(x) for x in v) for v in bands.values()):
        raise _mistyped(where, "bands", bands, "[low, high] per family")
    return {k: (float(v[0]), float(v[1])) for k, v in bands.items()}


@dataclass(frozen=True)
class TargetEntry:
    """One target's predictor: its calibration, held-out and in-sample scores, and the forests it holds."""

    doc: str
    calibration: CalibrationEntry
    calibration_candidates: Records
    held_out: Scores
    held_out_by_family: Records
    held_out_raw_sum: Scores
    train: Scores
    kernels_held_out: Scores | None  # None when no held-out kernel was unseen in training
    kernels_held_out_by_key: Records
    predictor: PredictorSummary

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry."""
        return {"doc": self.doc, "calibration": self.calibration.to_dict(),
                "calibration_candidates": list(self.calibration_candidates), "held_out": self.held_out.to_dict(),
                "held_out_by_family": list(self.held_out_by_family),
                "held_out_raw_sum": self.held_out_raw_sum.to_dict(), "train": self.train.to_dict(),
                "kernels_held_out": self.kernels_held_out.to_dict() if self.kernels_held_out else {},
                "kernels_held_out_by_key": list(self.kernels_held_out_by_key), "predictor": self.predictor.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> TargetEntry:
        """The entry parsed from the manifest."""
        kernels = _table(d, "kernels_held_out", where)
        return cls(_str(d, "doc", where), CalibrationEntry.from_dict(_table(d, "calibration", where),
                                                                          f"{where}.calibration"),
                   _records(d, "calibration_candidates", where), _scores(d, "held_out", where),
                   _records(d, "held_out_by_family", where), _scores(d, "held_out_raw_sum", where),
                   _scores(d, "train", where), _scores(d, "kernels_held_out", where) if kernels else None,
                   _records(d, "kernels_held_out_by_key", where),
                   PredictorSummary.from_dict(_table(d, "predictor", where), f"{where}.predictor"))


@dataclass(frozen=True)
class TrainingData:
    """Where a predictor's training data came from and how much of it there was.

    `busy` (`hase.predict.trust.summary`): the policy for rows measured on a busy host or noisy, and how many
    models and kernels (per target) were suspect, dropped and down-weighted; empty in manifests written before
    it existed (and then left out of the JSON, so their digests still match).
    """

    store: str
    n_models: int
    families: tuple[str, ...]
    n_kernels: int
    n_nodes: int
    busy: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry (`busy` only when there is one)."""
        out = {"store": self.store, "n_models": self.n_models, "families": list(self.families),
               "n_kernels": self.n_kernels, "n_nodes": self.n_nodes}
        return {**out, "busy": dict(self.busy)} if self.busy else out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> TrainingData:
        """The entry parsed from the manifest."""
        busy = _table(d, "busy", where) if "busy" in d else {}
        return cls(_str(d, "store", where), _int(d, "n_models", where), _texts(d, "families", where),
                   _int(d, "n_kernels", where), _int(d, "n_nodes", where), busy)


def device_meta_from_dict(d: Mapping[str, Any], where: str = "device_meta") -> DeviceMeta:
    """The device metadata of the measurements a predictor was trained on, checked key by key."""
    return DeviceMeta(device=_str(d, "device", where), cpu_model=_str(d, "cpu_model", where),
                      gpu_name=_str(d, "gpu_name", where), gpu_driver=_str(d, "gpu_driver", where),
                      ort_version=_str(d, "ort_version", where),
                      execution_provider=_str(d, "execution_provider", where),
                      intra_op_threads=_int(d, "intra_op_threads", where),
                      inter_op_threads=_int(d, "inter_op_threads", where),
                      opt_level=_str(d, "opt_level", where), hase_version=_str(d, "hase_version", where))


@dataclass(frozen=True)
class Manifest:
    """Everything `manifest.json` says about a device's predictors; `files` is filled when they are saved."""

    device: str
    device_meta: DeviceMeta
    fixed_cost_ms: float | None
    created_at: str
    library_versions: Mapping[str, str]
    feature_schema: Mapping[str, Any]
    feature_schema_sha: str
    default_target: str
    training_data: TrainingData
    config: Mapping[str, Any]
    evaluation: str
    targets: Mapping[str, TargetEntry]
    baselines_held_out: Records
    files: Mapping[str, str] = field(default_factory=dict)  # file name -> sha256, filled by `save_bundle`
    #: the host's peaks the kernels' rooflines come from (`hase.measure.types.HostPeaks.to_dict`); None in
    #: predictors trained on a store without them (then left out of the JSON, so their digests still match)
    peaks: Mapping[str, Any] | None = None
    #: the measuring machine's fingerprint (`hase.runtime.host`), its speed signature (`hase.measure.signature`),
    #: the store's noise (`hase.predict.noise`) and, for an adapted predictor, what it was adapted from and how
    #: (`hase.predict.adapt`): None or empty in older predictors, and then left out of the JSON
    host: HostFingerprint | None = None
    signature: Mapping[str, Any] | None = None
    noise: Mapping[str, Any] = field(default_factory=dict)
    adaptation: Mapping[str, Any] = field(default_factory=dict)
    #: the thread model trained with a one-thread predictor (`hase.predict.store_threads.StoreThreads.describe`,
    #: its file THREADS_FILE): empty when the store had no many-thread partner, and then left out of the JSON
    threads: Mapping[str, Any] = field(default_factory=dict)

    def target(self, name: str) -> TargetEntry:
        """A target's entry; an unknown target is a HaseError listing those the manifest has."""
        if name not in self.targets:
            raise HaseError(f"the predictor of {self.device!r} has no target {name!r}: it has {sorted(self.targets)}")
        return self.targets[name]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `manifest.json` holds: format, files, security note and `digest` included."""
        body = {
            "device": self.device, "device_meta": dataclasses.asdict(self.device_meta),
            "fixed_cost_ms": self.fixed_cost_ms, "created_at": self.created_at,
            "library_versions": dict(self.library_versions), "feature_schema": dict(self.feature_schema),
            "feature_schema_sha": self.feature_schema_sha, "default_target": self.default_target,
            "training_data": self.training_data.to_dict(),
            "config": dict(self.config), "evaluation": self.evaluation,
            "targets": {name: entry.to_dict() for name, entry in self.targets.items()},
            "baselines_held_out": list(self.baselines_held_out),
            "format": FORMAT, "files": dict(self.files), "security": SECURITY_NOTE,
        }
        if self.peaks is not None:
            body["peaks"] = dict(self.peaks)
        optional = {"host": self.host.to_dict() if self.host is not None else None,
                    "signature": dict(self.signature) if self.signature is not None else None,
                    "noise": dict(self.noise) or None, "adaptation": dict(self.adaptation) or None,
                    "threads": dict(self.threads) or None}
        body.update({k: v for k, v in optional.items() if v is not None})
        return {**body, DIGEST: manifest_digest(body)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Manifest:
        """The manifest parsed from its JSON object; a missing or mistyped key is a HaseError naming it.

        The digest is not checked here (`hase.predict.bundle.read_manifest` checks it before parsing)."""
        check_format(d, "this predictor")
        fixed = None if _value(d, "fixed_cost_ms", "") is None else _number(d, "fixed_cost_ms", "")
        targets = _table(d, "targets", "")
        return cls(
            _str(d, "device", ""), device_meta_from_dict(_table(d, "device_meta", "")), fixed,
            _str(d, "created_at", ""), _str_map(d, "library_versions", "", str, "text"),
            _table(d, "feature_schema", ""),
            _str(d, "feature_schema_sha", ""), _str(d, "default_target", ""),
            TrainingData.from_dict(_table(d, "training_data", ""), "training_data"), _table(d, "config", ""),
            _str(d, "evaluation", ""),
            {name: TargetEntry.from_dict(_table(targets, name, "targets"), f"targets.{name}") for name in targets},
            _records(d, "baselines_held_out", ""), _str_map(d, "files", "", str, "text"),
            _table(d, "peaks", "") if "peaks" in d else None,
            HostFingerprint.from_dict(_table(d, "host", ""), "predictor manifest 'host'") if "host" in d else None,
            _table(d, "signature", "") if "signature" in d else None,
            _table(d, "noise", "") if "noise" in d else {}, _table(d, "adaptation", "") if "adaptation" in d else {},
            _table(d, "threads", "") if "threads" in d else {})


def manifest_digest(raw: Mapping[str, Any]) -> str:
    """sha256 of a manifest's canonical JSON (sorted keys, compact, ASCII) without its `digest` key."""
    body = {k: v for k, v in raw.items() if k != DIGEST}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=json_default)
    return hashlib.sha256(text.encode()).hexdigest()


def json_default(v: Any) -> Any:
    """JSON for the values numpy and pathlib put into a manifest (numpy scalars, paths)."""
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, PurePath):
        return str(v)
    raise TypeError(f"not JSON serializable: {type(v).__name__}")
