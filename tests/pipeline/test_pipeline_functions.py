"""Python stage functions from configs: only plain functions marked @stage_function in the module named.

`os:system` is the canary: replaced by a recorder, it must never be called, and standard-library modules are
never even imported (`this` prints the Zen of Python on import: it must stay out of sys.modules).
"""
from __future__ import annotations

import functools
import itertools
import os
import sys

import numpy as np
import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import pipeline_from_dict, run_pipeline, stage_function
from hase.pipeline.functions import import_stage_function, stage_functions

_names = itertools.count()

USER_MODULE = """
import functools
from os import system
from shutil import rmtree as reexported
from hase.pipeline import stage_function

@stage_function
def double(x):
    return x * 2

def unmarked(x):
    return x

class Klass:
    def __call__(self, x):
        return x

instance = Klass()
partial = functools.partial(double)
builtin = len
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write a module (source text) under a fresh name on sys.path; returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str = USER_MODULE) -> str:
        name = f"hase_test_stages_{next(_names)}_{os.getpid()}"
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    return write


def _config(ref: object) -> dict:
    return {"pipeline": {"batch": 4, "features": 8},
            "stages": [{"name": "a", "dummy": {"width": 8, "layers": 1}}, {"name": "post", "function": ref}]}


def test_os_system_is_never_imported_nor_called(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr(os, "system", lambda *a, **k: calls.append(a) or 0)  # the canary
    with pytest.raises(HaseError, match=r"function = 'os:system' is refused: 'os' is in Python's standard library"):
        pipeline_from_dict(_config("os:system"))
    cfg = tmp_path / "evil.toml"
    cfg.write_text('[[stages]]\nname = "a"\ndummy = { width = 8, layers = 1 }\n'
                   '[[stages]]\nname = "post"\nfunction = "os:system"\n')
    assert main(["pipeline", "run", str(cfg), "--batches", "2"]) == 2
    err = capsys.readouterr().err
    assert "'os' is in Python's standard library" in err and len(err.strip().splitlines()) == 1
    assert calls == []


@pytest.mark.parametrize("ref", ["this:s", "subprocess:run", "builtins:exec", "shutil:rmtree", "math:sqrt",
                                 "os.path:join", "_posixsubprocess:fork_exec", "sys:exit"])
def test_standard_library_is_refused_before_import(ref):
    module = ref.split(":")[0]
    was_loaded = module in sys.modules
    with pytest.raises(HaseError, match=rf"is refused: '{module.split('.')[0]}' is in Python's standard library"):
        import_stage_function(ref)
    assert (module in sys.modules) == was_loaded  # `this` would print the Zen of Python: never imported


@pytest.mark.parametrize("attr, match", [
    ("system", r"it is a builtin \(C\) function, not a plain Python function"),
    ("builtin", r"it is a builtin \(C\) function"),
    ("Klass", r"it is a class"),
    ("instance", r"it is a hase_test_stages_\w+\.Klass object"),
    ("partial", r"it is a functools\.partial object"),
    ("reexported", r"it is defined in 'shutil', not 'hase_test_stages_\w+'"),
    ("unmarked", r"it is not marked with @hase.pipeline.stage_function \(stage functions in .*: \['double'\]\)"),
    ("missing", r"cannot import function .* has no 'missing' \(its stage functions: \['double'\]\)"),
])
def test_only_marked_plain_functions_of_the_module_are_accepted(user_module, attr, match):
    name = user_module()
    with pytest.raises(HaseError, match=match):
        pipeline_from_dict(_config(f"{name}:{attr}"))


@pytest.mark.parametrize("ref, match", [
    ("onnx.helper:make_node", "it is not marked"),  # a plain Python function of an installed package
    ("numpy:sum", r"it is a numpy\._ArrayFunctionDispatcher object"),
])
def test_third_party_functions_are_not_stage_functions(ref, match):
    with pytest.raises(HaseError, match=rf"'{ref}' is refused: {match}"):
        import_stage_function(ref)


def test_a_marked_function_re_exported_elsewhere_is_refused(user_module):
    origin = user_module()
    other = user_module(f"from {origin} import double\n")
    with pytest.raises(HaseError, match=rf"it is defined in '{origin}', not '{other}'"):
        import_stage_function(f"{other}:double")


def test_a_marked_function_runs_as_a_stage(user_module):
    name = user_module()
    cfg = pipeline_from_dict(_config(f"{name}:double"))
    fn = cfg.spec.stage("post").executors[0].fn
    assert fn is sys.modules[name].double and cfg.spec.stage("post").executors[0].device == "host"
    assert stage_functions(sys.modules[name]) == ["double"]
    run = run_pipeline(cfg.spec, 3, warmup=1)
    assert run.completed == 3


@pytest.mark.parametrize("ref", ["os.system", "a:b:c", "../evil:f", "mod:", ":f", "mod:f()", 42, ["os", "system"]])
def test_malformed_references(ref):
    with pytest.raises(HaseError, match=r"must look like 'package.module:function'"):
        pipeline_from_dict(_config(ref))


def test_a_module_that_fails_to_import_is_one_line(user_module):
    name = user_module("raise RuntimeError('half-written module\\nsecond line')\n")
    with pytest.raises(HaseError, match=rf"importing '{name}' raised RuntimeError: half-written module$"):
        import_stage_function(f"{name}:f")


def test_the_decorator_takes_plain_functions_only():
    with pytest.raises(HaseError, match=r"marks plain Python functions \(def\), not a builtin"):
        stage_function(len)
    with pytest.raises(HaseError, match=r"not a functools.partial object"):
        stage_function(functools.partial(np.negative))

    @stage_function
    def f(x):
        return x

    assert f(np.ones(2)).sum() == 2  # returned unchanged
