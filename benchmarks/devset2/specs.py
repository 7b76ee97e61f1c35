"""The second development set's models: architecture families that the first dev set
(../shared/models/devset/export.py) does not have, as declarative specs read by export.py.

Each spec is one model: a timm model name (random weights, `pretrained=False`) or a transformers model class with a
configuration (random weights, nothing downloaded), an input signature with static shapes, its family (one
architecture family per spec, never one the first dev set has) and its kind (cnn, vit, hybrid, mlp, text, decoder,
speech, seg, det), which the held-out split is stratified by (see export.py `--write-split` and split.csv).

Input kinds: "f32" (normal noise), "ids" (int64 token ids in [0, hi)), "mask" (int64 ones).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Spec:
    name: str
    family: str
    kind: str
    lib: str  # "timm" or "hf"
    model: str  # timm model name, or transformers model class
    inputs: tuple[tuple[str, tuple[int, ...], str, int | None], ...]
    config: str = ""  # transformers config class
    config_kwargs: dict[str, Any] = field(default_factory=dict)
    attr: str = "last_hidden_state"  # the output attribute of a transformers model (else its first output)
    sub: str = ""  # a method of the transformers model that returns the part to export (e.g. get_encoder)
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    reparam: bool = False  # fuse train-time branches (timm reparameterize_model) as deployed models are
    note: str = ""

    @property
    def source(self) -> str:
        if self.lib == "timm":
            kw = ",".join(f"{k}={v}" for k, v in self.config_kwargs.items())
            return f"timm {self.model}" + (f"({kw})" if kw else "") + (" (reparameterized)" if self.reparam else "")
        kw = ",".join(f"{k}={v}" for k, v in self.config_kwargs.items())
        return f"transformers {self.model}({self.config}({kw})){'.' + self.sub + '()' if self.sub else ''}"

    @property
    def batch(self) -> int:
        return self.inputs[0][1][0]

    @property
    def seq(self) -> str:
        """The sequence length of a token input, the audio/frames length of a speech input, else the resolution."""
        shape = self.inputs[0][1]
        return "x".join(map(str, shape[1:] if self.inputs[0][2] != "f32" or len(shape) != 4 else shape[2:]))


def img(b: int, h: int, w: int = 0) -> tuple:
    """An image batch `pixel_values` of b x 3 x h x w (w = h when not given)."""
    return (("pixel_values", (b, 3, h, w or h), "f32", None),)


def txt(b: int, s: int, vocab: int, mask: bool = True) -> tuple:
    return (("input_ids", (b, s), "ids", vocab),) + ((("attention_mask", (b, s), "mask", None),) if mask else ())


def f32(name: str, *shape: int) -> tuple:
    return ((name, tuple(shape), "f32", None),)


def ids(name: str, hi: int, *shape: int) -> tuple:
    """An integer input of token ids below `hi`."""
    return ((name, tuple(shape), "ids", hi),)


def ones(name: str, *shape: int) -> tuple:
    """An all-ones attention mask input."""
    return ((name, tuple(shape), "mask", None),)


def dec_spec(name: str, family: str, model: str, config: str, kw: dict, b: int, s: int, vocab: int = 16000,
             kind: str = "decoder") -> Spec:
    """A decoder-only language model without KV cache (or, kind="text", a bidirectional encoder of the same form)."""
    return hf_spec(name, family, kind, model, config, dict(NOCACHE, vocab_size=vocab, **kw), txt(b, s, vocab),
                   call_kwargs=NOCACHE)


def timm_spec(model: str, family: str, kind: str, res: int, b: int, name: str = "", reparam: bool = False,
              **kw) -> Spec:
    """A timm model at resolution `res`, batch `b` (`kw`: its config's arguments); named timm_<model>[_res]_b<b>."""
    tag = "" if model.endswith(str(res)) else f"_{res}"
    return Spec(name or f"timm_{model}{tag}_b{b}", family, kind, "timm", model, img(b, res), reparam=reparam,
                config_kwargs=kw)


def hf_spec(name: str, family: str, kind: str, model: str, config: str, kw: dict, inputs: tuple,
            attr="last_hidden_state", sub="", call_kwargs=None) -> Spec:
    """A transformers model built from its config class with `kw`, called on `inputs`."""
    return Spec(name, family, kind, "hf", model, inputs, config, kw, attr, sub, dict(call_kwargs or {}))


class SpecList(list):
    """A set's specs, with the appenders its spec file calls (`SPECS.timm(...)`, `.hf`, `.dec`): the later sets'
    spec files share them from here."""

    def timm(self, model: str, family: str, kind: str, res: int, b: int, name: str = "", **kw) -> None:
        self.append(timm_spec(model, family, kind, res, b, name, **kw))

    def hf(self, name: str, family: str, kind: str, model: str, config: str, kw: dict, inputs: tuple,
           attr="last_hidden_state", sub="", call_kwargs=None) -> None:
        self.append(hf_spec(name, family, kind, model, config, kw, inputs, attr, sub, call_kwargs))

    def dec(self, name: str, family: str, model: str, config: str, kw: dict, b: int, s: int, vocab: int = 16000,
            kind: str = "decoder") -> None:
        self.append(dec_spec(name, family, model, config, kw, b, s, vocab, kind))


SPECS: list[Spec] = []


def timm(model: str, family: str, kind: str, res: int, b: int, reparam: bool = False) -> None:
    SPECS.append(timm_spec(model, family, kind, res, b, reparam=reparam))


def hf(name: str, family: str, kind: str, model: str, config: str, kw: dict, inputs: tuple, attr="last_hidden_state",
       sub="", call_kwargs=None) -> None:
    SPECS.append(hf_spec(name, family, kind, model, config, kw, inputs, attr, sub, call_kwargs))


NOCACHE = dict(use_cache=False)
# shared by the later sets' specs: a BERT-base body and DeBERTa-v3's relative attention
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
DEBERTA_V3 = dict(relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
                  pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_biased_input=False)

# ---- timm CNNs (families the first dev set has are left out: resnet, regnet, mobilenetv2/v3, lcnet, mnasnet,
# spnasnet, fbnet, hardcorenas, ghostnet(v2), efficientnet, gernet, convnext, dla, densenet, selecsls, repghost)
timm("resnext26ts", "resnext", "cnn", 224, 2)
timm("res2net50_14w_8s", "res2net", "cnn", 224, 1)
timm("dpn68", "dpn", "cnn", 224, 1)
timm("mixnet_s", "mixnet", "cnn", 224, 4)
timm("rexnet_100", "rexnet", "cnn", 224, 2)
timm("skresnet18", "sknet", "cnn", 224, 1)
timm("resnest14d", "resnest", "cnn", 224, 1)
timm("cs3darknet_s", "cspnet", "cnn", 256, 2)
timm("ese_vovnet19b_dw", "vovnet", "cnn", 224, 2)
timm("hrnet_w18_small", "hrnet", "cnn", 224, 1)
timm("inception_v3", "inception", "cnn", 299, 1)
timm("nf_regnet_b0", "nfnet", "cnn", 256, 1)
timm("repvgg_a0", "repvgg", "cnn", 224, 4, reparam=True)
timm("mobileone_s0", "mobileone", "cnn", 224, 1, reparam=True)
timm("repvit_m1", "repvit", "cnn", 224, 1, reparam=True)
timm("hgnetv2_b0", "hgnet", "cnn", 224, 4)
timm("mobilenetv4_conv_small", "mobilenetv4", "cnn", 224, 8)
timm("starnet_s1", "starnet", "cnn", 224, 2)
timm("fasternet_t0", "fasternet", "cnn", 224, 4)
timm("xception41", "xception", "cnn", 224, 1)
timm("tresnet_m", "tresnet", "cnn", 224, 1)
timm("botnet26t_256", "botnet", "hybrid", 256, 1)
# ---- timm hybrids / metaformers / pooling and MLP mixers
timm("fastvit_t8", "fastvit", "hybrid", 256, 1, reparam=True)
timm("efficientvit_b0", "efficientvit_mit", "hybrid", 224, 2)
timm("efficientvit_m0", "efficientvit_msra", "hybrid", 224, 4)
timm("edgenext_xx_small", "edgenext", "hybrid", 256, 1)
timm("poolformer_s12", "poolformer", "hybrid", 224, 1)
timm("efficientformer_l1", "efficientformer", "hybrid", 224, 1)
timm("mambaout_femto", "mambaout", "hybrid", 224, 1)
timm("inception_next_atto", "inception_next", "hybrid", 224, 2)
timm("levit_128s", "levit", "hybrid", 224, 4)
timm("coatnet_nano_rw_224", "coatnet", "hybrid", 224, 1)
timm("maxvit_nano_rw_256", "maxvit", "hybrid", 256, 1)
timm("shvit_s1", "shvit", "hybrid", 224, 4)
timm("convmixer_1024_20_ks9_p14", "convmixer", "mlp", 224, 1)
timm("mixer_s16_224", "mlp_mixer", "mlp", 224, 2)
timm("gmlp_ti16_224", "gmlp", "mlp", 224, 1)
timm("sequencer2d_s", "sequencer", "mlp", 224, 1)
# ---- timm vision transformers
timm("pit_ti_224", "pit", "vit", 224, 2)
timm("swin_tiny_patch4_window7_224", "swin", "vit", 224, 1)
timm("twins_svt_small", "twins", "vit", 224, 1)
timm("pvt_v2_b0", "pvt_v2", "vit", 224, 2)
timm("convit_tiny", "convit", "vit", 224, 1)
timm("gcvit_xxtiny", "gcvit", "vit", 224, 1)
timm("eva02_tiny_patch14_224", "eva02", "vit", 224, 1)
timm("mvitv2_tiny", "mvitv2", "vit", 224, 1)
timm("hiera_tiny_224", "hiera", "vit", 224, 1)

# ---- transformers: text encoders (bert, electra, roberta, mobilebert, bart are in the first dev set)
hf("hf_distilbert_s64_b4", "distilbert", "text", "DistilBertModel", "DistilBertConfig", {}, txt(4, 64, 30522))
hf("hf_albert_base_s128_b1", "albert", "text", "AlbertModel", "AlbertConfig",
   dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=12, embedding_size=128),
   txt(1, 128, 30000))
