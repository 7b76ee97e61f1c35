"""CPU-side partition and merge of a data-parallel stage: split a batch by ratios, concatenate the results."""
from __future__ import annotations

import numpy as np

from hase.errors import HaseError


def split_sizes(n: int, ratios: tuple[float, ...], *, stage: str = "", axis: int = 0) -> tuple[int, ...]:
    """Rows per executor for `n` rows split by `ratios`; each share must be a whole, non-zero number of rows.

    Example: `split_sizes(8, (0.5, 0.5)) == (4, 4)`; `split_sizes(6, (0.25, 0.75))` raises (1.5 rows).
    """
    sizes = []
    for r in ratios:
        rows = n * r
        if abs(rows - round(rows)) > 1e-6 or round(rows) == 0:
            where = f"stage {stage!r}: " if stage else ""
            raise HaseError(f"{where}partition ratios {list(ratios)} do not divide {n} rows on axis {axis} "
                            f"({rows:g} rows for ratio {r:g}); pick ratios that give whole rows or change the batch")
        sizes.append(round(rows))
    if sum(sizes) != n:
        raise HaseError(f"partition ratios {list(ratios)} give {sum(sizes)} rows, not {n}")
    return tuple(sizes)


def partition(x: np.ndarray, sizes: tuple[int, ...], axis: int) -> list[np.ndarray]:
    """Split `x` along `axis` into contiguous copies of the given sizes (what each executor is fed)."""
    bounds = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(x, bounds, axis=axis)]


def merge(parts: list[np.ndarray], axis: int, *, stage: str = "") -> np.ndarray:
    """Concatenate executor outputs along `axis`; incompatible shapes are a HaseError naming them."""
    try:
        return np.concatenate(parts, axis=axis)
    except ValueError as exc:
        shapes = [list(p.shape) for p in parts]
        raise HaseError(f"stage {stage!r}: executor outputs {shapes} cannot be concatenated on axis {axis}; "
                        f"make the executors' models agree on every other axis") from exc


def normalize_axis(axis: int, ndim: int, stage: str) -> int:
    """A non-negative axis index, checked against the input's rank."""
    if not -ndim <= axis < ndim:
        raise HaseError(f"stage {stage!r}: partition axis {axis} is out of range for a rank-{ndim} input")
    return axis % ndim
