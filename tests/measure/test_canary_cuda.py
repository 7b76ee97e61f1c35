"""The canary on a CUDA device config, the part a CPU machine can check: configs/devices_gpu.toml's canary is the
GPU-sized MatMul its comment and docs/gpu.md describe, and both probes are sessions on the config's own CUDA EP
(through IOBinding), never a CPU MatMul. Timing them on a GPU is the `gpu`-marked run's."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hase.measure import canary
from hase.measure.config import load_collect_config
from hase.measure.types import CanaryPolicy
from hase.runtime import sessions

ROOT = Path(__file__).parents[2]
GPU_CONFIG = ROOT / "configs" / "devices_gpu.toml"


def test_the_gpu_config_sizes_the_canary_for_the_gpu_and_its_comment_and_docs_say_so() -> None:
    cfg = load_collect_config(GPU_CONFIG)
    [ep] = cfg.devices
    assert ep.ep == "cuda" and cfg.settings.canary.enabled and cfg.settings.canary.size == 2048
    comment = GPU_CONFIG.read_text().split("[canary]")[0].rsplit("\n\n", 1)[-1]
    assert "2048 x 2048 MatMul on the GPU" in comment and "launching CPU thread" in comment
    assert "2048 × 2048 MatMul on the GPU" in (ROOT / "docs" / "gpu.md").read_text()


def test_on_a_cuda_config_both_probes_are_bound_sessions_on_that_ep(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Any, ...]] = []

    def make_session(data: bytes, ep: Any, **kw: Any) -> tuple[bytes, Any]:
        made.append(("session", ep, kw))
        return data, ep

    class Runner:
        def __init__(self, session: tuple[bytes, Any], feeds: dict[str, np.ndarray], ep: Any) -> None:
            made.append(("bound", ep, feeds["a"].shape))

        def run(self) -> None:
            pass

    monkeypatch.setattr(sessions, "make_session", make_session)
    monkeypatch.setattr(sessions, "BoundRunner", Runner)
    cfg = load_collect_config(GPU_CONFIG)
    [ep] = cfg.devices
    policy = cfg.settings.canary
    timer = canary.canary_timer(ep, CanaryPolicy(size=policy.size, runs=2, warmup=0))
    matmul_ms, overhead_ms = timer()
    assert matmul_ms >= 0 and overhead_ms >= 0
    assert [m[0] for m in made] == ["session", "bound", "session", "bound"]
    assert all(m[1] is ep and m[1].ep == "cuda" for m in made)
    assert made[1][2] == (2048, 2048) and made[3][2] == (1, 16)  # the GPU MatMul, then the launch probe
