"""Where a device's predictor is found, and where a trained one may be written.

Lookup order of `find_predictor(device, predictors_dir)`:
1. `predictors_dir` (the `--predictors DIR` option) when given: `DIR/<device>` or an error, never a fallback;
2. the user directory (`hase.paths.user_predictors_dir()`: `$HASE_PREDICTORS_DIR`, else e.g.
   `~/.local/share/hase/predictors`), where `hase train` writes by default;
3. the predictors shipped as package data (`hase.paths.SHIPPED_PREDICTORS`, inside the installed package).

In each root, a predictor adapted to this very host (`hase adapt`: a folder `<device>@<fingerprint digest>`, the
digest of `hase.runtime.host`) comes before the device's own folder, so `--device cpu-1t` picks the adaptation made
here and never one made on another machine.

A user-trained predictor of a device therefore shadows the shipped one of the same name, and says so:
`installed_predictors` lists both, and every prediction names the directory it used. Training never
writes into the shipped directory (`check_not_shipped`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hase import paths
from hase.errors import HaseError
from hase.predict.manifest import MANIFEST
from hase.runtime.host import host_fingerprint

EXPLICIT, USER, SHIPPED = "--predictors", "user", "shipped"  # where a predictor was found
ADAPTED_SEP = "@"  # <device>@<fingerprint digest>: a predictor adapted to one host


@dataclass(frozen=True)
class FoundPredictor:
    """A device's predictor directory and where it was found (`EXPLICIT`, `USER` or `SHIPPED`)."""

    device: str
    path: Path
    source: str
    shadowed: bool = False  # a shipped predictor hidden by a user-trained one of the same device

    def to_dict(self) -> dict[str, str | bool]:
        """The record as JSON-ready values."""
        return {"device": self.device, "path": str(self.path), "source": self.source, "shadowed": self.shadowed}


def search_roots(predictors_dir: str | Path | None = None) -> list[tuple[str, Path]]:
    """The directories searched for predictors, in order, with their source name."""
    if predictors_dir:
        return [(EXPLICIT, Path(predictors_dir))]
    return [(USER, paths.user_predictors_dir()), (SHIPPED, paths.SHIPPED_PREDICTORS)]


def devices_in(root: Path) -> list[str]:
    """The device folders of a predictors root that hold a manifest (sorted); none when it does not exist."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())


def adapted_name(device: str, digest: str) -> str:
    """The folder name of `device`'s predictor adapted to the host whose fingerprint digest is `digest`."""
    return f"{device}{ADAPTED_SEP}{digest}"


def adapted_here(root: Path, device: str) -> Path | None:
    """`root`'s predictor of `device` adapted to this host (its fingerprint's digest), or None; the fingerprint is
    read only when the root holds an adapted predictor of the device at all."""
    if ADAPTED_SEP in device or not root.is_dir() or not any(root.glob(f"{device}{ADAPTED_SEP}*/{MANIFEST}")):
        return None
    d = root / adapted_name(device, host_fingerprint().digest)
    return d if (d / MANIFEST).is_file() else None


def find_predictor(device: str, predictors_dir: str | Path | None = None, adapted: bool = True) -> FoundPredictor:
    """`device`'s predictor directory, in the lookup order of the module docstring (`adapted=False`: the device's
    own folder, never an adaptation).

    Raises:
        HaseError: no root holds a folder of that device; the message lists every root searched and the
            devices each one has.
    """
    roots = search_roots(predictors_dir)
    for source, root in roots:
        here = adapted_here(root, device) if adapted else None
        if here is not None:
            return FoundPredictor(device, here, source)
        d = root / device
        if d.is_dir():
            return FoundPredictor(device, d, source)
    have = "; ".join(f"{source} {root}: {devices_in(root) or 'none'}" for source, root in roots)
    raise HaseError(f"no trained predictor for device {device!r} (searched {have}): pick one with --device, "
                    f"see `hase predictors`, or train it with `make collect train`")


def installed_predictors(predictors_dir: str | Path | None = None) -> list[FoundPredictor]:
    """Every predictor of the search roots, in lookup order; a shipped one that a user-trained predictor of the
    same device hides is listed with `shadowed=True`."""
    found: list[FoundPredictor] = []
    seen: set[str] = set()
    for source, root in search_roots(predictors_dir):
        for device in devices_in(root):
            found.append(FoundPredictor(device, root / device, source, shadowed=device in seen))
            seen.add(device)
    return found


def is_shipped(path: str | Path) -> bool:
    """Whether `path` is the shipped predictors directory or inside it (links resolved)."""
    shipped = paths.SHIPPED_PREDICTORS.resolve()
    target = Path(path).resolve()
    return target == shipped or shipped in target.parents


def check_not_shipped(path: str | Path, what: str = "--out") -> None:
    """Refuse to write a predictor over the ones shipped inside the package: they are the reference, and
    a reinstall or `git status` would silently disagree with what predicts.

    Raises:
        HaseError: `path` is the shipped predictors directory or inside it.
    """
    if is_shipped(path):
        raise HaseError(f"{what} {str(path)!r} is inside the predictors shipped with Hase "
                        f"({paths.SHIPPED_PREDICTORS}), which training never overwrites: write to the user directory "
                        f"(the default: "
                        f"{paths.user_predictors_dir()}) or another --out")
