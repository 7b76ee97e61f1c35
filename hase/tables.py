"""Checks shared by every stage that takes a documented DataFrame at its public entry point."""

from __future__ import annotations

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
