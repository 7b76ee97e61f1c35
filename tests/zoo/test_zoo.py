"""Tests of hase.zoo: every family builds a valid, runnable, deterministic model; configs; ensure_zoo; CLI."""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from hase import zoo
from hase.cli import main
from hase.errors import HaseError
from hase.sampler.config import load_zoo, read_zoo, zoo_sampler
from hase.zoo import registry
from hase.zoo.blocks import is_sampled

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

# One small variant per family, and the output shapes it must produce.
SMALL = {
    "alexnet": ({"width": 0.25, "resolution": 64, "batch": 2}, {"logits": (2, 1000)}),
    "vgg": ({"depth": 11, "width": 0.125, "bn": True, "resolution": 32}, {"logits": (1, 1000)}),
    "resnet": ({"depth": 50, "width": 0.125, "resolution": 64}, {"logits": (1, 1000)}),
    "densenet": ({"depth": 45, "growth": 8, "resolution": 32}, {"logits": (1, 1000)}),
    "squeezenet": ({"version": "1.0", "width": 0.25, "resolution": 64}, {"logits": (1, 1000)}),
    "googlenet": ({"width": 0.25, "kernel": 3, "resolution": 64}, {"logits": (1, 1000)}),
    "mobilenetv1": ({"width": 0.25, "kernel": 5, "repeats": 1, "resolution": 64}, {"logits": (1, 1000)}),
    "mobilenetv2": ({"width": 0.35, "kernel": 7, "resolution": 64}, {"logits": (1, 1000)}),
    "mobilenetv3": ({"mode": "small", "width": 0.5, "resolution": 64, "batch": 2}, {"logits": (2, 1000)}),
    "shufflenetv2": ({"width": 0.5, "kernel": 5, "resolution": 64}, {"logits": (1, 1000)}),
    "mnasnet": ({"width": 0.5, "resolution": 64}, {"logits": (1, 1000)}),
    "proxylessnas": ({"target": "cpu", "width": 0.5, "resolution": 64}, {"logits": (1, 1000)}),
    "bert": ({"layers": 2, "hidden": 64, "heads": 4, "seq": 16, "batch": 2, "vocab": 100},
             {"last_hidden_state": (2, 16, 64), "pooler_output": (2, 64)}),
    "gpt": ({"layers": 2, "hidden": 64, "heads": 2, "seq": 16, "vocab": 100}, {"logits": (1, 16, 100)}),
    "vit": ({"layers": 2, "hidden": 64, "heads": 4, "patch": 8, "resolution": 32, "batch": 2}, {"logits": (2, 1000)}),
    # the sampled block families (hase.zoo.blocks; tests/zoo/test_blocks.py checks their kernels)
    "sampled-conv": ({"c_in": 16, "c_out": 32, "spatial": 16, "stride": 2}, {"output": (1, 32, 8, 8)}),
    "sampled-matmul": ({"rows": 8, "k": 16, "n": 24, "gelu": "erf"}, {"output": (1, 8, 24)}),
    "sampled-attention": ({"batch": 2, "m": 8, "k": 16, "n": 12}, {"output": (1, 2, 8, 16)}),
    "sampled-norm": ({"rows": 8, "hidden": 32}, {"output": (1, 8, 32)}),
    "sampled-rmsnorm": ({"rows": 8, "hidden": 32}, {"output": (1, 8, 32)}),
    "sampled-scan": ({"steps": 4, "channels": 8, "state": 2}, {"output": (1, 8, 4)}),
    "sampled-conv1d": ({"c_in": 8, "c_out": 16, "length": 40, "kernel": 4, "stride": 2}, {"output": (1, 16, 19)}),
    "sampled-pool": ({"channels": 16, "spatial": 16, "kernel": 3, "stride": 2}, {"output": (1, 16, 8, 8)}),
    "sampled-eltwise": ({"rows": 8, "width": 16, "op": "Concat"}, {"output": (1, 8, 32)}),
    "sampled-resize": ({"channels": 4, "side": 8, "out": 32}, {"output": (1, 4, 32, 32)}),
    "sampled-index": ({"rows": 8, "width": 16, "kind": "window"}, {"output": (1, 8, 9, 16, 1)}),
    "sampled-einsum": ({"batch": 2, "m": 8, "k": 4, "n": 6, "eq": "rel"}, {"output": (1, 1, 2, 8, 6)}),
    "sampled-recurrent": ({"seq": 6, "batch": 1, "input": 8, "hidden": 4, "cell": "gru"}, {"output": (6, 1, 1, 4)}),
}
TRANSFORMER_STYLES = [
    {"gelu": "erf", "linear": "matmul", "scale": "div"},
    {"gelu": "tanh", "linear": "gemm", "scale": "mul"},
]


