"""The CUDA EP measured for real (marker `gpu`; skipped with the reason where no CUDA session runs):
a ResNet-like zoo model on CUDA, IOBinding timing, CPU-vs-CUDA outputs, the measured model row."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from gpu_support import CUDA_EP, require_cuda

from hase.kernels import graph, split
from hase.kernels.inputs import make_model_feeds
from hase.measure.model import measure_model, time_model
from hase.measure.types import MeasureSettings, ModelSource
from hase.runtime import sessions
from hase.runtime.types import EPConfig, TimingPolicy
from hase.zoo.build import build_model
from hase.zoo.registry import get_family

pytestmark = pytest.mark.gpu
FAST = TimingPolicy(warmup=3, min_runs=10, max_runs=50, min_time_s=0.0, max_time_s=1.0)
SETTINGS = MeasureSettings(kernel=FAST, model=FAST, profile_warmup=2, profile_runs=5)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_cuda()
    spec = get_family("resnet").spec({"depth": 18, "width": 0.5, "resolution": 128, "batch": 8})
    path = tmp_path_factory.mktemp("zoo") / f"{spec.name}.onnx"
    onnx.save(build_model(spec), path)
    return path


def test_cuda_session_runs_on_cuda_and_matches_the_cpu(resnet):
    model = onnx.load(resnet)
    sess = sessions.make_session(resnet, CUDA_EP)
    assert sess.get_providers()[0] == "CUDAExecutionProvider"
    feeds = make_model_feeds(model)
    runner = sessions.BoundRunner(sess, feeds, CUDA_EP)
    runner.run()
    ref = sessions.make_session(resnet, EPConfig(name="cpu")).run(None, feeds)[0]
    assert np.allclose(runner.outputs()[0], ref, rtol=1e-2, atol=1e-2)


def test_iobinding_timing_on_cuda(resnet):
    timing, api = time_model(onnx.load(resnet), CUDA_EP, SETTINGS)
    assert api == "iobinding" and timing.latency_ms > 0 and timing.n_runs >= FAST.min_runs


def test_measured_row_names_the_gpu_and_counts_no_fallback(resnet):
    model = graph.load_model(resnet)
    nodes = split.split(graph.kernel_graph(model, CUDA_EP))
    row, spans = measure_model(model, ModelSource(resnet.stem, "resnet", resnet), nodes, CUDA_EP, SETTINGS)
    assert row["gpu_name"] and row["gpu_driver"] and row["execution_provider"] == "CUDAExecutionProvider"
    assert row["timing_api"] == "iobinding" and row["n_cpu_fallback_nodes"] == 0
    assert spans and all(s["provider"] for s in spans)


def test_a_bert_splits_on_cuda_with_its_cuda_only_fusions(tmp_path: Path):
    # the first GPU run (2026-11-28) skipped every BERT at the split: ORT's CUDA graph holds BiasSoftmax, which
    # the shape probe could not load on the CPU EP; the probe now runs on the config's own provider
    require_cuda()
    spec = get_family("bert").spec({"layers": 1, "hidden": 64, "heads": 2, "seq": 32, "vocab": 2048})
    kg = graph.kernel_graph(build_model(spec), CUDA_EP)
    nodes = split.split(kg)
    assert "BiasSoftmax" in {n.spec.op_type for n in nodes}
