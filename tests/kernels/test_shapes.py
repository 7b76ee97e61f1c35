"""hase.kernels.shapes and `--free-dim`: symbolic dimensions set by name, in the library and in every command."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model, exported_model

from hase.cli import main
from hase.errors import HaseError
from hase.kernels import graph, split
from hase.kernels.shapes import parse_free_dims
from hase.runtime.types import EPConfig


@pytest.fixture
def symbolic_semnasnet(tmp_path: Path) -> Path:
    """The vendored timm model (a real export) with its batch dimension renamed to the symbol `batch`."""
    model = onnx.load(exported_model("timm_semnasnet_050_cls10_b1"))
    for vi in list(model.graph.input) + list(model.graph.output):
        d = vi.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_param = "batch"
    p = tmp_path / "semnasnet_symbolic.onnx"
    onnx.save(model, p)
    return p


def test_parse_free_dims():
    assert parse_free_dims(["batch=4", "seq:128"]) == {"batch": 4, "seq": 128}  # perf_test's NAME:SIZE too
    assert parse_free_dims(None) == {}
    for bad, match in [("batch", "write NAME=SIZE"), ("=4", "write NAME=SIZE"), ("batch=x", "write NAME=SIZE"),
                       ("batch=0", "0 is not >= 1"), (f"batch={2**63}", "too large")]:
        with pytest.raises(HaseError, match=match):
            parse_free_dims([bad])


def test_free_dim_sets_the_named_dimension_of_every_input(symbolic_semnasnet):
    model = graph.load_model(symbolic_semnasnet, free_dims={"batch": 2})
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3, 160, 160]
    same = graph.load_model(symbolic_semnasnet, {model.graph.input[0].name: (2, 3, 160, 160)})
    assert same.graph.input == model.graph.input


def test_free_dim_gives_the_kernels_of_the_whole_shape(symbolic_semnasnet):
    by_dim = graph.file_kernel_graph(symbolic_semnasnet, EPConfig(), free_dims={"batch": 2}, with_weights=False)
    name = by_dim.model.graph.input[0].name
    by_shape = graph.file_kernel_graph(symbolic_semnasnet, EPConfig(), {name: (2, 3, 160, 160)})
    assert [n.spec.kernel_id for n in split.split(by_dim)] == [n.spec.kernel_id for n in split.split(by_shape)]
    assert by_dim.values[name].shape == (2, 3, 160, 160)


def test_messages_show_the_declared_shape_and_both_fixes(symbolic_semnasnet):
    with pytest.raises(HaseError, match=r"has symbolic shape \[batch, 3, 160, 160\]: pass --input-shape "
                                        r"\S+=1,3,160,160 .* or name them: --free-dim batch=1"):
        graph.load_model(symbolic_semnasnet)
    with pytest.raises(HaseError, match=r"--free-dim names \['bacth'\], a dimension no input of the model has "
                                        r"\(its inputs: \S+ \[batch, 3, 160, 160\]\)"):
        graph.load_model(symbolic_semnasnet, free_dims={"bacth": 2})


def test_input_shape_wins_over_free_dim_for_its_input(tmp_path):
    p = tmp_path / "sym.onnx"
    onnx.save(conv_bn_relu_model(batch="batch"), p)
    model = graph.load_model(p, {"x": (3, 3, 16, 16)}, free_dims={"batch": 2})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3
    assert graph.resolve_input_shapes(p, {}, {"batch": 2}) == {"x": (2, 3, 16, 16)}
    assert graph.resolve_input_shapes(p, {"x": (5, 3, 16, 16)}, {}) == {"x": (5, 3, 16, 16)}


def test_free_dim_in_predict_split_and_profile(symbolic_semnasnet, tmp_path, capsys):
    m = str(symbolic_semnasnet)
    assert main(["predict", m, "--free-dim", "batch=2", "--json"]) == 0
    by_dim = json.loads(capsys.readouterr().out)
    name = onnx.load(m, load_external_data=False).graph.input[0].name
    assert main(["predict", m, "--input-shape", f"{name}=2,3,160,160", "--json"]) == 0
    by_shape = json.loads(capsys.readouterr().out)
    assert by_dim["latency_ms"] == by_shape["latency_ms"] and by_dim["n_kernels"] == by_shape["n_kernels"]
    assert main(["predict", m]) == 2
    assert "[batch, 3, 160, 160]" in capsys.readouterr().err
    assert main(["split", m, "--out", str(tmp_path / "k"), "--free-dim", "batch=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_nodes"] == by_dim["n_kernels"]
    assert main(["profile", m, "--free-dim", "batch=2", "--runs", "1", "--warmup", "0",
                 "--workdir", str(tmp_path / "p"), "--json"]) == 0
    capsys.readouterr()
    for cmd in (["split", m, "--out", str(tmp_path / "k2")], ["profile", m], ["predict", m]):
        assert main([*cmd, "--free-dim", "bacth=2"]) == 2
        err = capsys.readouterr().err
        assert "--free-dim names ['bacth']" in err and len(err.strip().splitlines()) == 1
