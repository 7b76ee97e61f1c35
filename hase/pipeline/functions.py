"""Python stage functions that a pipeline config may name, and nothing else.

A config's ``function = "mypkg.prep:build_graph"`` imports ``mypkg.prep``, and importing a module runs its
top-level code: a config is code, like a Python import, so run only configs you trust. What it may then call
is narrowed to functions their author marked for it::

    from hase.pipeline import stage_function

    @stage_function
    def build_graph(x: np.ndarray) -> np.ndarray: ...

The function must be a plain Python function (``def``), marked with ``@stage_function``, and defined in the
module the config names. Standard-library modules are refused before anything is imported, so
``function = "os:system"`` can neither import nor call anything; builtins, C functions, classes, callable
objects and re-exported functions are refused with one line. The Python API (``single_stage(fn=...)``) takes
any callable: there the caller's own code passes it.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

import numpy as np

from hase.errors import HaseError, first_line

StageFn = Callable[[np.ndarray], np.ndarray]
F = TypeVar("F", bound=Callable[..., Any])

MARK = "__hase_stage_function__"  # attribute `stage_function` sets on the functions it marks
_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def stage_function(fn: F) -> F:
    """Decorator: let pipeline configs name this function (`function = "module:name"`) as a host stage."""
    if not inspect.isfunction(fn):
        raise HaseError(f"@stage_function marks plain Python functions (def), not {_kind(fn)}")
    setattr(fn, MARK, True)
    return fn


def is_stage_function(obj: object) -> bool:
    """Whether `obj` is a plain Python function marked with `@stage_function`."""
    return inspect.isfunction(obj) and getattr(obj, MARK, False) is True


def stage_functions(module: ModuleType) -> list[str]:
    """Names of the marked stage functions defined in `module` (what a config may name there)."""
    return sorted(name for name, obj in vars(module).items()
                  if is_stage_function(obj) and getattr(obj, "__module__", None) == module.__name__)


def import_stage_function(ref: object) -> StageFn:
    """`package.module:function` -> that function, if it is a marked stage function defined in that module.

    Raises HaseError (one line) for a malformed reference, a standard-library or builtin module (never
    imported), a module that fails to import, or an attribute that is not a marked plain Python function
    defined there.
    """
    if not isinstance(ref, str) or not _REF.match(ref):
        raise HaseError(f"function = {ref!r} must look like 'package.module:function' (a Python module path and "
                        f"a function name)")
    module_name, attr = ref.split(":")
    top = module_name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        raise HaseError(f"function = {ref!r} is refused: {top!r} is in Python's standard library; a stage function "
                        f"is a function of your own module marked with @hase.pipeline.stage_function")
    module = _import(module_name, ref)
    fn = getattr(module, attr, None)
    known = stage_functions(module)
    if fn is None:
        raise HaseError(f"cannot import function {ref!r}: module {module_name!r} has no {attr!r} "
                        f"(its stage functions: {known or 'none'})")
    if not inspect.isfunction(fn):
        raise HaseError(f"function = {ref!r} is refused: it is {_kind(fn)}, not a plain Python function (def) "
                        f"marked with @hase.pipeline.stage_function")
    if fn.__module__ != module.__name__:
        raise HaseError(f"function = {ref!r} is refused: it is defined in {fn.__module__!r}, not {module_name!r}; "
                        f"name the module that defines it")
    if not is_stage_function(fn):
        raise HaseError(f"function = {ref!r} is refused: it is not marked with @hase.pipeline.stage_function "
                        f"(stage functions in {module_name!r}: {known or 'none'})")
    return cast(StageFn, fn)


def _import(module_name: str, ref: str) -> ModuleType:
    """Import the module a config names; its own errors become one-line HaseErrors."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise HaseError(f"cannot import function {ref!r}: {first_line(exc)}; check the module is on PYTHONPATH"
                        ) from exc
    except Exception as exc:  # the module's own top-level code failed
        raise HaseError(f"cannot import function {ref!r}: importing {module_name!r} raised "
                        f"{type(exc).__name__}: {first_line(exc)}") from exc


def _kind(obj: object) -> str:
    """What a callable is, for messages: 'a builtin function', 'a class', 'a functools.partial object', ..."""
    if inspect.isbuiltin(obj) or type(obj).__name__ in ("builtin_function_or_method", "method-wrapper"):
        return "a builtin (C) function"
    if inspect.isclass(obj):
        return "a class"
    if inspect.ismethod(obj):
        return "a bound method"
    if isinstance(obj, ModuleType):
        return "a module"
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"