def _spec(family: str, **overrides) -> zoo.ModelSpec:
    return zoo.get_family(family).spec({**SMALL[family][0], **overrides})


def _feeds(model: onnx.ModelProto, vocab: int = 100) -> dict[str, np.ndarray]:
    """Valid inputs: images in [0, 1), token ids inside the vocabulary, attention masks of 0/1."""
    rng = np.random.default_rng(0)
    feeds = {}
    for inp in model.graph.input:
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if inp.name == "attention_mask":
            mask = np.ones(shape, np.int64)
            mask[0, shape[1] // 2:] = 0  # padding in the first sequence
            feeds[inp.name] = mask
        elif inp.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[inp.name] = rng.integers(0, vocab, shape, dtype=np.int64)
        else:
            feeds[inp.name] = rng.random(shape, dtype=np.float32)
    return feeds


def _run(model: onnx.ModelProto, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = level
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, _feeds(model)), strict=True))


def _optimized_ops(model: onnx.ModelProto, tmp_path: Path) -> Counter:
    """(domain, op_type) counts of the graph ORT saves after ORT_ENABLE_EXTENDED optimizations."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    optimized = onnx.load(so.optimized_model_filepath)
    return Counter((n.domain or "ai.onnx", n.op_type) for n in optimized.graph.node)


def _write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


TINY_CONFIG = """
seed = 3
opset = 17
[families]
resnet = [{ depth = 10, width = 0.125, resolution = 32 }]
mobilenetv3 = [{ mode = "small", width = 0.25, resolution = 32 }]
gpt = [{ layers = 1, hidden = 32, heads = 2, seq = 8, vocab = 64 }]
"""


# ---- families -----------------------------------------------------------------------------------------
def test_small_variants_cover_every_registered_family():
    assert sorted(SMALL) == sorted(f.name for f in zoo.families())
    assert len(SMALL) >= 21


@pytest.mark.parametrize("family", sorted(SMALL))
def test_family_builds_checks_and_runs(family):
    model = zoo.build_model(_spec(family))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17 and model.ir_version == 8
    outputs = _run(model)
    assert {k: v.shape for k, v in outputs.items()} == SMALL[family][1]
    for name, value in outputs.items():
        assert np.isfinite(value).all(), f"{family}: {name} has non-finite values"


@pytest.mark.parametrize("family", ["bert", "gpt", "vit"])
@pytest.mark.parametrize("style", TRANSFORMER_STYLES, ids=["erf-matmul-div", "tanh-gemm-mul"])
def test_transformer_styles_run(family, style):
    model = zoo.build_model(_spec(family, **style))
    onnx.checker.check_model(model, full_check=True)
    ops = {n.op_type for n in model.graph.node}
    assert ("Erf" in ops) == (style["gelu"] == "erf") and ("Pow" in ops) == (style["gelu"] == "tanh")
    assert ("Gemm" in ops) == (style["linear"] == "gemm" or family in ("bert", "vit"))  # pooler / classifier
    assert all(np.isfinite(v).all() for v in _run(model).values())


def test_gpt_without_lm_head_returns_hidden_states():
    outputs = _run(zoo.build_model(_spec("gpt", lm_head=False, linear="gemm")))
    assert {k: v.shape for k, v in outputs.items()} == {"last_hidden_state": (1, 16, 64)}


def test_bert_mask_changes_only_what_it_should():
    """Padding tokens must not influence unpadded positions: the mask is really applied."""
    model = zoo.build_model(_spec("bert", batch=1))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.arange(16, dtype=np.int64)[None] % 100
    mask = np.array([[1] * 8 + [0] * 8], dtype=np.int64)
    a = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    ids_b = ids.copy()
    ids_b[0, 8:] = 7  # change only padded tokens
    b = sess.run(["last_hidden_state"], {"input_ids": ids_b, "attention_mask": mask})[0]
    np.testing.assert_allclose(a[0, :8], b[0, :8], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [18, 20])
def test_newer_opsets_build_and_run(opset):
    for family in ("shufflenetv2", "mnasnet", "gpt"):  # ReduceMean axes move to an input at opset 18
        model = zoo.build_model(_spec(family), opset=opset)
        onnx.checker.check_model(model, full_check=True)
        assert model.opset_import[0].version == opset and model.ir_version in (8, 9)
        assert all(np.isfinite(v).all() for v in _run(model).values())


def test_build_is_deterministic_and_seeded():
    spec = _spec("mobilenetv3")
    first = zoo.build_model(spec, seed=1).SerializeToString()
    assert zoo.build_model(spec, seed=1).SerializeToString() == first
    assert zoo.build_model(spec, seed=2).SerializeToString() != first


def test_model_names_and_metadata():
    spec = zoo.get_family("resnet").spec({"depth": 18, "width": 0.5, "resolution": 64})
    assert spec.name == "resnet_d18_w0.5_r64_b1"
    assert spec.params == (("depth", 18), ("width", 0.5), ("resolution", 64), ("batch", 1))
    assert hash(spec) == hash(zoo.ModelSpec(spec.family, spec.name, spec.params))
    meta = {p.key: p.value for p in zoo.build_model(spec).metadata_props}
    assert meta["hase.family"] == "resnet" and '"depth":18' in meta["hase.params"]


def test_vit_structure_follows_its_parameters():
    """Patch count, class token and MLP width come from the parameters: 32/8 -> 16 patches + 1 class token."""
    model = zoo.build_model(_spec("vit", mlp_ratio=2))
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    assert [a.ints for a in conv.attribute if a.name in ("kernel_shape", "strides")] == [[8, 8], [8, 8]]
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Expand"] == 1 and ops["Concat"] == 1 and ops["LayerNormalization"] == 2 * 2 + 1
    inits = {i.name: tuple(i.dims) for i in model.graph.initializer}
    assert (1, 17, 64) in inits.values() and (64, 128) in inits.values()  # positions; MLP 64 -> 2*64
    assert _spec("vit").name == "vit_l2_h64_a4_p8_r32_b2_erf_matmul_div_m4"


def test_fused_ops_appear_for_resnet_and_bert(tmp_path):
    resnet = _optimized_ops(zoo.build_model(_spec("resnet")), tmp_path)
    assert resnet[("com.microsoft", "FusedConv")] > 0
    assert resnet[("ai.onnx", "BatchNormalization")] == 0  # folded into the convolutions
    bert = _optimized_ops(zoo.build_model(_spec("bert")), tmp_path)
    fused = {op for domain, op in bert if domain == "com.microsoft"}
    assert fused & {"Gelu", "BiasGelu", "FastGelu"}, fused
    assert fused & {"SkipLayerNormalization", "Attention", "EmbedLayerNormalization"}, fused


@pytest.mark.parametrize("style", TRANSFORMER_STYLES, ids=["erf-matmul-div", "tanh-gemm-mul"])
def test_fused_ops_appear_for_vit(tmp_path, style):
    vit = _optimized_ops(zoo.build_model(_spec("vit", **style)), tmp_path)
    fused = {op for domain, op in vit if domain == "com.microsoft"}
    assert fused & {"Gelu", "BiasGelu", "FastGelu"}, fused
    assert "FusedMatMul" in fused, fused  # Q @ K^T with the Transpose folded in
    assert vit[("ai.onnx", "Erf")] == vit[("ai.onnx", "Tanh")] == 0  # every GELU was fused


# ---- errors -------------------------------------------------------------------------------------------
def test_unknown_family_and_parameter_list_known_ones():
    with pytest.raises(HaseError, match=r"unknown model family 'resnt'.*'resnet'"):
        zoo.get_family("resnt")
    with pytest.raises(HaseError, match=r"unknown parameter\(s\) \['dept'\].*'depth'"):
        zoo.get_family("resnet").spec({"dept": 18})


def test_bad_parameter_values():
    with pytest.raises(HaseError, match=r"resnet.depth = 19 is not supported: use one of \[10, 18"):
        zoo.get_family("resnet").spec({"depth": 19})
    with pytest.raises(HaseError, match=r"resnet.width = 'wide' has the wrong type"):
        zoo.get_family("resnet").spec({"width": "wide"})
    with pytest.raises(HaseError, match=r"batch = 0 is too small"):
        zoo.get_family("resnet").spec({"batch": 0})
    with pytest.raises(HaseError, match=r"hidden=100 is not divisible by heads=3"):
        zoo.get_family("bert").spec({"hidden": 100, "heads": 3})
    with pytest.raises(HaseError, match=r"resolution=100 is not divisible by patch=16"):
        zoo.get_family("vit").spec({"resolution": 100})
    with pytest.raises(HaseError, match=r"vit.patch = 32 is not supported: use one of \[4, 8, 16\]"):
        zoo.get_family("vit").spec({"patch": 32})


def test_too_small_resolution_is_a_clear_error():
    with pytest.raises(HaseError, match=r"alexnet_w0.25_r16_b1: the input resolution is too small.*resolution"):
        zoo.build_model(zoo.get_family("alexnet").spec({"width": 0.25, "resolution": 16}))


def test_registry_rejects_duplicates():
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_family("resnet")(lambda g, p: None)


@pytest.mark.parametrize("text, match", [
    ("[families]\nresnett = [{}]", r"unknown model family 'resnett': use one of \[.*'resnet'"),
    ("[families]\nresnet = [{ depth = 18, colour = 1 }]", r"unknown parameter\(s\) \['colour'\] for family 'resnet'"),
    ("[families]\nresnet = [{ depth = [] }]", r"families.resnet.depth is an empty list"),
    ("[families]\nresnet = 3", r"families.resnet must be a table or an array of tables"),
    ("opset = 13\n[families]\nresnet = [{}]", r"opset = 13 .* is not supported: use one of \[17, 18, 19, 20\]"),
    ("seed = -1\n[families]\nresnet = [{}]", r"seed = -1 .* use an integer >= 0"),
    ("sead = 1\n[families]\nresnet = [{}]", r"unknown key\(s\) \['sead'\].*use only"),
    ("seed = 1", r"lists no families"),
    ("[families\n", r"is not valid TOML"),
])
def test_bad_config_raises(tmp_path, text, match):
    with pytest.raises(HaseError, match=match):
        zoo.load_zoo_config(_write_config(tmp_path / "bad.toml", text))


def test_missing_config_raises(tmp_path):
    with pytest.raises(HaseError, match=r"not found: pass --config"):
        zoo.load_zoo_config(tmp_path / "missing.toml")


# ---- configs ------------------------------------------------------------------------------------------
def test_grid_config_expands_and_dedupes(tmp_path):
    path = _write_config(tmp_path / "grid.toml", """