hf("hf_deberta_v2_xsmall_s128_b1", "deberta_v2", "text", "DebertaV2Model", "DebertaV2Config",
   dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, vocab_size=128100,
        relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_biased_input=False),
   txt(1, 128, 128100))
hf("hf_t5_small_encoder_s128_b2", "t5", "text", "T5EncoderModel", "T5Config",
   dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8), txt(2, 128, 32128))
hf("hf_mpnet_6l_s128_b2", "mpnet", "text", "MPNetModel", "MPNetConfig", dict(num_hidden_layers=6), txt(2, 128, 30527))
hf("hf_squeezebert_s128_b1", "squeezebert", "text", "SqueezeBertModel", "SqueezeBertConfig", {}, txt(1, 128, 30528))
hf("hf_convbert_small_s128_b2", "convbert", "text", "ConvBertModel", "ConvBertConfig",
   dict(hidden_size=256, num_attention_heads=4, intermediate_size=1024, embedding_size=128), txt(2, 128, 30522))
hf("hf_roformer_small_s256_b1", "roformer", "text", "RoFormerModel", "RoFormerConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, embedding_size=384),
   txt(1, 256, 50000))
hf("hf_esm2_t6_8m_s256_b4", "esm", "text", "EsmModel", "EsmConfig",
   dict(vocab_size=33, hidden_size=320, num_hidden_layers=6, num_attention_heads=20, intermediate_size=1280,
        position_embedding_type="rotary", pad_token_id=1, mask_token_id=32, token_dropout=False),
   txt(4, 256, 33))
