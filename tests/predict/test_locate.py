"""hase.predict.locate and hase.paths: predictors are found in the order --predictors, user directory, shipped
package data; training never writes into the shipped ones."""
from __future__ import annotations

from pathlib import Path

import pytest

from hase import paths
from hase.errors import HaseError
from hase.predict.locate import (
    EXPLICIT,
    SHIPPED,
    USER,
    FoundPredictor,
    check_not_shipped,
    devices_in,
    find_predictor,
    installed_predictors,
    is_shipped,
)
from hase.predict.manifest import MANIFEST

REPO = Path(__file__).resolve().parents[2]


def predictor(root: Path, device: str) -> Path:
    """A folder that looks like a predictor to the locator (a manifest; its content is not read here)."""
    d = root / device
    d.mkdir(parents=True)
    (d / MANIFEST).write_text("{}")
    return d


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A user directory (via $HASE_PREDICTORS_DIR) and a stand-in for the shipped package data."""
    user, shipped = tmp_path / "user", tmp_path / "pkg" / "predictors"
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(user))
    monkeypatch.setattr(paths, "SHIPPED_PREDICTORS", shipped)
    return user, shipped


def test_the_shipped_predictors_are_package_data_beside_the_code():
    import hase

    assert Path(hase.__file__).resolve().parent / "predictors" == paths.SHIPPED_PREDICTORS
    assert paths.SHIPPED_PREDICTORS == REPO / "hase" / "predictors"
    assert paths.DEFAULT_DEVICE in devices_in(paths.SHIPPED_PREDICTORS)
    found = find_predictor(paths.DEFAULT_DEVICE)  # conftest points the user directory at an empty folder
    assert found == FoundPredictor(paths.DEFAULT_DEVICE, paths.SHIPPED_PREDICTORS / paths.DEFAULT_DEVICE, SHIPPED)


def test_user_directory_follows_env_then_platform(monkeypatch, tmp_path):
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(tmp_path / "mine"))
    assert paths.user_predictors_dir() == tmp_path / "mine"
    monkeypatch.setenv(paths.PREDICTORS_ENV, "~/p")
    assert paths.user_predictors_dir() == Path.home() / "p"
    monkeypatch.delenv(paths.PREDICTORS_ENV)
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert paths.user_predictors_dir() == tmp_path / "xdg" / "hase" / "predictors"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG spec: a relative path is invalid
    assert paths.user_predictors_dir() == Path.home() / ".local" / "share" / "hase" / "predictors"
    monkeypatch.setattr("sys.platform", "darwin")
    assert paths.user_data_dir() == Path.home() / "Library" / "Application Support" / "hase"
    monkeypatch.setattr("sys.platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert paths.user_data_dir() == tmp_path / "local" / "hase"


def test_lookup_order_user_before_shipped_and_explicit_without_fallback(roots, tmp_path):
    user, shipped = roots
    ship_cpu = predictor(shipped, "cpu-1t")
    assert find_predictor("cpu-1t") == FoundPredictor("cpu-1t", ship_cpu, SHIPPED)
    user_cpu = predictor(user, "cpu-1t")
    assert find_predictor("cpu-1t") == FoundPredictor("cpu-1t", user_cpu, USER)  # the user's shadows the shipped
    other = tmp_path / "other"
    with pytest.raises(HaseError, match=r"no trained predictor for device 'cpu-1t' \(searched --predictors .*other: "
                                        r"none\)"):
        find_predictor("cpu-1t", other)  # an explicit root is the only one searched
    explicit = predictor(other, "cpu-1t")
    assert find_predictor("cpu-1t", other) == FoundPredictor("cpu-1t", explicit, EXPLICIT)
    assert find_predictor("cpu-1t", str(other)).path == explicit
    with pytest.raises(HaseError, match=r"searched user .*user: \['cpu-1t'\]; shipped .*predictors: \['cpu-1t'\]\)"):
        find_predictor("gpu")


def test_installed_lists_user_then_shipped_and_marks_the_shadowed(roots):
    user, shipped = roots
    assert installed_predictors() == []
    predictor(shipped, "cpu-1t")
    predictor(shipped, "cpu-4t")
    predictor(user, "cpu-1t")
    (user / "half").mkdir()  # no manifest: not a predictor
    (user / ".cpu-1t.tmp").mkdir()  # a save in progress
    assert [(f.device, f.source, f.shadowed) for f in installed_predictors()] == [
        ("cpu-1t", USER, False), ("cpu-1t", SHIPPED, True), ("cpu-4t", SHIPPED, False)]
    assert [(f.device, f.source) for f in installed_predictors(shipped)] == [("cpu-1t", EXPLICIT),
                                                                            ("cpu-4t", EXPLICIT)]
    assert installed_predictors()[1].to_dict() == {"device": "cpu-1t", "path": str(shipped / "cpu-1t"),
                                                   "source": SHIPPED, "shadowed": True}


def test_writing_into_the_shipped_directory_is_refused(roots, tmp_path):
    _, shipped = roots
    shipped.mkdir(parents=True)
    (tmp_path / "link").symlink_to(shipped)
    for inside in (shipped, shipped / "cpu-1t", tmp_path / "link" / "new", shipped / "a" / ".." / "b"):
        assert is_shipped(inside)
        with pytest.raises(HaseError, match=r"--out .* is inside the predictors shipped with Hase .* user directory"):
            check_not_shipped(inside)
    for outside in (tmp_path / "user", shipped.parent, tmp_path / "pkg" / "predictors-2"):
        assert not is_shipped(outside)
        check_not_shipped(outside)
