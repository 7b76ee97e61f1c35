"""Hase: predict ONNX model latency from kernel measurements, and explain measured runs.

The public Python API (`hase.api`), re-exported here:

    >>> import hase
    >>> predictor = hase.load_predictor("cpu-1t")
    >>> pred = predictor.predict("model.onnx", free_dims={"batch": 1})  # doctest: +SKIP
    >>> pred.latency_ms, pred.low_ms, pred.high_ms                       # doctest: +SKIP

`import hase` loads none of it: the API (and ONNX, pandas, ONNX Runtime under it) loads on the first use of one of
its names, so the CLI and every module of the package, which import `hase.<module>`, stay fast to start.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hase.version import __version__

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs; at run time `__getattr__` loads them
    from hase.api import (
        PipelineResult,
        Prediction,
        Predictor,
        Profile,
        load_predictor,
        predictors,
        profile,
        run_pipeline,
    )

__all__ = [
    "PipelineResult",
    "Prediction",
    "Predictor",
    "Profile",
    "__version__",
    "load_predictor",
    "predictors",
    "profile",
    "run_pipeline",
]


def __getattr__(name: str) -> Any:
    """The API's names, loaded from `hase.api` on first use (PEP 562), so `import hase` stays cheap."""
    if name in __all__:
        from hase import api  # noqa: PLC0415 - the API pulls ONNX and pandas: loaded on first use, not on `import hase`

        value = getattr(api, name)
        globals()[name] = value  # later look-ups are plain attribute reads
        return value
    raise AttributeError(f"module 'hase' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API, loaded or not (for `dir(hase)` and completion): not the helpers this module imports
    (`Any`, `TYPE_CHECKING`, `annotations`) nor the submodules loaded so far."""
    return sorted(__all__)
