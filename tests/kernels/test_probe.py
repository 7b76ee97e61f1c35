"""hase.kernels.probe: where an optimized graph is probed for its tensors' specs."""
from __future__ import annotations

from hase.kernels import probe
from hase.runtime.types import EPConfig


def test_a_cpu_graph_is_probed_on_one_cpu_thread_without_further_optimization():
    for ep in (None, EPConfig(name="cpu-mt", intra_op_threads=0)):
        got = probe.probe_ep(ep)
        assert (got.ep, got.intra_op_threads, got.opt_level) == ("cpu", 1, "disabled")


def test_a_cuda_graph_is_probed_on_its_own_gpu():
    # the first GPU run: ORT's CUDA graph of every BERT held BiasSoftmax, which the CPU EP cannot load
    got = probe.probe_ep(EPConfig(name="h100-cuda", ep="cuda", device_id=1))
    assert (got.ep, got.device_id, got.opt_level) == ("cuda", 1, "disabled")
