"""A device's trained predictors on disk, in files that hold data and never code.

Per saved target, `<target>.npz` holds the packed forests' arrays and `<target>.json` everything else a
KernelPredictor holds (`KernelPredictor.to_arrays`); beside them the CSV tables of the evaluation and
`manifest.json` (`hase.predict.manifest`). Arrays load with `np.load(..., allow_pickle=False)` and the
rest is JSON, so loading a predictor runs no code, whoever made it.

`read_manifest` checks, before any array is parsed: the manifest's `digest` over its own content (an
edited α is refused), that it names only files a predictor has (`<target>.npz`, `<target>.json`, the
CSVs: never a path, never a link out of the directory), and the sha256 of every file. A digest kept
beside the data detects damage and edits, not a forger who recomputes it; what it guards is the
prediction, since loading can run nothing either way. Old pickle predictors (hase-predictor/1) are
refused with the fix: retrain.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hase.errors import HaseError, first_line
from hase.files import file_sha256
from hase.predict import features
from hase.predict.calibration import Calibration
from hase.predict.locate import check_not_shipped, find_predictor
from hase.predict.manifest import (
    DIGEST,
    FORMAT,
    MANIFEST,
    RETRAIN,
    Manifest,
    check_format,
    json_default,
    manifest_digest,
)
from hase.predict.predictor import KernelPredictor
from hase.runtime.types import EPConfig
from hase.version import __version__

if TYPE_CHECKING:  # pragma: no cover - pandas loads only to save tables, never to predict
    import pandas as pd

    from hase.predict.threads import ThreadModel

log = logging.getLogger(__name__)

# tables `hase train` stores beside the forests (cross-validation rows, baselines), read by `hase evaluate`
CV_MODELS_CSV, CV_KERNELS_CSV, BASELINES_CSV = "cv_models.csv", "cv_kernels.csv", "baselines.csv"
EXTRA_FILES = (CV_MODELS_CSV, CV_KERNELS_CSV, BASELINES_CSV)
THREADS_FILE = "threads.npz"  # a one-thread predictor's thread model, when its store had a many-thread partner
MOVED_FROM = "moved_from"  # manifest `threads` key of a one-thread predictor moved to threads (hase.predict.threaded)
NPZ, JSON = ".npz", ".json"  # a target's arrays and structure: <target>.npz, <target>.json
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # no separator, not absolute, not hidden
_NPZ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)  # what np.load raises on bad bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed entry times: the same predictor gives the same bytes


def feature_schema() -> dict[str, Any]:
    """Every family's op types and columns: a predictor trained on another schema must be retrained."""
    return {f.name: {"ops": list(f.ops), "columns": list(f.column_names)} for f in features.families()}


def schema_sha(schema: Mapping[str, Any]) -> str:
    """sha256 of a feature schema (stored in the manifest, compared on load)."""
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


def library_versions() -> dict[str, str]:
    """Versions of the libraries a predictor was trained with (from package metadata: importing
    scikit-learn alone costs ~1 s, which `hase predict` does not need)."""

    return {"hase": __version__, "scikit-learn": version("scikit-learn"), "numpy": np.__version__,
            "pandas": version("pandas"), "python": sys.version.split()[0]}