[[families.resnet]]
depth = [10, 18]
width = 0.25
resolution = [32, 64]

[[families.resnet]]
depth = 10
width = 0.25
resolution = 32
""")
    names = [s.name for s in zoo.load_zoo_config(path)]
    assert names == ["resnet_d10_w0.25_r32_b1", "resnet_d10_w0.25_r64_b1",
                     "resnet_d18_w0.25_r32_b1", "resnet_d18_w0.25_r64_b1"]


def test_shipped_configs_are_valid_and_sized():
    small = read_zoo(CONFIGS / "zoo_small.toml")
    hand = [s for s in small.specs if not is_sampled(s.family)]
    per_family = Counter(s.family for s in hand)
    assert set(per_family) == {f.name for f in zoo.families() if not is_sampled(f.name)}
    # sized for a default collect of a few minutes on 2 cores (measured: 121 s for 85 models)
    assert 60 <= len(hand) <= 130 and all(3 <= n <= 14 for n in per_family.values())
    # and 27 the size users predict, so calibration is not fitted on sub-millisecond models alone: every family
    # but AlexNet has one, most at 224 px or real sequence lengths
    assert {"resnet_d50_w1.0_r224_b1", "bert_l6_h768_a12_s128_b1_v8192_erf_gemm_div", "resnet_d18_w1.0_r224_b1",
            "vit_l12_h192_a3_p16_r224_b1_erf_gemm_div_m4"} <= {s.name for s in hand}
    at_224 = Counter(s.family for s in hand if s.kwargs().get("resolution") == 224)
    assert set(at_224) >= set(per_family) - {"alexnet", "bert", "gpt"}
    # the sampled blocks: every block family, within the [sampler] budget (tests/zoo/test_sampler.py) plus 28
    # transformer matrix products listed by hand (BERT-base's 768x3072 at 128 tokens, at batch 8 among them; 12 of
    # 2-6k rows: small ViTs and BERTs at batch 16-32), 22 pools as real graphs write them (13 squeeze-excites), 6
    # segmentation Resizes and 10 cubic ones, 60 element-wise blocks (2 token-mixer Subs, 10 Pows by other exponents,
    # 13 Casts, 4 softmaxes beyond the caches, 9 outer-axis reductions, 4 GQA head repeats, 7 outer sums/products, 7
    # channel/token transposes, 4 last-axis Expands), 7 segmentation heads, 16 batched and 4 large-plane depthwise
    # convs, 5 batch-8 pointwise/stem convs, 12 depthwise/pointwise ones across the last-level cache, 24 grouped ones,
    # 28 strided or batch-16 grouped ones, 16 stride-1 ones of 4 and 8 channels a group and 6 dense batch-16 ones,
    # 11 attentions over many windows, heads or tokens, 5 RMSNorms at decoder sizes, 4 audio 1-D convs, 3 unrolled
    # scans, 8 local-attention Einsums and 6 relative-key ones
    listed = {"sampled-matmul_m128_k768_n3072_r3_none", "sampled-matmul_m128_k4096_n1024_r3_none",
              "sampled-matmul_m1024_k768_n3072_r3_none", "sampled-pool_b1_c1280_r7_k1_s1_window",
              "sampled-pool_b1_c64_r56_k3_s1_mixer", "sampled-resize_c256_r16_o128_linear",
              "sampled-conv_b1_i1024_o256_r128_k1_s1_d1_g1_relu", "sampled-attention_b384_m64_k32_n64",
              "sampled-eltwise_m512_w2048_PowInv", "sampled-eltwise_m256_w1536_CastF64F32",
              "sampled-einsum_b8_m64_k32_n224_local-qk",
              "sampled-eltwise_m1024_w128_MulOuter", "sampled-conv_b8_i32_o32_r112_k3_s1_d1_g32_relu",
              "sampled-einsum_b6_m250_k64_n250_rel-key", "sampled-matmul_m6144_k192_n768_r3_none",
              "sampled-conv_b4_i96_o96_r112_k3_s2_d1_g4_relu", "sampled-pool_b1_c48_r224_k1_s1_se"}
    sampler = zoo_sampler(small)
    assert sampler is not None
    assert len(small.specs) - len(hand) == sampler.kernels + 28 + 22 + 16 + 60 + 114 + 11 + 5 + 4 + 3 + 14
    assert listed <= {s.name for s in small.specs}
    assert {s.family for s in small.specs if is_sampled(s.family)} == {f.name for f in zoo.families()
                                                                        if is_sampled(f.name)}
    for spec in hand:
        p = spec.kwargs()
        assert p.get("resolution", 64) <= 224 and p["batch"] <= 16  # the largest run in 9-86 ms (1 thread)
        assert p.get("seq", 16) <= 512 and p.get("layers", 1) <= 12
    full = load_zoo(CONFIGS / "zoo_full.toml")
    assert len(full) >= 200 and {s.family for s in full} == {f.name for f in zoo.families()}
    assert len({s.name for s in full}) == len(full)


def test_demo_config_stays_small_and_collects_once():
    """`make demo` has 10 minutes on 2 cores, install included (docs/results.md): its zoo measured 94 models in
    about 2.5 of them, so it stays under 100 small models with no adaptive round, of the families the exported
    test models it predicts come from."""
    demo = read_zoo(CONFIGS / "zoo_demo.toml")
    hand = [s for s in demo.specs if not is_sampled(s.family)]
    sampler = zoo_sampler(demo)
    assert sampler is not None and sampler.rounds == 0
    assert len(demo.specs) <= 100 and len(hand) <= 24
    assert {"mnasnet", "bert", "gpt"} <= {s.family for s in hand}
    assert all(s.kwargs().get("resolution", 64) <= 128 and s.kwargs().get("seq", 16) <= 128 for s in hand)


# ---- ensure_zoo and the CLI ---------------------------------------------------------------------------
def test_ensure_zoo_writes_atomically_skips_current_files_rebuilds_stale_ones_and_indexes(tmp_path):
    config = _write_config(tmp_path / "tiny.toml", TINY_CONFIG)
    out = tmp_path / "zoo"
    entries = list(zoo.ensure_zoo(read_zoo(config), out))
    folder = out / "tiny"
    assert [e.built for e in entries] == [True, True, True]
    assert all(e.path.parent == folder and e.path.exists() for e in entries)
    assert sorted(p.name for p in folder.iterdir()) == sorted([e.path.name for e in entries] + ["index.csv"])
    with (folder / "index.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == zoo.INDEX_COLUMNS and [r["name"] for r in rows] == [e.spec.name for e in entries]
    assert all(int(r["size_bytes"]) == (folder / r["file"]).stat().st_size for r in rows)
    assert rows[0]["seed"] == "3" and int(rows[0]["n_nodes"]) > 0

    before = {e.path: e.path.stat().st_mtime_ns for e in entries[1:]}
    entries[0].path.unlink()
    (folder / "index.csv").unlink()  # rows of existing files are recomputed from the files
    again = list(zoo.ensure_zoo(read_zoo(config), out))
    assert [e.built for e in again] == [True, False, False]
    assert {e.path: e.path.stat().st_mtime_ns for e in again[1:]} == before
    assert entries[0].path.read_bytes() == zoo.build_model(entries[0].spec, seed=3).SerializeToString()
    with (folder / "index.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == rows

    # a file its builder would not write today (an older builder's, or damaged) is rewritten, never trusted by name
    stale = zoo.build_model(entries[1].spec, seed=4).SerializeToString()
    entries[1].path.write_bytes(stale)
    entries[2].path.write_bytes(b"not onnx")
    third = list(zoo.ensure_zoo(read_zoo(config), out))
    assert [e.built for e in third] == [False, True, True]
    assert all(e.path.read_bytes() == zoo.build_model(e.spec, seed=3).SerializeToString() for e in third)
    with (folder / "index.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == rows


def test_interrupted_build_leaves_no_partial_file(tmp_path, monkeypatch):
    config = _write_config(tmp_path / "tiny.toml", TINY_CONFIG)
    folder = tmp_path / "zoo" / "tiny"
    it = zoo.ensure_zoo(read_zoo(config), tmp_path / "zoo")
    next(it)
    it.close()  # stopping early writes no index
    assert [p.name for p in folder.iterdir()] == ["resnet_d10_w0.125_r32_b1.onnx"]

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("hase.files.os.replace", fail)  # the atomic write every stage uses
    with pytest.raises(KeyboardInterrupt):
        list(zoo.ensure_zoo(read_zoo(config), tmp_path / "zoo"))
    assert [p.name for p in folder.iterdir()] == ["resnet_d10_w0.125_r32_b1.onnx"]  # no temp, no partial


def test_cli_builds_and_lists(tmp_path, capsys):
    config = _write_config(tmp_path / "tiny.toml", TINY_CONFIG)
    assert main(["zoo", "--config", str(config), "--list"]) == 0
    assert "gpt_l1_h32_a2_s8_b1_v64_tanh_matmul_mul_lm1" in capsys.readouterr().out
    assert not (tmp_path / "zoo").exists()
    assert main(["zoo", "--config", str(config), "--out", str(tmp_path / "zoo")]) == 0
    assert "mobilenetv3" in capsys.readouterr().out
    assert len(list((tmp_path / "zoo" / "tiny").glob("*.onnx"))) == 3
    assert main(["zoo", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "not found" in capsys.readouterr().err


# ---- size bounds ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("family, key, value, bound", [
    ("resnet", "batch", 1_000_000_000, 256),
    ("alexnet", "resolution", 100_000, 2048),
    ("mobilenetv2", "width", 1000.0, 4.0),
    ("bert", "seq", 1_000_000, 8192),
    ("gpt", "hidden", 65536, 8192),
    ("gpt", "vocab", 10**9, 262_144),
    ("vit", "layers", 1000, 128),
    ("vit", "mlp_ratio", 64, 16),
    ("densenet", "growth", 4096, 256),
])
def test_sizes_are_bounded(family, key, value, bound):
    with pytest.raises(HaseError, match=rf"^{family}.{key} = {value!r} is over the limit of {bound}: "):
        zoo.get_family(family).spec({key: value})


def test_a_huge_grid_is_refused_before_it_is_expanded(tmp_path, monkeypatch):
    calls = []
    real_spec = zoo.Family.spec
    monkeypatch.setattr(zoo.Family, "spec", lambda self, values: calls.append(values) or real_spec(self, values))
    widths = ", ".join(str(round(0.05 + i * 0.01, 2)) for i in range(199))
    path = _write_config(tmp_path / "huge.toml", f"""
