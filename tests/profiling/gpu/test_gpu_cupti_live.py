"""CUPTI on a real GPU (marker `gpu`; skipped with the reason elsewhere): the nodes' GPU time, recorded during
`profile_model` on CUDA, adds up to the run's GPU busy time within 5 %, and the verdict is given."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from gpu_support import CUDA_EP, require_cupti

from hase.profiling.gpu import attribute
from hase.profiling.run import analyze, profile_model
from hase.zoo.build import build_model
from hase.zoo.registry import get_family

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("batch", [1, 16])
def test_node_gpu_time_adds_up_to_busy_time(tmp_path: Path, batch: int):
    require_cupti()
    spec = get_family("resnet").spec({"depth": 18, "width": 0.5, "resolution": 128, "batch": batch})
    path = tmp_path / f"{spec.name}.onnx"
    onnx.save(build_model(spec), path)
    res = profile_model(path, CUDA_EP, runs=10, warmup=3, workdir=tmp_path, cupti=True)
    assert res.gpu is not None and not res.gpu.records.empty
    gpu = analyze(res.events, res.skip_runs, gpu=res.gpu).gpu
    assert gpu is not None
    runs = gpu.runs.median(numeric_only=True)
    node_sum = float(gpu.nodes[attribute.GPU_BUSY_US].sum())
    assert node_sum == pytest.approx(float(runs[attribute.GPU_BUSY_US]), rel=0.05)
    assert (gpu.activities[attribute.LAUNCH_TID] >= 0).mean() > 0.95  # launches matched to their API records
    assert gpu.verdict.label in (attribute.CPU_BOUND, attribute.GPU_BOUND, attribute.BALANCED)