@dataclass(frozen=True)
class PredictorBundle:
    """A device's trained predictors (one per target) with the manifest that describes and verifies them."""

    manifest: Manifest
    predictors: dict[str, KernelPredictor]
    path: Path | None = None

    @property
    def device(self) -> str:
        """The device configuration the predictor was trained on."""
        return self.manifest.device

    @property
    def default_target(self) -> str:
        """The target with the best held-out RMSPE at training time."""
        return self.manifest.default_target

    def target(self, target: str | None) -> str:
        """The target to use: the given one if this bundle has it, else the default."""
        target = target or self.default_target
        if target not in self.predictors:
            raise HaseError(f"predictor for {self.device!r} has no {target!r} target: it has {sorted(self.predictors)}")
        return target

    def calibration(self, target: str) -> Calibration:
        """A target's calibration from kernel sum to model latency."""
        return self.manifest.target(target).calibration.calibration

    def ep_config(self) -> EPConfig:
        """The device configuration the predictor was trained for (ORT's kernel graph is built with it)."""
        return manifest_ep_config(self.manifest)

    def moved_threads(self) -> int | None:
        """The intra-op thread count this predictor moves its one-thread kernels to with its thread model (a device
        of `hase.predict.threaded`: its configured count, or this host's physical cores for ORT's default), or None:
        its forests predict its configuration directly."""
        if MOVED_FROM not in self.manifest.threads:
            return None
        threads = self.manifest.device_meta.intra_op_threads
        if threads > 0:
            return int(threads)
        from hase.runtime.host import host_fingerprint  # noqa: PLC0415 - lscpu and ORT: only a threaded device

        return max(1, host_fingerprint().cores)

    def thread_model(self) -> ThreadModel | None:
        """The thread model trained with this predictor (`hase.predict.store_threads`), or None: it has none."""
        if self.path is None or THREADS_FILE not in self.manifest.files:
            return None
        from hase.predict.threads import load_thread_model  # noqa: PLC0415 - pandas: only `--threads` needs it

        return load_thread_model(self.path / THREADS_FILE)  # its hash was verified with the manifest


def manifest_ep_config(manifest: Manifest) -> EPConfig:
    """The device configuration a predictor's manifest describes (`PredictorBundle.ep_config`, known before its
    arrays are loaded)."""
    meta = manifest.device_meta
    ep = "cuda" if "CUDA" in meta.execution_provider else "cpu"
    # 0 threads is ONNX Runtime's default (one per physical core), a setting of its own, not a missing value
    return EPConfig(name=manifest.device, ep=ep, intra_op_threads=meta.intra_op_threads,
                    inter_op_threads=meta.inter_op_threads, opt_level=meta.opt_level or "extended")