[[families.resnet]]
depth = 18

[[families.resnet]]
width = [{widths}]
resolution = [{", ".join(str(r) for r in range(16, 216))}]
""")  # 199 x 200 = 39,800 variants
    with pytest.raises(HaseError, match=r"^families.resnet \(grid 2\) expands to 39800 variants, 39801 in the config "
                                        r"so far, over the limit of 2000 per zoo config"):
        zoo.load_zoo_config(path)
    assert len(calls) == 1  # only the first grid's single variant was ever built as a spec


def test_variants_are_bounded_over_the_whole_config(tmp_path):
    grid = "width = [{}]\nresolution = [{}]".format(", ".join(str(round(0.05 + i * 0.01, 2)) for i in range(40)),
                                                    ", ".join(str(r) for r in range(16, 46)))  # 1200 each
    path = _write_config(tmp_path / "two.toml", f"[[families.resnet]]\n{grid}\n[[families.alexnet]]\n{grid}\n")
    with pytest.raises(HaseError, match=r"^families.alexnet expands to 1200 variants, 2400 in the config so far"):
        zoo.load_zoo_config(path)


def test_a_variant_too_large_to_build_is_refused_before_drawing(monkeypatch):
    spec = zoo.get_family("alexnet").spec({"width": 0.25, "resolution": 2048, "batch": 256})
    with pytest.raises(HaseError, match=r"^zoo model alexnet_w0.25_r2048_b256: input 'input' of shape "
                                        r"\[256, 3, 2048, 2048\] float32 needs 12.9 GB, over the 4.0 GB limit"):
        zoo.build_model(spec)
    spec = zoo.get_family("gpt").spec({"layers": 1, "hidden": 8192, "heads": 8, "seq": 8, "vocab": 65536})
    with pytest.raises(HaseError, match=r"^zoo model gpt_.*weights need over 2.\d GB, more than one ONNX file holds"):
        zoo.build_model(spec)
    monkeypatch.setenv("HASE_MAX_TENSOR_GB", "0.005")  # activations are checked too, as the graph grows
    spec = zoo.get_family("mobilenetv1").spec({"width": 1.0, "resolution": 224, "batch": 4})
    with pytest.raises(HaseError, match=r"^zoo model mobilenetv1_w1.0_k3_n5_r224_b4: Conv output of shape "
                                        r"\[4, 32, 112, 112\] float32 needs 0.0064 GB, over the 0.005 GB limit"):
        zoo.build_model(spec)