hf("hf_clip_text_s77_b4", "clip", "text", "CLIPTextModel", "CLIPTextConfig", {}, txt(4, 77, 49408))
# ---- transformers: decoders, no KV cache (gpt2 is in the first dev set)
hf("hf_opt_6l_s128_b1", "opt", "decoder", "OPTModel", "OPTConfig",
   dict(NOCACHE, hidden_size=768, num_hidden_layers=6, ffn_dim=3072, num_attention_heads=12), txt(1, 128, 50272),
   call_kwargs=NOCACHE)
hf("hf_gpt_neo_4l_s256_b1", "gpt_neo", "decoder", "GPTNeoModel", "GPTNeoConfig",
   dict(NOCACHE, hidden_size=512, num_layers=4, num_heads=8, attention_types=[[["global", "local"], 2]],
        window_size=128), txt(1, 256, 50257), call_kwargs=NOCACHE)
hf("hf_llama_8l_s128_b2", "llama", "decoder", "LlamaModel", "LlamaConfig",
   dict(NOCACHE, hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
        num_key_value_heads=4, vocab_size=32000), txt(2, 128, 32000), call_kwargs=NOCACHE)
hf("hf_pythia_70m_s256_b1", "gpt_neox", "decoder", "GPTNeoXModel", "GPTNeoXConfig",
   dict(NOCACHE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
        vocab_size=50304), txt(1, 256, 50304), call_kwargs=NOCACHE)
