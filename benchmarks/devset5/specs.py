"""The fifth development set's models: architecture families that none of the earlier sets has (the first dev set,
../shared/models/devset/export.py; the second, benchmarks/devset2/specs.py; the third, benchmarks/devset3/specs.py;
the fourth, benchmarks/devset4/specs.py; ../shared/models/exported), as declarative specs read by
benchmarks/devset2/export.py (`--specs benchmarks/devset5/specs.py`).

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
The spec format is the second dev set's (`Spec`, with the third set's timm `config_kwargs`). Families already taken
(never use one of these here): every family in benchmarks/devset4/specs.py's docstring (dev1, dev2, dev3, exported and
their close relatives), plus dev4's: perceiver, lw_detr, depth_pro, groupvit, dac, zoedepth, vits, clipseg,
ppocr_db_det, ppocr_svtr_rec, slanet, vibevoice_tokenizer, timesfm, longformer, longt5, pegasus_x,
switch_transformers, yoso, layoutlmv3, lilt, prophetnet, lxmert, ibert, blip2_qformer, deepseek_v3, recurrent_gemma,
lfm2, bitnet, persimmon, starcoder2, nemotron, gemma3n, exaone4, hrm, xlstm; and the families the Hase zoo writes
itself (alexnet, vgg, resnet, densenet, squeezenet, googlenet, mobilenetv1/v2/v3, mnasnet, proxylessnas,
shufflenetv2, bert, gpt, vit).
Close relatives of those are left out too: rf_detr (lw_detr), deimv2 (d_fine), pp_doclayout (rt_detr), slanext
(slanet), pp_ocrv5_server/pp_ocrv6 (ppocr), pp_lcnet (lcnet), chmv2/tipsv2_dpt (dpt), pixio/aimv2/ijepa/mlcd/
pixtral/seggpt/vjepa2 (plain ViTs), dinov3_convnext (convnext), edgetam/sam2/sam_hq (sam, hiera), timesfm2_5
(timesfm), lfm2_moe/lfm3 (lfm2), deepseek_v32/longcat_flash/youtu (deepseek_v3), gemma3/gemma4 (gemma2/gemma3n),
xlm/flaubert/gte/nomic_bert/eurobert/ultrabert/esmc (bert, roberta, roformer, modernbert, esm), fsmt/mvp/plbart
(bart), udop/pop2piano (t5), wavtokenizer/pocket_tts_audio_tokenizer (encodec, mimi), xcodec2/neucodec
(wav2vec2_bert), lasr/canary/cohere_asr (conformer), omniasr/sew/sew_d (wav2vec2), csm/moshi/kyutai (llama, mimi),
seresnet/ecaresnet (resnet). Nearest earlier relatives of some that are kept (named in README.md): cspnext (cspnet's
cs3darknet), lcnetv2 (lcnet), bat and gcnet (ResNeXt/ResNet with a non-local or global-context block, as botnet,
lambda_resnet and sknet were), sam (its image encoder is the ViTDet-style samvit), pe_audio (a small DAC encoder
front end), bark (GPT-2-style blocks, non-causal over 8 codebooks).

Mix: 18 image/video models (14 CNNs, hybrids, vision transformers, video and segmentation models, 4 image + text
models) and 18 text/decoder/speech/time-series models (36 families), batch 1-4 (x-clip's 8 frames and musicgen's 4
codebooks are the first axis), images 32x128-512 px, token sequences 32-256, audio 2 s; every ONNX file under
150 MB. MoE models use transformers' eager experts loop (`experts_implementation="eager"`,
traced with the routing of the export input; the default grouped_mm path calls `aten::histc`, which opset 17 lacks).
Dropped because the TorchScript exporter (opset 17) or ONNX Runtime fails on them, or their inputs cannot be made
valid by the exporter's random feeds: mask2former, pix2struct, vilt, sapiens2, jetmoe, cpmant, blt, informer,
nllb_moe, moonshine_streaming, nemotron_h, tvp with a BatchNorm backbone (see README.md). MiniMax, dropped from the
fourth set for `aten::histc`, exports with the eager experts loop and is used here.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import NOCACHE, SpecList, f32, ids, ones, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec


R18 = dict(model_type="resnet", depths=[2, 2, 2, 2], layer_type="basic", hidden_sizes=[64, 128, 256, 512])
EAGER_MOE = dict(experts_implementation="eager")  # a Python loop over the experts the routing hits (exportable)

# ---- timm CNNs and hybrids (modules no earlier set drew from)
timm("efficientvim_m1", "efficientvim", "hybrid", 224, 4)  # hidden-state-mixer SSD blocks
timm("iformer_t", "iformer", "hybrid", 224, 4)
timm("lowformer_b0", "lowformer", "hybrid", 224, 1)
timm("cpubone_s0", "cpubone", "cnn", 224, 2)
timm("cspnext_tiny", "cspnext", "cnn", 256, 2)  # RTMDet's backbone: large-kernel depthwise CSP blocks
timm("lcnetv2_small", "lcnetv2", "cnn", 224, 4)  # PP-LCNetV2: re-parameterisable multi-kernel depthwise blocks
timm("bat_resnext26ts", "bat", "cnn", 256, 1)  # bilinear attentional transform blocks in a ResNeXt
timm("gcresnet33ts", "gcnet", "cnn", 256, 1)  # global-context blocks
# ---- transformers: vision (CNN, video, dense prediction, scene text)
hf("hf_uvdoc_448x320_b1", "uvdoc", "cnn", "UVDocModel", "UVDocConfig",
   dict(backbone_config=dict(model_type="uvdoc_backbone", out_features=[f"stage{i}" for i in range(1, 7)])),
   f32("pixel_values", 1, 3, 448, 320))  # the default out_features (stage6 only) does not match the bridge connector
hf("hf_xclip_vision_s32_8f_b1", "x_clip", "video", "XCLIPVisionModel", "XCLIPVisionConfig",
   dict(hidden_size=384, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=6, num_frames=8,
        patch_size=32, mit_hidden_size=256, mit_intermediate_size=1024, mit_num_attention_heads=4),
   f32("pixel_values", 8, 3, 224, 224))  # one clip of 8 frames (cross-frame message tokens)
hf("hf_mgpstr_tiny_32x128_b4", "mgp_str", "vit", "MgpstrForSceneTextRecognition", "MgpstrConfig",
   dict(hidden_size=192, num_attention_heads=3), f32("pixel_values", 4, 3, 32, 128), attr="logits")
hf("hf_sam_s6l_512_b1", "sam", "seg", "SamModel", "SamConfig",
   dict(vision_config=dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, mlp_dim=1536, image_size=512,
                           window_size=8, global_attn_indexes=[1, 3, 5]),
        prompt_encoder_config=dict(image_size=512, image_embedding_size=32)),
   f32("pixel_values", 1, 3, 512, 512) + f32("input_points", 1, 1, 1, 2), attr="pred_masks")
hf("hf_videoprism_s_8f_144_b1", "videoprism", "video", "VideoPrismVisionModel", "VideoPrismVisionConfig",
   dict(image_size=144, num_frames=8, tubelet_size=[1, 18, 18], hidden_size=384, num_attention_heads=6,
        intermediate_size=1536, num_spatial_layers=8, num_temporal_layers=4),
   f32("pixel_values_videos", 1, 8, 3, 144, 144))
hf("hf_tvp_convnext_4f_224_b1", "tvp", "video", "TvpModel", "TvpConfig",
   dict(backbone_config=dict(model_type="convnext", depths=[2, 2, 6, 2], hidden_sizes=[64, 128, 256, 512],
                             out_features=["stage4"]),
        num_frames=4, max_img_size=224, visual_prompt_size=32,
        hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=6),
   ids("input_ids", 30522, 1, 32) + f32("pixel_values", 1, 4, 3, 224, 224) + ones("attention_mask", 1, 32))
# ---- transformers: multimodal (image + text)
hf("hf_bridgetower_t_224_s40_b1", "bridgetower", "multimodal", "BridgeTowerModel", "BridgeTowerConfig",
   dict(hidden_size=256, num_attention_heads=4, num_hidden_layers=3,
        text_config=dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024),
        vision_config=dict(hidden_size=256, num_hidden_layers=6, image_size=224, patch_size=16)),
   ids("input_ids", 50265, 1, 40) + ones("attention_mask", 1, 40) + f32("pixel_values", 1, 3, 224, 224),
   attr="text_features")
hf("hf_git_6l_224_s32_b1", "git", "multimodal", "GitModel", "GitConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536,
        vision_config=dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)),
   ids("input_ids", 30522, 1, 32) + ones("attention_mask", 1, 32) + f32("pixel_values", 1, 3, 224, 224))
hf("hf_flava_s_224_s40_b1", "flava", "multimodal", "FlavaModel", "FlavaConfig",
   dict(hidden_size=384, projection_dim=256,
        image_config=dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536),
        text_config=dict(hidden_size=384, num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536),
        multimodal_config=dict(hidden_size=384, num_hidden_layers=3, num_attention_heads=6, intermediate_size=1536)),
   ids("input_ids", 30522, 1, 40) + f32("pixel_values", 1, 3, 224, 224) + ones("attention_mask", 1, 40),
   attr="multimodal_embeddings")
hf("hf_idefics_4l_224_s64_b1", "idefics", "multimodal", "IdeficsModel", "IdeficsConfig",
   dict(NOCACHE, vocab_size=16000, hidden_size=384, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=6,
        cross_layer_interval=2, use_resampler=True,
        vision_config=dict(embed_dim=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=6,
                           patch_size=16),
        perceiver_config=dict(use_resampler=True, resampler_n_latents=32, resampler_depth=2, resampler_n_heads=6,
                              resampler_head_dim=64)),
   ids("input_ids", 16000, 1, 64) + ones("attention_mask", 1, 64) + f32("pixel_values", 1, 1, 3, 224, 224)
   + ones("image_attention_mask", 1, 64, 1), call_kwargs=NOCACHE)  # Flamingo-style gated cross-attention
# ---- transformers: decoders without KV cache (hybrid SSMs, linear attention, normalised, MoE) and text encoders
dec("hf_zamba_8l_s128_b1", "zamba", "ZambaModel", "ZambaConfig",
    dict(hidden_size=512, attention_hidden_size=1024, intermediate_size=1536, num_hidden_layers=8,
         num_attention_heads=8, attention_head_dim=128, num_key_value_heads=8, attn_layer_period=4,
         attn_layer_offset=2, mamba_dt_rank=32, use_mamba_kernels=False,
         layers_block_type=["mamba", "mamba", "hybrid", "mamba", "mamba", "mamba", "hybrid", "mamba"]), 1, 128)
dec("hf_jamba_8l_e4_s128_b1", "jamba", "JambaModel", "JambaConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=384, num_hidden_layers=8, num_attention_heads=8,
         num_key_value_heads=4, attn_layer_period=4, attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1,
         num_experts=4, mamba_dt_rank=32, use_mamba_kernels=False), 1, 128)
dec("hf_kimi_linear_6l_s128_b1", "kimi_linear", "KimiLinearModel", "KimiLinearConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=1536, moe_intermediate_size=256, num_hidden_layers=6,
         num_attention_heads=8, num_key_value_heads=8, kv_lora_rank=128, qk_rope_head_dim=32, v_head_dim=64,
         qk_nope_head_dim=64, num_experts=8, num_experts_per_token=2, linear_head_dim=64, linear_num_heads=8,
         head_dim=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
         layer_types=["linear_attention", "linear_attention", "full_attention"] * 2,
         mlp_layer_types=["dense"] + ["sparse"] * 5), 1, 128)  # KDA delta-rule chunks + MLA
dec("hf_dory_ngpt_12l_s256_b1", "dory", "DoryModel", "DoryConfig",
    dict(hidden_size=512, intermediate_size=1536, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
         num_hidden_layers=12, layer_types=["sliding_attention", "mlp", "full_attention", "mlp"] * 3,
         n_input_layers=4, n_recurrent_layers=4, n_output_layers=4, n_recurrent_loops=2, sliding_window=64), 1, 256)
dec("hf_minimax_6l_e4_s256_b1", "minimax", "MiniMaxModel", "MiniMaxConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=384, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=4, head_dim=64, num_local_experts=4, num_experts_per_tok=2, block_size=64,
         layer_types=["linear_attention", "linear_attention", "full_attention"] * 2), 1, 256)  # lightning attention
dec("hf_mixtral_4l_e8_s256_b1", "mixtral", "MixtralModel", "MixtralConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=384, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2), 1, 256)
dec("hf_laguna_6l_e6_s128_b2", "laguna", "LagunaModel", "LagunaConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=4, head_dim=64, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=256,
         shared_expert_intermediate_size=256, layer_types=["full_attention"] * 6, num_attention_heads_per_layer=[8] * 6,
         mlp_layer_types=["dense"] + ["sparse"] * 5), 2, 128)  # softplus-gated attention heads + MoE
dec("hf_zaya_6l_e4_s128_b2", "zaya", "ZayaModel", "ZayaConfig",
    dict(**EAGER_MOE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
         moe_intermediate_size=512, num_experts=4, layer_types=["hybrid"] * 6), 2, 128)  # CCA attention + MLP router
dec("hf_inkling_6l_e8_s128_b2", "inkling", "InklingTextModel", "InklingTextConfig",
    dict(**EAGER_MOE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
         swa_num_attention_heads=8, swa_num_key_value_heads=4, swa_head_dim=64, sliding_window_size=64,
         intermediate_size=1024, moe_intermediate_size=192, n_routed_experts=8, num_experts_per_tok=2,
         n_shared_experts=1, pad_token_id=0, layer_types=["hybrid_sliding", "hybrid_sliding", "hybrid"] * 2,
         mlp_layer_types=["dense"] + ["sparse"] * 5), 2, 128)  # short convs + relative logits + MoE
dec("hf_privacy_filter_4l_e8_s256_b1", "openai_privacy_filter", "OpenAIPrivacyFilterModel",
    "OpenAIPrivacyFilterConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=384, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=4, pad_token_id=0, eos_token_id=0), 1, 256,
    kind="text")  # bidirectional sliding-window MoE encoder
hf("hf_neomme_6l_s256_b1", "neomme", "text", "NeoMMEModel", "NeoMMEConfig",
   dict(vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=4, layer_types=["sliding_attention"] * 2 + ["full_attention"] + ["sliding_attention"] * 2
        + ["full_attention"]), txt(1, 256, 32000))
hf("hf_clvp_encoder_8l_s128_b2", "clvp", "text", "ClvpEncoder", "ClvpEncoderConfig",
   dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=8),
   ids("input_ids", 256, 2, 128) + ones("attention_mask", 2, 128))
# ---- transformers: speech and music
hf("hf_dia_4l_s64_t128_b1", "dia", "speech", "DiaModel", "DiaConfig",
   dict(NOCACHE, encoder_config=dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                                     num_key_value_heads=8, head_dim=64, intermediate_size=1536),
        decoder_config=dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                            head_dim=64, intermediate_size=1536, cross_num_attention_heads=8, cross_head_dim=64,
                            cross_num_key_value_heads=8, cross_hidden_size=512)),
   ids("input_ids", 256, 1, 64) + ids("decoder_input_ids", 1024, 1, 128, 9), call_kwargs=NOCACHE)
hf("hf_musicgen_6l_4cb_s256_b1", "musicgen", "speech", "MusicgenModel", "MusicgenDecoderConfig",
   dict(NOCACHE, hidden_size=512, num_hidden_layers=6, num_attention_heads=8, ffn_dim=2048),
   ids("input_ids", 2048, 4, 256), call_kwargs=NOCACHE)  # batch 1 x 4 codebooks (the first axis is 4)
hf("hf_bark_fine_6l_8cb_s256_b1", "bark", "speech", "BarkFineModel", "BarkFineConfig",
   dict(num_layers=6, num_heads=8, hidden_size=512, input_vocab_size=1056, output_vocab_size=1056),
   ids("input_ids", 1024, 1, 256, 8), attr="logits", call_kwargs=dict(codebook_idx=2))
hf("hf_funasr_sanm_10l_300f_b1", "fun_asr_sanm", "speech", "FunAsrNanoEncoder", "FunAsrNanoEncoderConfig",
   dict(num_hidden_layers=10), f32("input_features", 1, 300, 560) + ones("input_features_mask", 1, 300))
hf("hf_pe_audio_enc_6l_2s_b1", "pe_audio", "speech", "PeAudioEncoder", "PeAudioEncoderConfig",
   dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=8,
        head_dim=64, dac_config=dict(encoder_hidden_size=32)), f32("input_values", 1, 1, 32000))
# ---- transformers: time series
hf("hf_tst_3l_96_b4", "time_series_transformer", "timeseries", "TimeSeriesTransformerModel",
   "TimeSeriesTransformerConfig",
   dict(NOCACHE, prediction_length=24, context_length=96, d_model=256, encoder_layers=3, decoder_layers=2,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
        num_time_features=2),
   f32("past_values", 4, 103) + f32("past_time_features", 4, 103, 2) + ones("past_observed_mask", 4, 103)
   + f32("future_values", 4, 24) + f32("future_time_features", 4, 24, 2), call_kwargs=NOCACHE)

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert len(SPECS) == 36 and len({s.family for s in SPECS}) == 36, "36 models of 36 families"
