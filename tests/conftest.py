"""Shared fixtures: tiny real ONNX models, each built for the property a test checks.

Real exported models (torch.onnx.export of timm / transformers architectures) are vendored in
tests/data/models, so a clean clone runs every test; a missing or altered one fails its tests, never skips
them. Where ../shared/models/exported (or $HASE_SHARED_DIR/models/exported) exists, its other exported models
are extra cases of the tests that take any exported model; the pytest header says which were used.
"""
from __future__ import annotations

import hashlib
import os
import platform
from functools import cache
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
VENDORED_DIR = REPO / "tests" / "data" / "models"
# name -> sha256 of the vendored file (provenance and licence: tests/data/models/README.md)
VENDORED = {
    "hf_bert_tiny_s64_b2": "435b90a7ce730ef3aeb159b917c9a490d19e9fa6dc611af426c873665866dd50",
    "hf_gpt2_tiny_s64_b1": "0d3971bd42d41423621533e61245e0bfe44414235203031475ea5838dfb1b362",
    "timm_semnasnet_050_cls10_b1": "732a364cea0551d0a0a1615a689801d4ffe411b2ff6e468d7bdfd90eeb3ddd1f",
}
SHARED_EXPORTED = Path(os.environ.get("HASE_SHARED_DIR") or REPO.parent / "shared") / "models" / "exported"
# Optional extras: every other exported model in SHARED_EXPORTED, when that folder exists.
EXTRA_EXPORTED = {p.stem: p for p in sorted(SHARED_EXPORTED.glob("*.onnx")) if p.stem not in VENDORED}
EXPORTED_MODELS = [*VENDORED, *EXTRA_EXPORTED]
# The predictors the checkout ships (hase/predictors/<device>/manifest.json), read from disk, not from Hase:
# tests that list or compare installed predictors hold for any set of them.
SHIPPED_DEVICES = sorted(p.parent.name for p in (REPO / "hase" / "predictors").glob("*/manifest.json"))
# ONNX Runtime's `all` level adds the NCHWc layout transformer on x86 only (blocked convolutions in domain
# com.microsoft.nchwc, with ReorderInput/ReorderOutput kernels); elsewhere `all` keeps `extended`'s FusedConv.
NCHWC_HOST = platform.machine().lower() in ("x86_64", "amd64")
NCHWC = "com.microsoft.nchwc"


@cache
def _vendored_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def exported_model(name: str) -> Path:
    """Path of a real exported model: a vendored one, checked byte for byte, or an extra from shared/."""
    if name in EXTRA_EXPORTED:
        return EXTRA_EXPORTED[name]
    if name not in VENDORED:
        pytest.fail(f"exported model {name!r} is not vendored in {VENDORED_DIR} (known: {sorted(VENDORED)}) "
                    f"and not in {SHARED_EXPORTED}")
    path = VENDORED_DIR / f"{name}.onnx"
    fix = ("restore it with `git checkout -- tests/data/models`, or re-create it from the exported originals "
           "with `python tests/data/models/vendor.py SRC_DIR`")
    if not path.is_file():
        pytest.fail(f"vendored test model {path} is missing: {fix}")
    digest = _vendored_digest(path)
    if digest != VENDORED[name]:
        pytest.fail(f"vendored test model {path} has sha256 {digest}, expected {VENDORED[name]} "
                    f"(a Git LFS pointer or a local edit?): {fix}")
    return path


def pytest_report_header(config: pytest.Config) -> str:
    extra = (f"{len(EXTRA_EXPORTED)} extra from {SHARED_EXPORTED}" if EXTRA_EXPORTED
             else f"no extras ({SHARED_EXPORTED} not found)")
    return f"exported models: {len(VENDORED)} vendored in {VENDORED_DIR.relative_to(REPO)}, {extra}"


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def conv_bn_relu_model(batch: int | str = 1, c: int = 8, hw: int = 16) -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu -> Conv -> Add(residual) -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1)  # noqa: E731
    inits = []
    for name, arr in [("w1", w(c, 3, 3, 3)), ("b1", w(c)), ("w2", w(c, c, 3, 3)), ("b2", w(c)),
                      ("fc_w", w(10, c)), ("fc_b", w(10))]:
        arr.name = name
        inits.append(arr)
    for name, val in [("bn_s", 1.0), ("bn_b", 0.0), ("bn_m", 0.0), ("bn_v", 1.0)]:
        inits.append(numpy_helper.from_array(np.full(c, val, np.float32), name))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn1"], name="bn1"),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])
    return _model(nodes, [x], [y], inits)


def embedding_model(vocab: int = 50) -> onnx.ModelProto:
    """int64 token ids -> Gather from a table -> Sqrt(abs) ... : inputs must be valid ids."""
    table = numpy_helper.from_array(np.random.default_rng(1).standard_normal((vocab, 4)).astype(np.float32), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="emb"),
             helper.make_node("Abs", ["e"], ["a"], name="abs"),
             helper.make_node("Sqrt", ["a"], ["y"], name="sqrt")]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 4])
    return _model(nodes, [ids], [y], [table])


@pytest.fixture(autouse=True)
def _no_user_predictors(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test sees the shipped predictors and those it passes, never a predictor the developer trained
    into the user directory (`hase.paths.user_predictors_dir`): that directory points at an empty folder."""
    monkeypatch.setenv("HASE_PREDICTORS_DIR", str(tmp_path_factory.getbasetemp() / "no-user-predictors"))


@pytest.fixture
def conv_model_path(tmp_path: Path) -> Path:
    p = tmp_path / "conv.onnx"
    onnx.save(conv_bn_relu_model(), p)
    return p


@pytest.fixture
def exported_dir() -> Path:
    """The vendored exported models' folder, every model in it checked first: a missing one fails the test."""
    for name in VENDORED:
        exported_model(name)
    return VENDORED_DIR


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny real store (`tests/tiny_store.py`) and its trained predictors, built once per session: root/tiny.sqlite,
    root/predictors/cpu-1t."""
    from tiny_store import build_tiny_store, train_tiny  # tiny_store imports this module's model builders

    root = tmp_path_factory.getbasetemp() / "hase_tiny"
    root.mkdir(exist_ok=True)
    build_tiny_store(root)
    train_tiny(root)
    return root
