"""hase.profiling.names: a profiled node is joined to the kernel graph's node of its output shape, not only its name."""
from __future__ import annotations

import tempfile

from conftest import exported_model

from hase.kernels import graph, split
from hase.profiling.names import align_names, profiled_signatures
from hase.profiling.run import profile_model
from hase.runtime.types import EPConfig

EP = EPConfig(name="cpu-test")  # ORT's default level `all`: the NCHWc transformer adds ReorderInput/ReorderOutput
R = "ReorderOutput"


def test_a_name_whose_node_differs_goes_to_the_node_of_its_shape():
    known = {"R_1": (R, (1, 8, 4, 4)), "R_2": (R, (1, 16, 2, 2)), "conv": ("Conv", (1, 8, 4, 4))}
    # the profiled session swapped the two reorders' names; the conv kept its own
    profiled = {"R_1": (R, (1, 16, 2, 2)), "R_2": (R, (1, 8, 4, 4)), "conv": ("Conv", (1, 8, 4, 4))}
    assert align_names(profiled, known) == {"R_1": "R_2", "R_2": "R_1", "conv": "conv"}


def test_names_are_kept_where_shapes_agree_or_are_unknown():
    known = {"a": ("FusedConv", (1, 4)), "b": ("Add", (2,))}
    # another op type under the same name and shape (a fused node) and a node without a recorded shape stay
    assert align_names({"a": ("Conv", (1, 4)), "b": ("Add", None)}, known) == {"a": "a", "b": "b"}


def test_a_node_with_no_counterpart_keeps_its_name_unless_taken():
    known = {"R_1": (R, (1, 8)), "R_2": (R, (1, 8))}
    profiled = {"R_1": (R, (1, 8)), "R_9": (R, (1, 8)), "R_2": (R, (3, 3)), "Memcpy": ("MemcpyToHost", (1,))}
    out = align_names(profiled, known)
    assert out["R_1"] == "R_1" and out["R_9"] == "R_2"  # R_9 took the free node of its shape
    assert "R_2" not in out  # its name is taken and no node of its shape is free: left out, never doubled
    assert out["Memcpy"] == "Memcpy"  # not in the kernel graph: kept under its own name
    assert len(set(out.values())) == len(out)


def test_profiled_reorders_join_kernel_graph_nodes_of_their_shape():
    """A real model whose kernel graph and profile come from two ORT sessions: every profiled node is joined to a
    kernel graph node with its output shape, ReorderOutputs included, whatever names the two sessions gave."""
    path = exported_model("timm_semnasnet_050_cls10_b1")
    nodes = split.split(graph.kernel_graph(graph.load_model(path), EP))
    known = {n.node_name: (n.spec.op_type, tuple(n.spec.outputs[0].shape)) for n in nodes}
    assert sum(op == R for op, _ in known.values()) >= 2
    with tempfile.TemporaryDirectory() as tmp:
        events = profile_model(path, EP, runs=1, warmup=0, workdir=tmp).events
    profiled = profiled_signatures(events)
    names = align_names(profiled, known)
    assert sorted(names.values()) == sorted(known)  # one profiled node per kernel graph node, none doubled
    assert all(known[names[p]][1] == sig[1] for p, sig in profiled.items())
