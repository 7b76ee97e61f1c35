"""Property-based tests (hypothesis) of what users type and the files they pass: only HaseError ever escapes.

The model loader gets random bytes, real models cut at any point and real models with bytes overwritten;
`parse_input_shapes` gets arbitrary text. Either the result is valid or the error is a HaseError.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model, embedding_model, exported_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hase.errors import HaseError
from hase.kernels import graph

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loader")


@pytest.fixture(scope="module")
def real_models() -> list[bytes]:
    """Serialized real models: two built ones and an exported BERT (external-data free)."""
    return [conv_bn_relu_model().SerializeToString(), embedding_model().SerializeToString(),
            exported_model("hf_bert_tiny_s64_b2").read_bytes()]


def _load(workdir: Path, data: bytes) -> onnx.ModelProto | None:
    """load_model on a file holding `data`; None when it raised HaseError (any other exception fails the test)."""
    p = workdir / f"m{next(_counter)}.onnx"
    p.write_bytes(data)
    try:
        return graph.load_model(p)
    except HaseError as exc:
        assert "\n" not in str(exc)  # one line
        return None
    finally:
        p.unlink()


@SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes_load_or_raise_hase_error(workdir, data):
    model = _load(workdir, data)
    assert model is None or len(model.graph.node) > 0


@SETTINGS
@given(st.data())
def test_truncated_real_models_load_or_raise_hase_error(workdir, real_models, data):
    blob = data.draw(st.sampled_from(real_models))
    cut = data.draw(st.integers(0, len(blob) - 1))
    _load(workdir, blob[:cut])


@SETTINGS
@given(st.data())
def test_corrupted_real_models_load_or_raise_hase_error(workdir, real_models, data):
    blob = bytearray(data.draw(st.sampled_from(real_models)))
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(0, 255)), min_size=1, max_size=8))
    for pos, value in edits:
        blob[pos] = value
    _load(workdir, bytes(blob))


@SETTINGS
@given(st.lists(st.text(max_size=40), max_size=4))
def test_parse_input_shapes_gives_sizes_or_hase_error(items):
    try:
        shapes = graph.parse_input_shapes(items)
    except HaseError as exc:
        assert "\n" not in str(exc)
        return
    for shape in shapes.values():
        assert shape and all(1 <= d <= graph.MAX_DIM for d in shape)


@SETTINGS
@given(st.lists(st.integers(-2, 2**64), min_size=1, max_size=5), st.sampled_from([",", "x"]))
def test_parse_input_shapes_round_trips_valid_sizes(dims, sep):
    item = "x=" + sep.join(str(d) for d in dims)
    if all(1 <= d <= graph.MAX_DIM for d in dims):
        assert graph.parse_input_shapes([item]) == {"x": tuple(dims)}
    else:
        with pytest.raises(HaseError, match="bad --input-shape"):
            graph.parse_input_shapes([item])
