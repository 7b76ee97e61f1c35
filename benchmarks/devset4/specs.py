"""The fourth development set's models: architecture families that none of the earlier sets has (the first dev set,
../shared/models/devset/export.py; the second, benchmarks/devset2/specs.py; the third, benchmarks/devset3/specs.py;
../shared/models/exported), as declarative specs read by benchmarks/devset2/export.py (`--specs
benchmarks/devset4/specs.py`).

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
The spec format is the second dev set's (`Spec`, with the third set's timm `config_kwargs`). Families already taken
(never use one of these here): every family in benchmarks/devset3/specs.py's docstring (dev1, dev2, exported), plus
dev3's: mobilenetv1, vgg, rdnet, nasnet, textnet, lambda_resnet, visformer, swiftformer, nextvit, vitamin, focalnet,
davit, nest, tnt, upernet, dpt, swin2sr, detr, rt_detr, timesformer, vitpose, vitmatte, encodec, hifigan, funnel,
xlnet, modernbert, big_bird, falcon, mpt, gemma2, qwen3, rwkv, mamba, wav2vec2_conformer, speech_to_text; and the
families the Hase zoo writes itself (alexnet, vgg, resnet, densenet, squeezenet, googlenet, mobilenetv1/v2/v3,
mnasnet, proxylessnas, shufflenetv2, bert, gpt, vit).
Close relatives of those are left out too: inception_v4/inception_resnet_v2 (inception; also over 150 MB), pnasnet
(nasnet), hgnet v1 (hgnetv2), tinynet/lcnet (efficientnet/mobilenetv3), mobilenetv5 (mobilenetv4), samvit/vitdet/
hieradet_sam2/vit_hybrid/siglip/owlvit/blip/vit_msn/vit_mae/imagegpt (plain ViTs, hiera, gpt2), pvt v1 (pvt_v2),
depth_anything/zoedepth-on-BEiT/glpn (dpt, segformer), conditional_detr/dab_detr/table_transformer (detr), d_fine/
rt_detr_v2 (rt_detr), mimi (encodec), parakeet/wav2vec2_bert/seamless_m4t/granite_speech (conformer), speecht5/
unispeech/data2vec_audio (wav2vec2), clap (swin), roberta_prelayernorm/xmod/ernie/megatron_bert/rembert/markuplm/
luke/ibert/deberta/tapas (bert, roberta, deberta_v2), pegasus/mbart/marian/blenderbot/m2m100/prophetnet (bart),
mt5/umt5/t5gemma (t5, gemma2), led/bigbird_pegasus (longformer, big_bird), xglm/biogpt/ctrl/openai-gpt (gpt2, opt),
mistral/qwen2/olmo/granite/phi3/glm/helium/smollm3 (llama), gptj/codegen (gpt_neo), mamba2/falcon_mamba (mamba).
timm 1.0.31 has no untaken family left (the new-enough inception_v4/inception_resnet_v2/pnasnet are over 150 MB), so
every model here is a transformers config.

Mix: 11 CNNs/hybrids/dense-prediction/detection/conv-audio models and 25 transformers/recurrent models (35 families;
perceiver twice, image and text), batch 1-8, images 224-384 px, token sequences 16-512, audio 0.4-2 s; every ONNX file
under 150 MB. Dropped because the TorchScript exporter (opset 17) or ONNX Runtime fails on them, or they need
something the venv lacks: superpoint, deformable_detr, eomt, diffllama, cohere, apertus, bamba, reformer, mra,
minimax, gpt_oss, qwen3_next, doge, efficientloftr, fastspeech2_conformer, uvdoc (see README.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import NOCACHE, Spec, img, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS: list[Spec] = []


def hf(name: str, family: str, kind: str, model: str, config: str, kw: dict, inputs: tuple, attr="last_hidden_state",
       sub="", call_kwargs=None) -> None:
    SPECS.append(Spec(name, family, kind, "hf", model, inputs, config, kw, attr, sub, dict(call_kwargs or {})))


def f32(name: str, *shape: int) -> tuple:
    return ((name, tuple(shape), "f32", None),)


def dec(name: str, family: str, model: str, config: str, kw: dict, b: int, s: int, vocab: int = 32000,
        mask: bool = True) -> None:
    """A decoder-only language model without KV cache."""
    hf(name, family, "decoder", model, config, dict(NOCACHE, vocab_size=vocab, **kw), txt(b, s, vocab, mask),
       call_kwargs=NOCACHE)


R18 = dict(model_type="resnet", depths=[2, 2, 2, 2], layer_type="basic", hidden_sizes=[64, 128, 256, 512])
LLAMA_S = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
               num_key_value_heads=4)

# ---- transformers: CNNs, hybrids, detection, dense prediction, conv audio
hf("hf_perceiver_conv_6l_224_b1", "perceiver", "hybrid", "PerceiverForImageClassificationConvProcessing",
   "PerceiverConfig", dict(d_model=322, num_latents=256, d_latents=512, num_blocks=1, num_self_attends_per_block=6,
                          num_self_attention_heads=8, num_cross_attention_heads=1, image_size=224),
   f32("inputs", 1, 3, 224, 224), attr="logits")
hf("hf_lw_detr_320_b1", "lw_detr", "det", "LwDetrModel", "LwDetrConfig", dict(projector_scale_factors=[1.0]),
   img(1, 320))
hf("hf_depth_pro_6l_256_b1", "depth_pro", "seg", "DepthProForDepthEstimation", "DepthProConfig",
   dict(patch_size=64, use_fov_model=False, fusion_hidden_size=128, intermediate_hook_ids=(5, 2),
        intermediate_feature_dims=(128, 128),
        image_model_config=dict(model_type="dinov2", hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
                                image_size=64, patch_size=16),
        patch_model_config=dict(model_type="dinov2", hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
                                image_size=64, patch_size=16),
        fov_model_config=dict(model_type="dinov2", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                              image_size=64, patch_size=16)),
   img(1, 256), attr="predicted_depth")
hf("hf_groupvit_vision_224_b2", "groupvit", "vit", "GroupViTVisionModel", "GroupViTVisionConfig", {}, img(2, 224))
hf("hf_dac_s_16k_b1", "dac", "speech", "DacModel", "DacConfig", dict(decoder_hidden_size=384),
   f32("input_values", 1, 1, 16384), attr="audio_values")
hf("hf_zoedepth_beit_s8_256_b1", "zoedepth", "seg", "ZoeDepthForDepthEstimation", "ZoeDepthConfig",
   dict(backbone_config=dict(model_type="beit", hidden_size=384, num_hidden_layers=8, num_attention_heads=6,
                             intermediate_size=1536, image_size=256, out_indices=[2, 4, 6, 8],
                             use_relative_position_bias=True, reshape_hidden_states=False),
        neck_hidden_sizes=[48, 96, 192, 384], fusion_hidden_size=128, bottleneck_features=128),
   img(1, 256), attr="predicted_depth")
hf("hf_vits_4l_s64_b1", "vits", "speech", "VitsModel", "VitsConfig",
   dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=2, ffn_dim=768, noise_scale=0.0,
        noise_scale_duration=0.0, vocab_size=38), txt(1, 64, 38), attr="waveform")
hf("hf_clipseg_vit_s_224_b1", "clipseg", "seg", "CLIPSegForImageSegmentation", "CLIPSegConfig",
   dict(text_config=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
        vision_config=dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                           image_size=224, patch_size=16),
        projection_dim=256, extract_layers=[3, 6, 9], reduce_dim=64),
   (("input_ids", (1, 16), "ids", 49408), ("pixel_values", (1, 3, 224, 224), "f32", None)), attr="logits")
hf("hf_ppocrv5_mobile_det_320_b4", "ppocr_db_det", "cnn", "PPOCRV5MobileDetForObjectDetection",
   "PPOCRV5MobileDetConfig", {}, img(4, 320))
hf("hf_ppocrv5_mobile_rec_96x320_b8", "ppocr_svtr_rec", "hybrid", "PPOCRV5MobileRecForTextRecognition",
   "PPOCRV5MobileRecConfig", {}, f32("pixel_values", 8, 3, 96, 320))  # the default backbone needs >= 96 px height
hf("hf_slanet_t24_320_b1", "slanet", "hybrid", "SLANetForTableRecognition", "SLANetConfig",
   dict(max_text_length=24), img(1, 320))
hf("hf_vibevoice_tok_encoder_s_2s_b1", "vibevoice_tokenizer", "speech", "VibeVoiceAcousticTokenizerEncoderModel",
   "VibeVoiceAcousticTokenizerEncoderConfig", dict(hidden_size=32, downsampling_ratios=[2, 4, 5, 8],
                                                   depths=[2, 2, 2, 2, 4]),
   f32("hidden_states", 1, 1, 48000))
hf("hf_timesfm_8l_512_b8", "timesfm", "timeseries", "TimesFmModel", "TimesFmConfig",
   dict(num_hidden_layers=8, hidden_size=512, intermediate_size=512, head_dim=64, num_attention_heads=8),
   (("past_values", (8, 512), "f32", None), ("past_values_padding", (8, 512), "ids", 1),
    ("freq", (8, 1), "ids", 3)))
# ---- transformers: text encoders with sparse, local or routed attention, and layout models
hf("hf_longformer_4l_s512_b1", "longformer", "text", "LongformerModel", "LongformerConfig",
   dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, attention_window=128,
        max_position_embeddings=1026), txt(1, 512, 30522))
hf("hf_longt5_tglobal_4l_s512_b1", "longt5", "text", "LongT5EncoderModel", "LongT5Config",
   dict(d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_heads=8, encoder_attention_type="transient-global",
        local_radius=63, global_block_size=16, vocab_size=32128), txt(1, 512, 32128))
hf("hf_pegasus_x_encoder_4l_s512_b1", "pegasus_x", "text", "PegasusXModel", "PegasusXConfig",
   dict(d_model=256, encoder_layers=4, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=1024, decoder_ffn_dim=1024, block_size=64, num_global_tokens=32, vocab_size=32000,
        max_position_embeddings=1024), txt(1, 512, 32000), sub="get_encoder")
hf("hf_switch_encoder_4l_e8_s128_b2", "switch_transformers", "text", "SwitchTransformersEncoderModel",
   "SwitchTransformersConfig", dict(d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_heads=8, num_experts=8,
                                    encoder_sparse_step=2, expert_capacity=256, vocab_size=32128),
   txt(2, 128, 32128))
hf("hf_yoso_4l_s512_b1", "yoso", "text", "YosoModel", "YosoConfig",
   dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, use_expectation=True,
        max_position_embeddings=514), txt(1, 512, 50265))
hf("hf_layoutlmv3_text_6l_s128_b2", "layoutlmv3", "text", "LayoutLMv3Model", "LayoutLMv3Config",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, coordinate_size=64,
        shape_size=64), txt(2, 128, 50265))
hf("hf_lilt_6l_s256_b1", "lilt", "text", "LiltModel", "LiltConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536), txt(1, 256, 30522))
hf("hf_prophetnet_3l_s128_b1", "prophetnet", "text", "ProphetNetModel", "ProphetNetConfig",
   dict(NOCACHE, hidden_size=256, encoder_ffn_dim=1024, decoder_ffn_dim=1024, num_encoder_layers=3,
        num_decoder_layers=3, num_encoder_attention_heads=4, num_decoder_attention_heads=4, ngram=2,
        vocab_size=30522),
   (("input_ids", (1, 128), "ids", 30522), ("decoder_input_ids", (1, 128), "ids", 30522)), call_kwargs=NOCACHE)
hf("hf_lxmert_s_36obj_s64_b2", "lxmert", "multimodal", "LxmertModel", "LxmertConfig",
   dict(hidden_size=256, num_attention_heads=4, intermediate_size=1024, l_layers=6, x_layers=3, r_layers=3),
   (("input_ids", (2, 64), "ids", 30522), ("visual_feats", (2, 36, 2048), "f32", None),
    ("visual_pos", (2, 36, 4), "f32", None)), attr="language_output")
hf("hf_ibert_quant_6l_s128_b2", "ibert", "text", "IBertModel", "IBertConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, quant_mode=True),
   txt(2, 128, 30522))
hf("hf_blip2_qformer_6l_q32_b2", "blip2_qformer", "multimodal", "Blip2QFormerModel", "Blip2QFormerConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536, encoder_hidden_size=768,
        cross_attention_frequency=2),
   (("query_embeds", (2, 32, 384), "f32", None), ("encoder_hidden_states", (2, 257, 768), "f32", None)))
hf("hf_perceiver_text_6l_s256_b1", "perceiver", "text", "PerceiverForMaskedLM", "PerceiverConfig",
   dict(d_model=256, num_latents=128, d_latents=512, num_blocks=1, num_self_attends_per_block=6,
        num_self_attention_heads=8, num_cross_attention_heads=4, max_position_embeddings=256),
   (("inputs", (1, 256), "ids", 262), ("attention_mask", (1, 256), "mask", None)), attr="logits")
# ---- transformers: decoders without KV cache (attention variants, recurrent and conv hybrids)
dec("hf_deepseek_v3_mla_6l_s128_b2", "deepseek_v3", "DeepseekV3Model", "DeepseekV3Config",
    dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=8,
         q_lora_rank=192, kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64,
         first_k_dense_replace=6, n_routed_experts=8, moe_intermediate_size=256, rope_scaling=None), 2, 128)
dec("hf_recurrent_gemma_6l_s128_b1", "recurrent_gemma", "RecurrentGemmaModel", "RecurrentGemmaConfig",
    dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, lru_width=512,
         attention_window_size=64), 1, 128)
dec("hf_lfm2_6l_s256_b1", "lfm2", "Lfm2Model", "Lfm2Config",
    dict(LLAMA_S, layer_types=["conv", "conv", "full_attention", "conv", "conv", "full_attention"]), 1, 256)
dec("hf_bitnet_6l_s256_b1", "bitnet", "BitNetModel", "BitNetConfig", LLAMA_S, 1, 256)
dec("hf_persimmon_6l_s128_b2", "persimmon", "PersimmonModel", "PersimmonConfig",
    dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8), 2, 128)
dec("hf_starcoder2_6l_s128_b4", "starcoder2", "Starcoder2Model", "Starcoder2Config",
    dict(LLAMA_S, sliding_window=64), 4, 128)
dec("hf_nemotron_6l_s256_b1", "nemotron", "NemotronModel", "NemotronConfig",
    dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4),
    1, 256)
dec("hf_gemma3n_6l_v16k_s128_b2", "gemma3n", "Gemma3nTextModel", "Gemma3nTextConfig",
    dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2,
         head_dim=64, sliding_window=64, vocab_size_per_layer_input=16000, hidden_size_per_layer_input=64,
         num_kv_shared_layers=0, laurel_rank=32, activation_sparsity_pattern=[0.0] * 6), 2, 128, vocab=16000)
dec("hf_exaone4_6l_s128_b2", "exaone4", "Exaone4Model", "Exaone4Config",
    dict(LLAMA_S, sliding_window=64, sliding_window_pattern=3), 2, 128)
dec("hf_hrm_text_4l_h2l2_s128_b1", "hrm", "HrmTextModel", "HrmTextConfig",
    dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=8, head_dim=64,
         H_cycles=2, L_cycles=2), 1, 128, vocab=16000)
dec("hf_xlstm_4l_s128_b1", "xlstm", "xLSTMModel", "xLSTMConfig",
    dict(hidden_size=512, num_hidden_layers=4, num_heads=4), 1, 128, mask=False)

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
