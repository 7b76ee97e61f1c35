"""The seventh development set's models: architecture families that none of the earlier sets has (the first dev set,
../shared/models/devset/export.py; the second to sixth, benchmarks/devset2..6/specs.py; ../shared/models/exported),
as declarative specs read by benchmarks/devset2/export.py (`--specs benchmarks/devset7/specs.py`).

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
The spec format is the second dev set's (`Spec`, with the third set's timm `config_kwargs`). Families already taken
(never use one of these here): every family in benchmarks/devset6/specs.py's docstring (dev1 to dev5, exported, the
Hase zoo's own families and their close relatives), plus dev6's: emu3, chameleon, dalle_dvae, mllama, deepseek_ocr2,
condconv, kosmos2, ovis2, florence2, internvl, paligemma, got_ocr2, janus, fuyu, mistral3, llava, nanochat, jais2,
dbrx, muse_spark, mimo_v2_flash, phimoe, flint, beam, olmoe, qwen2_moe, dots1, granitemoe, trocr, evolla,
decision_transformer, nemotron3_diarization, qwen3_asr, glmasr, dots3_note_audio, higgs_audio_v2.
Untaken families are nearly exhausted: timm has none left, and most transformers classes that are not yet taken are
vision-language models or Llama/MoE decoders (dev6 has 10 VLMs and 10 MoE decoders). So this set takes families that
the earlier sets left out as close relatives but whose compute differs, and names the nearest earlier relative of
each in README.md: swinv2 (swin), mobilevitv2 (mobilevit), ghostnetv3 (ghostnetv2), regnetz (regnet), darknet
(cspnet), hgnet_v1 (hgnetv2), mobileclip_mci (fastvit), deeplabv3 (mobilenetv2 + an ASPP head), pvt (pvt_v2),
conditional_detr/dab_detr (detr), glpn (segformer), depth_anything (dpt, dinov2), ppocr_server_det (ppocr_db_det,
hgnetv2), clap (swin), parakeet/wav2vec2_bert (wav2vec2_conformer), sew_d (wav2vec2, deberta_v2), speecht5
(wav2vec2, bart), m2m_100 (bart), umt5 (t5), led (longformer, bart), timesfm2_5 (timesfm), tapas (bert), imagegpt
(gpt2), minicpm3 (deepseek_v3's MLA), gpt_neox_japanese (gpt_neox), stablelm (gpt_neox, phi), modernbert_decoder
(modernbert).

Mix: 15 image models (7 timm CNNs/hybrids; segmentation, depth, 2 DETR detectors, an OCR text detector, PVT, an
autoregressive pixel model), 5 speech/audio encoders (one with its text decoder), 3 full encoder-decoders (both
halves), a time-series model, a table encoder and 4 dense decoders (no mixture-of-experts); batch 1-8, images
224-512 px (ImageGPT 32x32 tokens), token sequences 64-1024, audio 1-10 s; every ONNX file under 150 MB.
Dropped because the TorchScript exporter (opset 17) fails on them: glm4, esmfold (see README.md). Not tried because
earlier sets found their blocks unexportable: deformable-attention detectors (grounding_dino, omdet_turbo, oneformer:
GridSample, as dev4's deformable_detr), Mamba-2 hybrids (falcon_h1, granitemoehybrid, zamba2: as dev4's bamba),
superglue/lightglue (need SuperPoint, as dev4's).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import NOCACHE, SpecList, f32, ids, img, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec


R18 = dict(model_type="resnet", depths=[2, 2, 2, 2], layer_type="basic", hidden_sizes=[64, 128, 256, 512])
# PP-OCRv5 server det's intra-class blocks (its default config leaves them None): [kernel, stride, padding]
INTRACLASS = dict(
    reduce_channel=[1, 1, 0], return_channel=[1, 1, 0],
    vertical_long_to_small_conv_longratio=[[7, 1], 1, [3, 0]],
    vertical_long_to_small_conv_midratio=[[5, 1], 1, [2, 0]],
    vertical_long_to_small_conv_shortratio=[[3, 1], 1, [1, 0]],
    horizontal_small_to_long_conv_longratio=[[1, 7], 1, [0, 3]],
    horizontal_small_to_long_conv_midratio=[[1, 5], 1, [0, 2]],
    horizontal_small_to_long_conv_shortratio=[[1, 3], 1, [0, 1]],
    symmetric_conv_long_longratio=[7, 1, 3], symmetric_conv_long_midratio=[5, 1, 2],
    symmetric_conv_long_shortratio=[3, 1, 1])
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # special ids inside the small vocabulary

# ---- timm CNNs and hybrids (close relatives of earlier families; their nearest relative is named in README.md)
timm("swinv2_cr_tiny_ns_224", "swinv2", "vit", 224, 1, name="timm_swinv2_cr_e64_224_b1", embed_dim=64,
     num_heads=(2, 4, 8, 16))  # scaled cosine attention, log-spaced continuous position bias MLP, res-post-norm
timm("mobilevitv2_050", "mobilevitv2", "hybrid", 256, 2)  # separable (linear) self-attention
timm("ghostnetv3_100", "ghostnetv3", "cnn", 224, 4, reparam=True)  # re-parameterised ghost modules
timm("regnetz_b16", "regnetz", "cnn", 224, 2)  # inverted-bottleneck RegNet with SE, group width 16
timm("darknet17", "darknet", "cnn", 256, 1)  # plain DarkNet (no cross-stage partial split)
timm("hgnet_tiny", "hgnet_v1", "cnn", 224, 1)  # PP-HGNet v1: ESE blocks over aggregated 3x3 conv chains
timm("fastvit_mci0", "mobileclip_mci", "hybrid", 256, 1, reparam=True)  # MobileCLIP image tower (RepMixer + attention)
# ---- transformers: segmentation, depth, detection, OCR detection
hf("hf_deeplabv3_mnv2_512_b1", "deeplabv3", "seg", "MobileNetV2ForSemanticSegmentation", "MobileNetV2Config",
   dict(num_labels=21), img(1, 512), attr="logits")  # MobileNetV2 with dilated last stages + ASPP head
hf("hf_pvt_tiny_224_b2", "pvt", "vit", "PvtModel", "PvtConfig", {}, img(2, 224))  # PVT v1: spatial-reduction attn
hf("hf_conditional_detr_r18_3l_384_b1", "conditional_detr", "det", "ConditionalDetrModel", "ConditionalDetrConfig",
   dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=dict(R18, out_features=["stage4"]),
        d_model=256, encoder_layers=3, decoder_layers=3, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
        num_queries=100), img(1, 384))  # conditional spatial queries
hf("hf_dab_detr_r18_3l_384_b1", "dab_detr", "det", "DabDetrModel", "DabDetrConfig",
   dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=dict(R18, out_features=["stage4"]),
        hidden_size=256, encoder_layers=3, decoder_layers=3, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
        num_queries=100), img(1, 384))  # dynamic anchor-box queries modulating the cross-attention
hf("hf_glpn_b0_320_b1", "glpn", "seg", "GLPNForDepthEstimation", "GLPNConfig", {}, img(1, 320),
   attr="predicted_depth")  # MiT encoder + selective feature fusion depth decoder
hf("hf_depth_anything_s6l_252_b1", "depth_anything", "seg", "DepthAnythingForDepthEstimation", "DepthAnythingConfig",
   dict(backbone_config=dict(model_type="dinov2", image_size=252, hidden_size=384, num_hidden_layers=6,
                             num_attention_heads=6, out_indices=[3, 4, 5, 6], apply_layernorm=True,
                             reshape_hidden_states=False)),
   img(1, 252), attr="predicted_depth")  # DINOv2 + DPT-style neck and head
hf("hf_ppocrv5_server_det_224_b1", "ppocr_server_det", "cnn", "PPOCRV5ServerDetForObjectDetection",
   "PPOCRV5ServerDetConfig", dict(intraclass_block_config=INTRACLASS, scale_factor_list=[1, 2, 4, 8],
                                  kernel_list=[3, 2, 2]), img(1, 224))  # PP-HGNetV2, LKPAN + intra-class neck, DB head
# ---- transformers: speech and audio
hf("hf_clap_htsat_s_10s_b1", "clap", "speech", "ClapAudioModel", "ClapAudioConfig",
   dict(patch_embeds_hidden_size=64, hidden_size=512, num_attention_heads=[2, 4, 8, 16]),
   f32("input_features", 1, 1, 1001, 64))  # HTS-AT: Swin over a mel spectrogram folded into a 256x256 image
hf("hf_parakeet_enc_6l_10s_b1", "parakeet", "speech", "ParakeetEncoder", "ParakeetEncoderConfig",
   dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024,
        subsampling_conv_channels=128), f32("input_features", 1, 1000, 80))  # FastConformer, 8x conv subsampling
hf("hf_sew_d_6l_1s_b2", "sew_d", "speech", "SEWDModel", "SEWDConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536),
   f32("input_values", 2, 16000))  # squeezed wav2vec2 features, DeBERTa disentangled attention
hf("hf_w2v_bert_6l_5s_b1", "wav2vec2_bert", "speech", "Wav2Vec2BertModel", "Wav2Vec2BertConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536),
   f32("input_features", 1, 250, 160))  # w2v-BERT 2.0: conformer over stacked fbank features
hf("hf_speecht5_asr_6l_1s_b1", "speecht5", "speech", "SpeechT5ForSpeechToText", "SpeechT5Config",
   dict(NOCACHE, hidden_size=384, encoder_layers=6, decoder_layers=3, encoder_attention_heads=6,
        decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, conv_dim=[256] * 7),
   f32("input_values", 1, 16000) + ids("decoder_input_ids", 81, 1, 32), attr="logits",
   call_kwargs=NOCACHE)  # conv speech prenet, relative-position encoder, text decoder
# ---- transformers: encoder-decoders (both halves), time series
hf("hf_m2m100_3l_s64_b2", "m2m_100", "text", "M2M100Model", "M2M100Config",
   dict(NOCACHE, vocab_size=16000, d_model=512, encoder_layers=3, decoder_layers=3, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048),
   txt(2, 64, 16000) + ids("decoder_input_ids", 16000, 2, 64), call_kwargs=NOCACHE)
hf("hf_umt5_4l_s128_b1", "umt5", "text", "UMT5Model", "UMT5Config",
   dict(NOCACHE, vocab_size=16000, d_model=512, d_ff=1024, num_layers=4, num_heads=8),
   txt(1, 128, 16000) + ids("decoder_input_ids", 16000, 1, 64), call_kwargs=NOCACHE)  # per-layer relative bias
hf("hf_led_3l_s1024_b1", "led", "text", "LEDModel", "LEDConfig",
   dict(NOCACHE, vocab_size=16000, d_model=256, encoder_layers=3, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, attention_window=128),
   txt(1, 1024, 16000) + ids("decoder_input_ids", 16000, 1, 64), call_kwargs=NOCACHE)  # Longformer encoder + BART
hf("hf_timesfm2_5_6l_1024_b8", "timesfm2_5", "timeseries", "TimesFm2_5Model", "TimesFm2_5Config",
   dict(num_hidden_layers=6, hidden_size=512, intermediate_size=512, head_dim=64, num_attention_heads=8,
        num_key_value_heads=8), f32("past_values", 8, 1024))  # running-statistics RevIN, patch residual blocks
# ---- transformers: a table encoder and an autoregressive image model
hf("hf_tapas_6l_s256_b2", "tapas", "text", "TapasModel", "TapasConfig",
   dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
        reset_position_index_per_cell=False),  # the per-cell reset needs scatter_reduce(include_self=False)
   txt(2, 256, 30522) + ids("token_type_ids", 2, 2, 256, 7))  # 7 table-structure embeddings (segment/row/column/...)
hf("hf_imagegpt_4l_32px_b1", "imagegpt", "vit", "ImageGPTModel", "ImageGPTConfig",
   dict(NOCACHE, n_embd=256, n_layer=4, n_head=8), ids("input_ids", 512, 1, 1024),
   call_kwargs=NOCACHE)  # GPT-2 blocks over 32x32 colour-cluster tokens (1024 positions)
# ---- transformers: decoders without KV cache (dense; no mixture-of-experts)
dec("hf_minicpm3_6l_s256_b1", "minicpm3", "MiniCPM3Model", "MiniCPM3Config",
    dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=8,
         kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=64,
         dim_model_base=256), 1, 256)  # multi-head latent attention, muP-scaled residuals, dense MLP
dec("hf_gpt_neox_japanese_6l_s256_b1", "gpt_neox_japanese", "GPTNeoXJapaneseModel", "GPTNeoXJapaneseConfig",
    dict(IDS, hidden_size=512, num_hidden_layers=6, num_attention_heads=8), 1, 256)  # separate dense bias
dec("hf_stablelm_6l_s256_b1", "stablelm", "StableLmModel", "StableLmConfig",
    dict(IDS, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=8, qk_layernorm=True, use_parallel_residual=True, use_qkv_bias=True),
    1, 256)  # parallel residual, per-head QK LayerNorm, 25 % partial RoPE
dec("hf_modernbert_dec_8l_s512_b1", "modernbert_decoder", "ModernBertDecoderModel", "ModernBertDecoderConfig",
    dict(IDS, cls_token_id=1, sep_token_id=2, hidden_size=384, intermediate_size=1152, num_hidden_layers=8,
         num_attention_heads=6, local_attention=128), 1, 512)  # causal ModernBERT: local/global layers

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert len(SPECS) == 29 and len({s.family for s in SPECS}) == 29, "29 models of 29 families"
