"""Printing a benchmark's figures, shared by the benchmark scripts: JSON on one line, or one `name value` a line."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_figures(figures: Mapping[str, Any], as_json: bool) -> None:
    """Print `figures` as one JSON object (`--json`) or aligned `name value` lines."""
    if as_json:
        print(json.dumps(figures))
        return
    for k, v in figures.items():
        print(f"{k:28s} {v}")
