"""hase.tables: the one percentage format every report, command and plot writes a share in."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from hase.errors import HaseError
from hase.tables import percent, require_columns


def test_a_share_is_written_one_way():
    assert (percent(0.6372), percent(0.6372, 1), percent(1.0), percent(0.0)) == ("64%", "63.7%", "100%", "0%")
    assert percent(math.nan) == percent(math.inf) == "—"  # nothing to count: a dash, never "nan%"


def test_missing_columns_are_named():
    with pytest.raises(HaseError, match=r"lacks.*\bb\b"):
        require_columns(pd.DataFrame({"a": [1]}), ["a", "b"], "the frame", "build it right")
