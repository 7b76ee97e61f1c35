"""The sixth development set's models: architecture families that none of the earlier sets has (the first dev set,
../shared/models/devset/export.py; the second, benchmarks/devset2/specs.py; the third, benchmarks/devset3/specs.py;
the fourth, benchmarks/devset4/specs.py; the fifth, benchmarks/devset5/specs.py; ../shared/models/exported), as
declarative specs read by benchmarks/devset2/export.py (`--specs benchmarks/devset6/specs.py`).

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
The spec format is the second dev set's (`Spec`, with the third set's timm `config_kwargs`). Families already taken
(never use one of these here): every family in benchmarks/devset5/specs.py's docstring (dev1 to dev4, exported and
their close relatives), plus dev5's: efficientvim, iformer, lowformer, cpubone, cspnext, lcnetv2, bat, gcnet, uvdoc,
x_clip, mgp_str, sam, videoprism, tvp, bridgetower, git, flava (its ViTs), idefics, zamba, jamba, kimi_linear, dory,
minimax, mixtral, laguna, zaya, inkling, openai_privacy_filter, neomme, clvp, dia, musicgen, bark, fun_asr_sanm,
pe_audio, time_series_transformer; and the families the Hase zoo writes itself (alexnet, vgg, resnet, densenet,
squeezenet, googlenet, mobilenetv1/v2/v3, mnasnet, proxylessnas, shufflenetv2, bert, gpt, vit).
Close relatives of those are left out too: bailing_hybrid (kimi_linear: KDA + MLA + MoE), gemma4_vit/qwen3_vit/
deepseek_vit/naflexvit (plain ViTs with 2-D RoPE, as eva02), inception_v4/inception_resnet_v2/pnasnet (inception;
over 150 MB), musicgen_melody (musicgen), xcodec/higgs_audio_v2_tokenizer (dac + hubert), vibevoice_asr
(vibevoice_tokenizer), granite_speech5/phi4_multimodal audio/gemma4 audio/nemotron_asr_streaming (conformer),
moss_transcribe_diarize/audioflamingo3/qwen2_audio (whisper), t5gemma2/diffusion_gemma/embedding_gemma2/vaultgemma
(gemma2/gemma3n), lfm2_vl/lfm3 (lfm2), aya_vision/cohere2_vision (cohere2, which does not export), instructblip/
granite4_vision (blip2_qformer), qianfan_ocr (internvl), deepseek_vl_hybrid (deepseek_ocr2's SAM + siglip),
pocket_tts/gradium_phonon_tts (their model class is a plain transformer; the flow head is outside it),
arcee/cwm/seed_oss/ernie4_5/hunyuan_v1_dense/granite (llama).
timm 1.0.31 has no untaken family left (only the ViT variants and the over-150-MB Inception/PNASNet above), so the
one timm model is efficientnet_cc (CondConv: per-sample expert kernels), whose nearest relative is dev1's efficientnet.
Kept, with their nearest earlier relative named in README.md: chameleon (a taming-VQGAN encoder, as emu3's),
got_ocr2 (a SAM ViTDet front end, as deepseek_ocr2's and dev5's sam), llava/janus/paligemma/mistral3 (a plain or
SigLIP-style ViT + an MLP projector + a llama/gemma/mistral decoder), the mixture-of-experts decoders dbrx, phimoe,
olmoe, qwen2_moe, dots1, granitemoe, flint, beam (dev5's mixtral and deepseek_v3-style routing), trocr (a BART-style
decoder with cross-attention), decision_transformer (GPT-2 blocks), glmasr/dots3_note_audio/qwen3_asr (whisper-style
encoders with RoPE, a conv stem, windowed attention).

Mix: 16 image/video models (6 vision-only: VQ tokenizers, a dVAE, a tiled ViT, a SAM + decoder-as-encoder OCR
encoder, CondConv; 10 vision-language models run on an image-only prompt) and 20 text/decoder/speech/trajectory/
protein models (36 families), batch 1-8, images 112-512 px, token sequences 32-256, audio 10 s; every ONNX file under
150 MB. MoE models use transformers' eager experts loop (`experts_implementation="eager"`, as the fifth set does).
The vision-language models are fed a prompt of image tokens only (`input_ids` all `image_token_id = 0`, as many as
the model makes image features), since the exporter's random token ids cannot place image placeholders; kosmos2 and
mistral3 take their image-position mask / image size as a constant (`call_kwargs`), as a deployed static export
would. Dropped because the TorchScript exporter (opset 17) or ONNX Runtime fails on them: pi0, llama4 (vision),
aria, smolvlm, idefics2, olmo_hybrid, lara_mini, hy_v4, afmoe, cohere2, glm5_next, autoformer, patchtst,
patchtsmixer, bigvgan (qwen2_5_omni), qwen2_5_omni_dit, voxtral_realtime, moonshine, gemma4_audio, maskformer/
videomt/eomt (need scipy), dinat (needs natten) (see README.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import NOCACHE, SpecList, f32, ids, ones, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec


def vlm(name: str, family: str, model: str, config: str, kw: dict, n_img: int, pixels: tuple, b: int = 1) -> None:
    """A vision-language model on an image-only prompt: `n_img` image tokens (id 0 = the config's image token, so
    every position takes an image feature), the pixels, an attention mask."""
    hf(name, family, "multimodal", model, config, kw,
       ids("input_ids", 1, b, n_img) + f32("pixel_values", b, *pixels) + ones("attention_mask", b, n_img))


EAGER_MOE = dict(experts_implementation="eager")  # a Python loop over the experts the routing hits (exportable)
VIT_S = dict(hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=6)  # small vision towers
LM_S = dict(vocab_size=16000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
            num_key_value_heads=2)  # small language models behind the vision towers
MOE_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)  # special ids inside the small vocabulary

# ---- vision only: image/video tokenizers, a dVAE, a tiled ViT, an OCR encoder, CondConv (timm)
hf("hf_emu3_vqvae_enc_4f_128_b1", "emu3", "video", "Emu3VQVAE", "Emu3VQVAEConfig",
   dict(base_channels=32, channel_multiplier=[1, 2, 2, 4], num_res_blocks=2, hidden_size=128, num_attention_heads=1),
   f32("pixel_values", 1, 4, 3, 128, 128), sub="get_encoder")  # MoVQ encoder: 2-D ResNet + attention, temporal Conv3d
hf("hf_chameleon_vqgan_enc_224_b1", "chameleon", "cnn", "ChameleonVQVAE", "ChameleonVQVAEConfig",
   dict(base_channels=64, resolution=224), f32("pixel_values", 1, 3, 224, 224), sub="get_encoder")  # taming VQGAN
hf("hf_dalle_dvae_enc_112_b2", "dalle_dvae", "cnn", "FlavaImageCodebook", "FlavaImageCodebookConfig",
   dict(hidden_size=64), f32("pixel_values", 2, 3, 112, 112))  # DALL-E dVAE encoder (FLAVA's image codebook), logits
hf("hf_mllama_vision_6l_4t_224_b1", "mllama", "vit", "MllamaVisionModel", "MllamaVisionConfig",
   dict(hidden_size=256, num_hidden_layers=6, num_global_layers=2, attention_heads=4, intermediate_size=1024,
        image_size=224, patch_size=16, max_num_tiles=4, intermediate_layers_indices=[1, 3, 5],
        vision_output_dim=1024),
   f32("pixel_values", 1, 1, 4, 3, 224, 224) + ids("aspect_ratio_ids", 1, 1, 1) + ones("aspect_ratio_mask", 1, 1, 4))
hf("hf_deepseek_ocr2_vision_512_b1", "deepseek_ocr2", "hybrid", "DeepseekOcr2VisionModel", "DeepseekOcr2VisionConfig",
   dict(sam_config=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, image_size=512,
                        global_attn_indexes=[1, 3], downsample_channels=[256, 512], use_abs_pos=False),
        encoder_config=dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                            num_key_value_heads=2)),
   f32("pixel_values", 1, 3, 512, 512))  # SAM ViTDet + conv neck, then a Qwen2 decoder as encoder over learned queries
timm("efficientnet_cc_b0_4e", "condconv", "cnn", 224, 4)  # CondConv: per-sample mixtures of 4 expert kernels
# ---- vision-language models (image-only prompts)
hf("hf_kosmos2_6l_224_s96_b1", "kosmos2", "multimodal", "Kosmos2Model", "Kosmos2Config",
   dict(latent_query_num=64, vision_config=dict(VIT_S, image_size=224, patch_size=16),
        text_config=dict(vocab_size=8000, embed_dim=512, layers=6, ffn_dim=2048, attention_heads=8)),
   f32("pixel_values", 1, 3, 224, 224) + ids("input_ids", 8000, 1, 96) + ones("attention_mask", 1, 96),
   call_kwargs=dict(image_embeds_position_mask=torch.tensor([[0] + [1] * 64 + [0] * 31])))  # <s> 64 image, 31 text
vlm("hf_ovis2_4l_224_b1", "ovis2", "Ovis2Model", "Ovis2Config",
    dict(image_token_id=0, hidden_size=512, vision_config=dict(VIT_S, intermediate_size=1024, vocab_size=4096),
         text_config=LM_S), 256, (3, 224, 224))  # probabilistic visual tokens: softmax over a visual vocabulary
hf("hf_florence2_224_b1", "florence2", "multimodal", "Florence2Model", "Florence2Config",
   dict(image_token_id=0,
        vision_config=dict(depths=[1, 1, 3, 1], embed_dim=[64, 128, 256, 512], projection_dim=512),
        text_config=dict(vocab_size=8000, d_model=512, encoder_layers=3, decoder_layers=3, encoder_attention_heads=8,
                         decoder_attention_heads=8, encoder_ffn_dim=1536, decoder_ffn_dim=1536)),
   ids("input_ids", 1, 1, 50) + f32("pixel_values", 1, 3, 224, 224) + ids("decoder_input_ids", 8000, 1, 32))
vlm("hf_internvl_4l_224_b2", "internvl", "InternVLModel", "InternVLConfig",
    dict(image_token_id=0, image_seq_length=64,
         vision_config=dict(VIT_S, image_size=224, patch_size=14, use_qk_norm=True, norm_type="rms_norm"),
         text_config=LM_S), 64, (3, 224, 224), b=2)  # pixel-shuffle (0.5) projector
vlm("hf_paligemma_4l_224_b1", "paligemma", "PaliGemmaModel", "PaliGemmaConfig",
    dict(image_token_index=0, projection_dim=512, hidden_size=512,
         vision_config=dict(VIT_S, image_size=224, patch_size=14),
         text_config=dict(LM_S, intermediate_size=2048, num_key_value_heads=1, head_dim=64)),
    256, (3, 224, 224))  # prefix-LM (bidirectional over the image prefix)
vlm("hf_got_ocr2_4l_512_b1", "got_ocr2", "GotOcr2Model", "GotOcr2Config",
    dict(image_token_index=0, image_seq_length=64,
         vision_config=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, image_size=512, mlp_dim=1024),
         text_config=LM_S), 64, (3, 512, 512))
vlm("hf_janus_4l_224_b1", "janus", "JanusModel", "JanusConfig",
    dict(image_token_id=0,
         vision_config=dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, image_size=224,
                            patch_size=16, projection_dim=512, num_image_tokens=196),
         vq_config=dict(base_channels=32, projection_dim=512, image_token_embed_dim=512, num_patches=14),
         text_config=dict(LM_S, head_dim=64)), 196, (3, 224, 224))
hf("hf_fuyu_4l_480_b2", "fuyu", "multimodal", "FuyuModel", "FuyuConfig",
   dict(image_token_id=0, text_config=dict(vocab_size=16000, hidden_size=512, intermediate_size=2048,
                                           num_hidden_layers=4, num_attention_heads=8)),
   ids("input_ids", 1, 2, 256) + f32("pixel_values", 2, 256, 2700) + ones("attention_mask", 2, 256))  # 30x30 patches
hf("hf_mistral3_4l_224_b1", "mistral3", "multimodal", "Mistral3Model", "Mistral3Config",
   dict(image_token_index=0, vision_config=dict(VIT_S, head_dim=64, image_size=224, patch_size=14),
        text_config=dict(LM_S, head_dim=64)),
   ids("input_ids", 1, 1, 64) + f32("pixel_values", 1, 3, 224, 224) + ones("attention_mask", 1, 64),
   call_kwargs=dict(image_sizes=torch.tensor([[224, 224]])))  # pixtral tower + 2x2 patch merger
vlm("hf_llava_4l_224_b1", "llava", "LlavaModel", "LlavaConfig",
    dict(image_token_index=0, vision_config=dict(VIT_S, image_size=224, patch_size=16),
         text_config=dict(LM_S, head_dim=64)), 196, (3, 224, 224))
# ---- transformers: decoders without KV cache (dense and mixture-of-experts) and a cross-attention text decoder
dec("hf_nanochat_6l_s256_b1", "nanochat", "NanoChatModel", "NanoChatConfig",
    dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=8),
    1, 256)  # relu^2 MLP, QK-norm, weightless RMSNorm
dec("hf_jais2_6l_s256_b1", "jais2", "Jais2Model", "Jais2Config",
    dict(MOE_IDS, hidden_size=512, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=8, head_dim=64), 1, 256)  # LayerNorm, biased relu^2 MLP
dec("hf_dbrx_4l_e8_s256_b1", "dbrx", "DbrxModel", "DbrxConfig",
    dict(**EAGER_MOE, d_model=512, n_heads=8, n_layers=4, attn_config=dict(kv_n_heads=2, clip_qkv=8.0, rope_theta=1e4),
         ffn_config=dict(hidden_size=512, ffn_hidden_size=512, moe_num_experts=8, moe_top_k=2)), 1, 256, vocab=8000)
dec("hf_muse_spark_6l_e8_s256_b1", "muse_spark", "MuseSparkTextModel", "MuseSparkTextConfig",
    dict(**EAGER_MOE, **MOE_IDS, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=2, head_dim=64, sliding_window=64, moe_intermediate_size=256, moe_hidden_size=256,
         num_local_experts=8, num_experts_per_tok=2), 1, 256)  # residual gates, centred RMSNorm, NoPE global layers
dec("hf_mimo_v2_flash_6l_e8_s256_b1", "mimo_v2_flash", "MiMoV2FlashModel", "MiMoV2FlashConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=2, head_dim=96, v_head_dim=64, moe_intermediate_size=256, n_routed_experts=8,
         num_experts_per_tok=2, sliding_window=64), 1, 256)  # SWA + full layers, q/k head 96, v head 64
dec("hf_phimoe_4l_e8_s256_b1", "phimoe", "PhimoeModel", "PhimoeConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2), 1, 256, vocab=8000)  # sparsemixer routing
dec("hf_flint_6l_e8_s256_b1", "flint", "FlintModel", "FlintConfig",
    dict(**EAGER_MOE, **MOE_IDS, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=2, head_dim=64, sliding_window=64, moe_intermediate_size=256,
         shared_expert_intermediate_size=384, num_experts=8, num_experts_per_tok=2, mlp_only_layers=[0]),
    1, 256, vocab=8000)  # attention sinks, sliding window, shared expert
dec("hf_beam_6l_e8_s128_b2", "beam", "BeamModel", "BeamConfig",
    dict(**EAGER_MOE, **MOE_IDS, hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=2, head_dim=64, sliding_window=64, moe_intermediate_size=256, num_experts=8,
         num_experts_per_tok=2, n_group=2, topk_group=1), 2, 128)  # group-limited routing, logit soft-capping
dec("hf_olmoe_4l_e12_s256_b1", "olmoe", "OlmoeModel", "OlmoeConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=8, num_experts=12, num_experts_per_tok=3, pad_token_id=0, eos_token_id=2),
    1, 256, vocab=8000)
dec("hf_qwen2_moe_4l_e8_s256_b1", "qwen2_moe", "Qwen2MoeModel", "Qwen2MoeConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
         num_key_value_heads=2, moe_intermediate_size=256, shared_expert_intermediate_size=512, num_experts=8,
         num_experts_per_tok=2), 1, 256)  # sigmoid-gated shared expert
dec("hf_dots1_4l_e8_s128_b2", "dots1", "Dots1Model", "Dots1Config",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=1536, moe_intermediate_size=256, num_hidden_layers=4,
         num_attention_heads=8, num_key_value_heads=2, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
         first_k_dense_replace=1), 2, 128)  # sigmoid routing with a score-correction bias
dec("hf_granitemoe_6l_e8_s256_b1", "granitemoe", "GraniteMoeModel", "GraniteMoeConfig",
    dict(**EAGER_MOE, hidden_size=512, intermediate_size=256, num_hidden_layers=6, num_attention_heads=8,
         num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2), 1, 256)  # muP multipliers
hf("hf_trocr_dec_6l_s64_b4", "trocr", "text", "TrOCRForCausalLM", "TrOCRConfig",
   dict(NOCACHE, d_model=384, decoder_layers=6, decoder_attention_heads=6, decoder_ffn_dim=1536, vocab_size=16000,
        cross_attention_hidden_size=384),
   ids("input_ids", 16000, 4, 64) + f32("encoder_hidden_states", 4, 577, 384), sub="get_decoder", call_kwargs=NOCACHE)
# ---- transformers: protein + text, trajectories
hf("hf_evolla_4l_p256_s128_b1", "evolla", "multimodal", "EvollaModel", "EvollaConfig",
   dict(NOCACHE, **MOE_IDS, vocab_size=16000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, aligner_num_add_layers=2, resampler_depth=2,
        resampler_num_latents=32, resampler_heads=8,
        protein_encoder_config=dict(hidden_size=320, num_hidden_layers=6, num_attention_heads=20,
                                    intermediate_size=1280)),
   ids("input_ids", 16000, 1, 128) + ones("attention_mask", 1, 128) + ids("protein_input_ids", 446, 1, 256)
   + ones("protein_attention_mask", 1, 256), call_kwargs=NOCACHE)  # SaProt encoder, resampler, cross-attention LLM
hf("hf_decision_transformer_4l_k64_b8", "decision_transformer", "timeseries", "DecisionTransformerModel",
   "DecisionTransformerConfig", dict(state_dim=17, act_dim=6, hidden_size=256, n_layer=4, n_head=4, max_ep_len=1000),
   f32("states", 8, 64, 17) + f32("actions", 8, 64, 6) + f32("returns_to_go", 8, 64, 1)
   + ids("timesteps", 1000, 8, 64) + ones("attention_mask", 8, 64))  # (return, state, action) x 64 steps
# ---- transformers: speech
hf("hf_nemotron3_diar_6l_10s_b2", "nemotron3_diarization", "speech", "Nemotron3DiarizationModel",
   "Nemotron3DiarizationConfig",
   dict(audio_config=dict(VIT_S), head_config=dict(audio_hidden_size=384)),
   f32("input_features", 2, 1000, 128))  # feature stacking (x8), RoPE transformer, speaker-activity head
hf("hf_qwen3_asr_enc_6l_10s_b1", "qwen3_asr", "speech", "Qwen3ASREncoder", "Qwen3ASREncoderConfig",
   dict(d_model=512, encoder_layers=6, encoder_attention_heads=8, encoder_ffn_dim=2048, output_dim=1024,
        downsample_hidden_size=256),
   f32("input_features", 1, 128, 1000) + ones("input_features_mask", 1, 1000))  # conv2d stem, windowed attention
hf("hf_glmasr_enc_6l_10s_b1", "glmasr", "speech", "GlmAsrEncoder", "GlmAsrEncoderConfig",
   dict(VIT_S, num_key_value_heads=6), f32("input_features", 1, 128, 1000))
hf("hf_dots3_audio_6l_10s_b1", "dots3_note_audio", "speech", "Dots3NoteAudioModel", "Dots3NoteAudioConfig",
   dict(VIT_S, num_key_value_heads=6, downsample_hidden_size=128, conv_output_size=2048, adapter_input_size=384,
        adapter_out_dim=1536),
   f32("input_features", 1, 128, 1000), call_kwargs=dict(chunk_sample_lengths=torch.tensor([160000])))
hf("hf_higgs_audio_v2_6l_s256_b1", "higgs_audio_v2", "speech", "HiggsAudioV2Model", "HiggsAudioV2Config",
   dict(NOCACHE, **MOE_IDS, vocab_size=8000, hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
        num_attention_heads=8, num_key_value_heads=2, head_dim=64, audio_token_id=7990, audio_bos_token_id=7991,
        audio_delay_token_id=7992),
   txt(1, 256, 8000), call_kwargs=NOCACHE)  # dual-FFN (text/audio) decoder over 8 codebook embeddings

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert len(SPECS) == 36 and len({s.family for s in SPECS}) == 36, "36 models of 36 families"
