"""The third development set's models: architecture families that neither the first dev set
(../shared/models/devset/export.py), the second (benchmarks/devset2/specs.py) nor ../shared/models/exported have, as
declarative specs read by benchmarks/devset2/export.py (`--specs benchmarks/devset3/specs.py`).

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
The spec format is the second dev set's (`Spec`); a timm spec may pass constructor arguments (`config_kwargs`, e.g. a
smaller BEiT) and a transformers model may return a bare tensor (a vocoder). Families already taken (never use one
of these here; the dev sets' models.tsv list them):
  dev1: resnet, regnet(x/y), mobilenetv2, mobilenetv3, lcnet, mnasnet, spnasnet, fbnet, hardcorenas, ghostnet(v2),
        efficientnet, gernet, convnext(v2), dla, densenet, selecsls, repghost, mobilevit, efficientformerv2, tiny_vit,
        deit, xcit, cait, coat, resmlp, crossvit, bert, electra, roberta, mobilebert, gpt2, bart, dinov2
  dev2: resnext, res2net, dpn, mixnet, rexnet, sknet, resnest, cspnet, vovnet, hrnet, inception, nfnet, repvgg,
        mobileone, repvit, hgnet, mobilenetv4, starnet, fasternet, xception, tresnet, botnet, fastvit,
        efficientvit_mit, efficientvit_msra, edgenext, poolformer, efficientformer, mambaout, inception_next, levit,
        coatnet, maxvit, shvit, convmixer, mlp_mixer, gmlp, sequencer, pit, swin, twins, pvt_v2, convit, gcvit, eva02,
        mvitv2, hiera, distilbert, albert, deberta_v2, t5, mpnet, squeezebert, convbert, roformer, esm, clip, opt,
        gpt_neo, llama, gpt_neox, bloom, phi, gpt_bigcode, whisper, wav2vec2, wavlm, ast, segformer, yolos, cvt, bit
  exported: mobilenetv2, mnasnet, vit, convnext, bert, gpt2
Close relatives of those are left out too (tinynet/efficientnetv2 = efficientnet, ghostnetv3, mobilevitv2, regnetz,
seresnext/ecaresnet = resnet(xt), caformer/convformer = poolformer's MetaFormer, swinv2, deit3, beit, vivit/videomae/
vitdet (plain ViTs), xlm-roberta, glpn = segformer, hubert/data2vec-audio/unispeech/sew = wav2vec2, speech_to_text
(whisper-like), mistral/qwen2/stablelm = llama, gptj = falcon/gpt_neo). FNet does not export (complex FFT).

Mix: 20 CNNs/hybrids (counting the conv audio encoder and vocoder) and 16 transformers/recurrent models, batch 1-4,
images 64-384 px, sequences 64-1024, audio 1-2 s; every ONNX file under 150 MB. Dropped because the TorchScript
exporter (opset 17) or ONNX Runtime fails on them: halonet, csatv2, univnet, volo, moonshine, nystromformer, patchtst,
patchtsmixer, canine (see README.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import NOCACHE, Spec, img, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS: list[Spec] = []


def timm(model: str, family: str, kind: str, res: int, b: int, name: str = "", **kw) -> None:
    tag = "" if model.endswith(str(res)) else f"_{res}"
    SPECS.append(Spec(name or f"timm_{model}{tag}_b{b}", family, kind, "timm", model, img(b, res), config_kwargs=kw))


def hf(name: str, family: str, kind: str, model: str, config: str, kw: dict, inputs: tuple, attr="last_hidden_state",
       sub="", call_kwargs=None) -> None:
    SPECS.append(Spec(name, family, kind, "hf", model, inputs, config, kw, attr, sub, dict(call_kwargs or {})))


def f32(name: str, *shape: int) -> tuple:
    return ((name, tuple(shape), "f32", None),)


# ---- timm CNNs and hybrids
timm("mobilenetv1_100", "mobilenetv1", "cnn", 224, 4)
timm("vgg11_bn", "vgg", "cnn", 224, 1, name="timm_vgg11_bn_mlp0125_224_b1", mlp_ratio=0.125)
timm("rdnet_tiny", "rdnet", "cnn", 224, 1)
timm("lambda_resnet26t", "lambda_resnet", "hybrid", 256, 1)
timm("visformer_tiny", "visformer", "hybrid", 224, 2)
timm("swiftformer_xs", "swiftformer", "hybrid", 224, 4)
timm("nextvit_small", "nextvit", "hybrid", 224, 1)
timm("vitamin_small_224", "vitamin", "hybrid", 224, 1)
timm("focalnet_tiny_srf", "focalnet", "hybrid", 224, 1)
timm("nasnetalarge", "nasnet", "cnn", 224, 1, name="timm_nasnet_a_mobile_224_b1", stem_size=32, num_features=1056)
# ---- timm vision transformers
timm("davit_tiny", "davit", "vit", 224, 1)
timm("nest_tiny_jx", "nest", "vit", 224, 1)
timm("tnt_s_patch16_224", "tnt", "vit", 224, 1)
# ---- transformers: vision, video, dense prediction
hf("hf_textnet_base_384_b1", "textnet", "cnn", "TextNetModel", "TextNetConfig", {}, img(1, 384))
hf("hf_upernet_convnext_s_192_b1", "upernet", "seg", "UperNetForSemanticSegmentation", "UperNetConfig",
   dict(backbone_config=dict(model_type="convnext", depths=[2, 2, 6, 2], hidden_sizes=[64, 128, 256, 512],
                             out_features=["stage1", "stage2", "stage3", "stage4"]),
        hidden_size=256, auxiliary_in_channels=256, num_labels=150, use_auxiliary_head=False),
   img(1, 192), attr="logits")  # 192: the pooling pyramid (1, 2, 3, 6) needs a 6x6 (or 12x12) last stage
hf("hf_dpt_vit_s_256_b1", "dpt", "seg", "DPTForDepthEstimation", "DPTConfig",
   dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, image_size=256,
        neck_hidden_sizes=[48, 96, 192, 384], fusion_hidden_size=128, backbone_out_indices=[2, 5, 8, 11]),
   img(1, 256), attr="predicted_depth")
hf("hf_swin2sr_4x4_x2_64_b1", "swin2sr", "sr", "Swin2SRForImageSuperResolution", "Swin2SRConfig",
   dict(embed_dim=60, depths=[4, 4, 4, 4], num_heads=[6, 6, 6, 6], window_size=8, upscale=2, image_size=64,
        upsampler="pixelshuffledirect"),
   img(1, 64), attr="reconstruction")
hf("hf_detr_r18_3l_384_b1", "detr", "det", "DetrModel", "DetrConfig",
   dict(use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=dict(model_type="resnet", depths=[2, 2, 2, 2], layer_type="basic",
                             hidden_sizes=[64, 128, 256, 512], out_features=["stage4"]),
        d_model=256, encoder_layers=3, decoder_layers=3, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
        num_queries=100),
   img(1, 384))
hf("hf_timesformer_s_4l_4x160_b1", "timesformer", "video", "TimesformerModel", "TimesformerConfig",
   dict(image_size=160, num_frames=4, hidden_size=384, num_hidden_layers=4, num_attention_heads=6,
        intermediate_size=1536),
   f32("pixel_values", 1, 4, 3, 160, 160))
hf("hf_vitpose_s_256x192_b2", "vitpose", "hybrid", "VitPoseForPoseEstimation", "VitPoseConfig",
   dict(backbone_config=dict(model_type="vitpose_backbone", hidden_size=384, num_hidden_layers=12,
                             num_attention_heads=6, mlp_ratio=4, image_size=[256, 192], out_indices=[12]),
        use_simple_decoder=False, num_labels=17),
   f32("pixel_values", 2, 3, 256, 192), attr="heatmaps")
hf("hf_vitmatte_s_256_b1", "vitmatte", "hybrid", "VitMatteForImageMatting", "VitMatteConfig",
   dict(backbone_config=dict(model_type="vitdet", num_channels=4, hidden_size=384, num_hidden_layers=12,
                             num_attention_heads=6, image_size=256, pretrain_image_size=224, window_size=8,
                             window_block_indices=[0, 1, 3, 4, 6, 7, 9, 10], use_relative_position_embeddings=True,
                             out_features=["stage12"]),
        hidden_size=384, convstream_hidden_sizes=[48, 96, 192], fusion_hidden_sizes=[256, 128, 64, 32]),
   f32("pixel_values", 1, 4, 256, 256), attr="alphas")
hf("hf_rtdetr_r18_320_b1", "rt_detr", "det", "RTDetrModel", "RTDetrConfig",
   dict(backbone_config=dict(model_type="rt_detr_resnet", depths=[2, 2, 2, 2], layer_type="basic",
                             hidden_sizes=[64, 128, 256, 512], downsample_in_bottleneck=False,
                             out_features=["stage2", "stage3", "stage4"]),
        encoder_in_channels=[128, 256, 512], encoder_hidden_dim=256, decoder_layers=3, num_queries=300),
   img(1, 320))
hf("hf_encodec_24k_encoder_1s_b2", "encodec", "speech", "EncodecModel", "EncodecConfig", {},
   f32("hidden_states", 2, 1, 24000), sub="get_encoder")
# ---- transformers: text encoders
hf("hf_funnel_base_222_s256_b1", "funnel", "text", "FunnelBaseModel", "FunnelConfig",
   dict(block_sizes=[2, 2, 2], d_model=512, n_head=8, d_head=64, d_inner=2048), txt(1, 256, 30522))
hf("hf_xlnet_6l_s128_b2", "xlnet", "text", "XLNetModel", "XLNetConfig",
   dict(d_model=512, n_layer=6, n_head=8, d_inner=2048, vocab_size=32000, use_mems_eval=False), txt(2, 128, 32000))
hf("hf_modernbert_9l_s512_b1", "modernbert", "text", "ModernBertModel", "ModernBertConfig",
   dict(hidden_size=384, num_hidden_layers=9, num_attention_heads=6, intermediate_size=576, local_attention=128,
        global_attn_every_n_layers=3, vocab_size=50368), txt(1, 512, 50368))
hf("hf_bigbird_4l_s1024_b1", "big_bird", "text", "BigBirdModel", "BigBirdConfig",
   dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, block_size=64,
        num_random_blocks=3, attention_type="block_sparse"), txt(1, 1024, 50358))
# ---- transformers: decoders, no KV cache
hf("hf_falcon_6l_s128_b2", "falcon", "decoder", "FalconModel", "FalconConfig",
   dict(NOCACHE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, vocab_size=32768,
        new_decoder_architecture=False, multi_query=True, parallel_attn=True, alibi=False),
   txt(2, 128, 32768), call_kwargs=NOCACHE)
hf("hf_mpt_6l_s256_b1", "mpt", "decoder", "MptModel", "MptConfig",
   dict(NOCACHE, d_model=512, n_layers=6, n_heads=8, vocab_size=32000), txt(1, 256, 32000), call_kwargs=NOCACHE)
hf("hf_gemma2_6l_s128_b2", "gemma2", "decoder", "Gemma2Model", "Gemma2Config",
   dict(NOCACHE, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, vocab_size=32000, sliding_window=64), txt(2, 128, 32000),
   call_kwargs=NOCACHE)
hf("hf_qwen3_6l_s256_b1", "qwen3", "decoder", "Qwen3Model", "Qwen3Config",
   dict(NOCACHE, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, vocab_size=32000), txt(1, 256, 32000), call_kwargs=NOCACHE)
hf("hf_rwkv_4l_s64_b1", "rwkv", "decoder", "RwkvModel", "RwkvConfig",
   dict(NOCACHE, hidden_size=256, num_hidden_layers=4, attention_hidden_size=256, intermediate_size=1024,
        vocab_size=50277), (("input_ids", (1, 64), "ids", 50277),), call_kwargs=NOCACHE)
hf("hf_mamba_4l_s64_b1", "mamba", "decoder", "MambaModel", "MambaConfig",
   dict(NOCACHE, hidden_size=256, num_hidden_layers=4, state_size=16, vocab_size=50280),
   (("input_ids", (1, 64), "ids", 50280),), call_kwargs=NOCACHE)
# ---- transformers: speech
hf("hf_w2v2_conformer_6l_2s_b1", "wav2vec2_conformer", "speech", "Wav2Vec2ConformerModel",
   "Wav2Vec2ConformerConfig", dict(hidden_size=384, num_attention_heads=6, intermediate_size=1536, num_hidden_layers=6,
   position_embeddings_type="rotary"), f32("input_values", 1, 32000))
hf("hf_speech2text_6l_10s_b1", "speech_to_text", "speech", "Speech2TextModel", "Speech2TextConfig",
   dict(d_model=256, encoder_layers=6, encoder_attention_heads=4, encoder_ffn_dim=1024, decoder_layers=2,
        decoder_attention_heads=4, decoder_ffn_dim=1024),
   f32("input_features", 1, 1000, 80), sub="get_encoder")
hf("hf_hifigan_100f_b1", "hifigan", "speech", "SpeechT5HifiGan", "SpeechT5HifiGanConfig", {},
   f32("spectrogram", 1, 100, 80))

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
