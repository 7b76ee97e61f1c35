"""Checks shared by every stage that takes a documented DataFrame at its public entry point, and the one way a share
is written as a percentage in a table or a line."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from hase.errors import HaseError


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str, how: str) -> None:
    """Raise HaseError naming the columns `df` lacks, so a wrong frame fails at the entry point.

    `how` says where a correct frame comes from, e.g. "build it with hase.runtime.profile.load_profile".
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise HaseError(f"{what} lacks columns {missing}: {how}")


def percent(share: float, digits: int = 0) -> str:
    """A share as a percentage for people, "—" where there is none (NaN: nothing to count).

        >>> percent(0.6372), percent(0.6372, 1), percent(float("nan"))
        ('64%', '63.7%', '—')
    """
    return f"{share:.{digits}%}" if math.isfinite(share) else "—"