hf("hf_bloom_6l_s128_b2", "bloom", "decoder", "BloomModel", "BloomConfig",
   dict(NOCACHE, hidden_size=512, n_layer=6, n_head=8, vocab_size=50000), txt(2, 128, 50000), call_kwargs=NOCACHE)
hf("hf_phi_6l_s128_b1", "phi", "decoder", "PhiModel", "PhiConfig",
   dict(NOCACHE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
        partial_rotary_factor=0.5, vocab_size=51200), txt(1, 128, 51200), call_kwargs=NOCACHE)
hf("hf_gpt_bigcode_6l_s128_b1", "gpt_bigcode", "decoder", "GPTBigCodeModel", "GPTBigCodeConfig",
   dict(NOCACHE, n_embd=512, n_layer=6, n_head=8, multi_query=True), txt(1, 128, 50257), call_kwargs=NOCACHE)
# ---- transformers: speech
hf("hf_whisper_tiny_encoder_b1", "whisper", "speech", "WhisperModel", "WhisperConfig",
   dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6, decoder_attention_heads=6,
        encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80),
   (("input_features", (1, 80, 3000), "f32", None),), sub="get_encoder")
hf("hf_wav2vec2_6l_1s_b2", "wav2vec2", "speech", "Wav2Vec2Model", "Wav2Vec2Config", dict(num_hidden_layers=6),
   (("input_values", (2, 16000), "f32", None),))
hf("hf_wavlm_4l_2s_b1", "wavlm", "speech", "WavLMModel", "WavLMConfig", dict(num_hidden_layers=4),
   (("input_values", (1, 32000), "f32", None),))
hf("hf_ast_6l_256f_b1", "ast", "speech", "ASTModel", "ASTConfig", dict(num_hidden_layers=6, max_length=256),
   (("input_values", (1, 256, 128), "f32", None),))
# ---- transformers: vision (convnextv2, dinov2 are in the first dev set)
hf("hf_segformer_b0_512_b1", "segformer", "seg", "SegformerForSemanticSegmentation", "SegformerConfig",
   dict(num_labels=150), img(1, 512), attr="logits")
hf("hf_yolos_tiny_384_b1", "yolos", "det", "YolosModel", "YolosConfig",
   dict(hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768, image_size=[384, 384]),
   img(1, 384))
hf("hf_cvt_13_224_b1", "cvt", "hybrid", "CvtModel", "CvtConfig", {}, img(1, 224))
hf("hf_bit_50_224_b1", "bit", "cnn", "BitModel", "BitConfig", {}, img(1, 224))

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
