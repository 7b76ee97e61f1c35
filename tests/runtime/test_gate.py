"""hase.runtime.gate: the core gate's probe on real ORT sessions, its bounded wait, and when there is none."""
from __future__ import annotations

import onnx
import pytest

from hase.errors import HaseError
from hase.runtime.gate import CoreGate, GatePolicy, gate_for, probe_model
from hase.runtime.types import EPConfig


def test_no_gate_for_one_thread_or_a_gpu_and_one_for_ort_default_threads():
    assert gate_for(EPConfig(intra_op_threads=1)) is None
    assert gate_for(EPConfig(intra_op_threads=0), cores=1) is None
    assert gate_for(EPConfig(ep="cuda", intra_op_threads=0), cores=8) is None
    gate = gate_for(EPConfig(intra_op_threads=0), cores=4)
    assert gate is not None and gate.policy.threads == 4
    assert gate_for(EPConfig(intra_op_threads=3)).policy.threads == 3  # type: ignore[union-attr]


def test_the_probe_is_a_valid_matmul_model():
    model = onnx.load_from_string(probe_model(32))
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["MatMul"]


def test_real_probe_ratio_and_record():
    gate = CoreGate(GatePolicy(threads=2, size=64, calibrate_s=0.5, max_wait_s=1.0))
    gate.wait()
    summary = gate.summary()
    assert summary["checks"] >= 1 and summary["threads"] == 2
    assert 0 < gate.reference <= summary["ratio_median"] + 1e-9  # the reference is the quickest ratio seen


def test_wait_is_bounded_when_the_cores_never_come():
    slept: list[float] = []
    gate = CoreGate(GatePolicy(threads=2, size=32, wait_s=0.1, max_wait_s=0.5, calibrate_s=0.0, settle_s=0.0),
                    sleep=slept.append)
    gate.ready()
    gate.reference = 1e-9  # no real ratio gets within the tolerance of this: the host never looks ready
    assert gate.wait() == pytest.approx(0.5)
    assert sum(slept) == pytest.approx(0.5) and gate.not_ready >= 5


def test_bad_policy_is_one_error():
    with pytest.raises(HaseError, match="threads >= 2"):
        GatePolicy(threads=1)


def test_a_gate_that_has_waited_its_total_times_without_waiting():
    slept: list[float] = []
    gate = CoreGate(GatePolicy(threads=2, size=32, wait_s=0.1, max_wait_s=0.3, max_total_wait_s=0.5, calibrate_s=0.0,
                               settle_s=0.0), sleep=slept.append)
    gate.ready()
    gate.reference = 1e-9
    assert gate.wait() == pytest.approx(0.3) and gate.wait() == pytest.approx(0.3)  # 0.6 s in all: over 0.5
    checks = gate.checks
    assert gate.wait() == 0.0 and gate.checks == checks and gate.summary()["gave_up"] is True