def save_bundle(out_dir: str | Path, manifest: Manifest, predictors: Mapping[str, KernelPredictor],
                extra: Mapping[str, pd.DataFrame] | None = None, thread_model: ThreadModel | None = None) -> Path:
    """Write `<target>.npz` and `<target>.json` per predictor, the extra CSV tables (`EXTRA_FILES`), the thread
    model (THREADS_FILE) when given and manifest.json (every file's sha256 and its digest) to `out_dir`.

    Files are written to a temporary directory next to `out_dir`, which then replaces it whole, so
    a reader never sees a half-written predictor.

    Raises:
        ValueError: a target the manifest lacks (or whose name is no plain file name), or an unknown table.
        HaseError: `out_dir` is inside the predictors shipped with the package (never overwritten).
    """
    _check_save_names(manifest, predictors, extra or {})
    out = Path(out_dir)
    check_not_shipped(out, "predictor directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; a predictor directory is shared data
    try:
        for target, pred in predictors.items():
            meta, arrays = pred.to_arrays()
            _write_npz(tmp / f"{target}{NPZ}", arrays)
            (tmp / f"{target}{JSON}").write_text(json.dumps(meta, indent=1, sort_keys=True, allow_nan=False) + "\n")
        for name, frame in (extra or {}).items():
            frame.to_csv(tmp / name, index=False, float_format="%.6g")  # 6 digits: half the size of 17, ample for ms
        if thread_model is not None:
            from hase.predict.threads import save_thread_model  # noqa: PLC0415 - see thread_model()

            save_thread_model(thread_model, tmp / THREADS_FILE)
        files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir())}
        full = dataclasses.replace(manifest, files=files).to_dict()
        (tmp / MANIFEST).write_text(json.dumps(full, indent=1, sort_keys=True, default=json_default) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _check_save_names(manifest: Manifest, predictors: Mapping[str, KernelPredictor],
                      extra: Mapping[str, pd.DataFrame]) -> None:
    """Refuse to write what `read_manifest` would refuse to read."""
    bad = [t for t in predictors if t not in manifest.targets or not _PLAIN_NAME.fullmatch(t)]
    if bad:
        raise ValueError(f"predictors {bad} are no target of the manifest ({sorted(manifest.targets)})")
    unknown = sorted(set(extra) - set(EXTRA_FILES))
    if unknown:
        raise ValueError(f"tables {unknown}: a predictor directory holds only {list(EXTRA_FILES)}")


def _write_npz(path: Path, arrays: Mapping[str, NDArray[Any]]) -> None:
    """`np.savez`, but byte-for-byte reproducible (fixed entry times, sorted names) and refusing object arrays
    (`allow_pickle=False`), so no file Hase writes needs a pickle to read. Stored, not deflated: inflating a
    predictor's few MB took ~25 ms of every `hase predict` (git and wheels compress the files anyway); deflated
    archives of earlier versions read the same."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_STORED
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(arrays[name]), allow_pickle=False)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of a predictor directory, verified: its digest, its shape, every file name and every
    file's sha256 (see the module docstring). Any failure is a HaseError of one line naming the fix."""
    d = Path(path)
    if not d.is_dir():
        raise HaseError(f"predictor directory not found: {d} (train one with `make train`)")
    mf = d / MANIFEST
    if not mf.is_file():
        raise HaseError(f"{d} has no {MANIFEST}: it is not a complete predictor; {RETRAIN}")
    _check_inside(d, MANIFEST)
    raw = _read_json(mf)
    check_format(raw, str(mf))
    assert isinstance(raw, dict)
    if raw.get(DIGEST) != manifest_digest(raw):
        what = "has no digest" if DIGEST not in raw else "does not match its digest"
        raise HaseError(f"{mf} {what}: it was edited or damaged after training, so its calibration and file "
                        f"hashes cannot be trusted; refusing it: {RETRAIN}")
    try:
        manifest = Manifest.from_dict(raw)
    except HaseError as exc:
        raise HaseError(f"{mf}: {exc}") from None
    if manifest.feature_schema_sha != schema_sha(feature_schema()):
        raise HaseError(f"{d} was trained on another feature schema than this Hase version computes: {RETRAIN}")
    _check_names(mf, manifest)
    _verify_files(d, manifest.files)
    return manifest


def _read_json(path: Path) -> Any:
    """The JSON value of a file; unreadable or invalid is a HaseError (the file was verified or is the manifest)."""
    try:
        return json.loads(path.read_bytes())
    except OSError as exc:
        raise HaseError(f"cannot read {path}: {exc.strerror or first_line(exc)}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, absurd nesting
        raise HaseError(f"{path} is not valid JSON ({first_line(exc)}): {RETRAIN}") from None


def _check_names(mf: Path, manifest: Manifest) -> None:
    """Every file the manifest lists is one a predictor has: `<target>.npz` and `<target>.json` of its own
    targets (both or neither) and the evaluation CSVs; never a path, so nothing outside the directory."""
    allowed = {*EXTRA_FILES, THREADS_FILE, *(f"{t}{ext}" for t in manifest.targets for ext in (NPZ, JSON))}
    for name in manifest.files:
        if not _PLAIN_NAME.fullmatch(name) or ".." in name:
            raise HaseError(f"{mf} names {name!r}, a path rather than a file of the predictor directory; "
                            f"refusing it: {RETRAIN}")
        if name not in allowed:
            raise HaseError(f"{mf} names {name!r}, which is no file of a {FORMAT} predictor (<target>{NPZ}, "
                            f"<target>{JSON}, {', '.join([*EXTRA_FILES, THREADS_FILE])}); refusing it: {RETRAIN}")
    half = [t for t in manifest.targets if (f"{t}{NPZ}" in manifest.files) != (f"{t}{JSON}" in manifest.files)]
    if half:
        raise HaseError(f"{mf} lists only one of {NPZ} and {JSON} for target(s) {half}: {RETRAIN}")


def _check_inside(d: Path, name: str) -> None:
    """A file of the predictor directory that is a link must point to a file directly inside it."""
    f = d / name
    if f.is_symlink() and f.resolve().parent != d.resolve():
        raise HaseError(f"{f} is a link to {f.resolve()}, outside the predictor directory; refusing it: {RETRAIN}")


def _verify_files(d: Path, files: Mapping[str, str]) -> None:
    """Every file the manifest lists is a regular file in `d` with its recorded sha256 (before any is parsed)."""
    for name, digest in files.items():
        _check_inside(d, name)
        f = d / name
        if not f.is_file():
            raise HaseError(f"{d} is incomplete: {name} listed in the manifest is missing; {RETRAIN}")
        if file_sha256(f) != digest:
            raise HaseError(f"sha256 of {f} does not match the manifest: the file was changed or damaged after "
                            f"training; refusing it: {RETRAIN}")


def load_bundle(path: str | Path, targets: Sequence[str] | None = None) -> PredictorBundle:
    """Load a predictor directory after verifying it (see `read_manifest`); only the targets asked for
    (all saved ones when None; "default" names the manifest's default target). Runs no code from the files."""
    d = Path(path)
    manifest = read_manifest(d)
    saved = [t for t in manifest.targets if f"{t}{NPZ}" in manifest.files]
    wanted = [manifest.default_target if t == "default" else t for t in targets] if targets else saved
    missing = [t for t in wanted if t not in saved]
    if missing:
        raise HaseError(f"{d} has no predictor for target(s) {missing}: it has {saved}")
    _warn_versions(manifest.library_versions, d)
    preds = {t: _load_predictor(d, t) for t in wanted}
    return PredictorBundle(manifest, preds, d)


def _load_predictor(d: Path, target: str) -> KernelPredictor:
    """One verified target from its JSON and arrays; a part that does not fit is a HaseError naming it."""
    meta = _read_json(d / f"{target}{JSON}")
    if not isinstance(meta, dict):
        raise HaseError(f"{d / target}{JSON} holds a JSON {type(meta).__name__}, not a predictor: {RETRAIN}")
    try:
        return KernelPredictor.from_arrays(meta, _read_npz(d / f"{target}{NPZ}"))
    except ValueError as exc:
        raise HaseError(f"{d / target}{NPZ}/{JSON} is not a predictor this Hase can read ({exc}): {RETRAIN}") from None


def _read_npz(path: Path) -> dict[str, NDArray[Any]]:
    """Every array of an .npz file, read with allow_pickle=False: a pickle, or an object array inside,
    is refused by numpy before anything of it is unpickled."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except _NPZ_ERRORS as exc:
        raise _unreadable(path, exc) from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise HaseError(f"{path} holds a single {type(loaded).__name__}, not an .npz archive of arrays: {RETRAIN}")
    with loaded:
        try:
            arrays = {name: loaded[name] for name in loaded.files}
        except _NPZ_ERRORS as exc:
            raise _unreadable(path, exc) from None
    odd = sorted(name for name, a in arrays.items() if not isinstance(a, np.ndarray))
    if odd:
        raise HaseError(f"{path} has entries {odd[:5]} that are no arrays: {RETRAIN}")
    return arrays


def _unreadable(path: Path, exc: Exception) -> HaseError:
    """The error for an .npz numpy refused; pickled content is named as such (numpy's own text suggests
    loading it unsafely, which Hase never does)."""
    if "pickle" in str(exc) or "Object arrays" in str(exc):
        return HaseError(f"{path} holds pickled objects, which Hase never loads (a pickle can run code): {RETRAIN}")
    return HaseError(f"{path} is not an array archive Hase can read ({first_line(exc)}): {RETRAIN}")


def _warn_versions(trained: Mapping[str, str], d: Path) -> None:
    now = library_versions()
    for lib in ("scikit-learn", "numpy"):
        if trained.get(lib) and trained[lib] != now[lib]:
            log.warning("%s was trained with %s %s, this is %s: retrain with `make train` if predictions look off",
                        d, lib, trained[lib], now[lib])


def predictor_dir(device: str, predictors_dir: str | Path | None = None) -> Path:
    """The directory of `device`'s predictor: under `predictors_dir` when given, else the user directory,
    else the shipped package data (`hase.predict.locate.find_predictor`, which says where it was found); a
    device without one is a HaseError naming the devices each searched root has."""
    return find_predictor(device, predictors_dir).path
