"""A tiny real store and predictor shared by the predict and evaluate tests: a small collect of tiny models of
three families measured on ONNX Runtime with a fast timing policy, and predictors trained on it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from conftest import conv_bn_relu_model, embedding_model
from onnx import TensorProto, helper, numpy_helper

from hase.measure.collect import CollectConfig, ModelSource, collect
from hase.measure.store import Store
from hase.measure.types import MeasureSettings
from hase.predict.train import load_train_config, train
from hase.runtime.types import EPConfig, TimingPolicy

TINY_CONFIG = """
[training]
targets = ["warm", "span"]
save_targets = "all"
min_samples = 3
n_jobs = 1
[forest.default]
n_estimators = 8
max_depth = 8
max_features = 0.8
[forest.fallback]
n_estimators = 6
max_depth = 6
[keys]
FusedConv = "Conv"
"""


def mlp_model(hidden: int, classes: int = 10) -> onnx.ModelProto:
    """x[1,32] -> Gemm -> Relu -> Gemm -> Softmax."""
    rng = np.random.default_rng(hidden)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, n)
             for n, s in [("w1", (32, hidden)), ("b1", (hidden,)), ("w2", (hidden, classes)), ("b2", (classes,))]]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], name="fc2"),
             helper.make_node("Softmax", ["z"], ["y"], axis=1, name="softmax")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


TINY_MODELS = {
    "convnet": [conv_bn_relu_model(c=4, hw=16), conv_bn_relu_model(c=8, hw=16), conv_bn_relu_model(c=8, hw=24),
                conv_bn_relu_model(c=16, hw=12)],
    "mlp": [mlp_model(16), mlp_model(64), mlp_model(128)],
    "embed": [embedding_model(50), embedding_model(200)],
}


def build_tiny_store(root: Path) -> Path:
    """Collect the tiny models into root/tiny.sqlite with a fast timing policy (reused when already there)."""
    store_path = root / "tiny.sqlite"
    if (root / "tiny.done").exists():
        return store_path
    fast = TimingPolicy(warmup=1, min_runs=5, max_runs=10, min_time_s=0.0, max_time_s=0.05)
    settings = MeasureSettings(kernel=fast, model=fast, profile_warmup=1, profile_runs=3, cold_sessions=2)
    sources = []
    for family, models in TINY_MODELS.items():
        for i, m in enumerate(models):
            p = root / f"{family}{i}.onnx"
            onnx.save(m, p)
            sources.append(ModelSource(f"{family}{i}", family, p))
    with Store(store_path) as store:
        collect(sources, CollectConfig((EPConfig(name="cpu-1t"),), settings), store)
    (root / "tiny.done").write_text("ok")
    return store_path


def train_tiny(root: Path) -> Path:
    """Train predictors on the tiny store into root/predictors (reused when already there)."""
    out = root / "predictors"
    if not (out / "cpu-1t" / "manifest.json").exists():
        (root / "tiny.toml").write_text(TINY_CONFIG)
        train(build_tiny_store(root), out, load_train_config(root / "tiny.toml"))
    return out


def adapt_tiny(root: Path, budget_s: float = 40.0) -> Path:
    """Adapt the tiny predictor to this host (`hase.predict.adapt`) with the tiny models as the transfer set, into
    root/adapted (reused when already there); returns the adapted predictor's folder."""
    from hase.predict.adapt import adapt
    from hase.runtime.host import host_fingerprint

    out = root / "adapted" / f"cpu-1t@{host_fingerprint().digest}"
    if not (out / "manifest.json").exists():
        predictors = train_tiny(root)
        sources = [ModelSource(p.stem, p.stem.rstrip("0123456789"), p) for p in sorted(root.glob("*.onnx"))]
        adapt("cpu-1t", sources, budget_s, root / "adapted", predictors)
    return out
