"""hase.measure.placement's node probe, run here as a Ray task would run it on a node (no cluster needed): a typed
record of the node, and why a node is left out of a device config."""
from __future__ import annotations

import dataclasses
import socket

import pytest

from hase.measure.placement import FINGERPRINT_COLS, NodeProbe, probe_node
from hase.runtime import sessions
from hase.runtime.types import EPConfig
from hase.version import __version__

CPU = EPConfig(name="cpu-1t", ep="cpu", intra_op_threads=1)
CUDA = EPConfig(name="cuda0", ep="cuda")


def test_a_probe_is_a_record_of_the_node():
    probe = probe_node([CPU, CUDA])
    assert isinstance(probe, NodeProbe) and probe.host == socket.gethostname()
    assert probe.metadata["cpu-1t"]["execution_provider"] == "CPUExecutionProvider"
    assert probe.metadata["cpu-1t"]["hase_version"] == __version__
    if CUDA.provider in sessions.ort().get_available_providers():
        pytest.skip("this onnxruntime build has the CUDA provider: nothing is unusable here")
    assert "cuda0" not in probe.metadata and "not available in this onnxruntime build" in probe.unusable["cuda0"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        probe.host = "other"


def test_why_a_node_is_left_out():
    probe = probe_node([CPU, CUDA])
    meta = probe.metadata["cpu-1t"]
    expected = {c: meta[c] for c in FINGERPRINT_COLS}
    assert probe.reason_left_out("cpu-1t", expected) is None  # the config's own kind of machine
    other_cpu = {**expected, "cpu_model": "Some Other CPU"}
    assert "machines have 'Some Other CPU'" in str(probe.reason_left_out("cpu-1t", other_cpu))
    old = dataclasses.replace(probe, metadata={"cpu-1t": {**meta, "hase_version": "0.0.1"}})
    assert "runs Hase 0.0.1" in str(old.reason_left_out("cpu-1t", expected))
    if "cuda0" in probe.unusable:
        assert probe.reason_left_out("cuda0", expected) == probe.unusable["cuda0"]
