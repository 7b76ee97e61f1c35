"""The tenth development set's models: mainstream, widely deployed architectures at their STANDARD published sizes
(full depth and width), as declarative specs read by benchmarks/devset2/export.py (`--specs
benchmarks/devset10/specs.py`).

A third set made the way the eighth and ninth were ("the mainstream, at full published size"), with other models and
shapes: timm resnet152, resnet34 at batch 4, regnety_032, efficientnet_b4 at 320 px, efficientnet_lite0 at batch 8,
mobilenetv3_large_100 at batch 4, mnasnet_100 at batch 8, ghostnetv2_100 at batch 4, densenet201, mixnet_m,
tinynet_a at 192 px, hrnet_w18_small_v2, convnext_tiny at batch 2, deit3_small, swin_small, pvt_v2_b1, coatnet_0_rw,
maxvit_tiny_rw, efficientvit_b2 at 256 px; transformers ALBERT-large, DistilRoBERTa, multilingual MiniLM-L12 (XLM-R
form), all-MiniLM-L6 at batch 4, Flan-T5-small (whole), GPT-2 small at batch 2, GPT-Neo-125m, wav2vec2-base at 2 s
and WavLM-base. Most of these families are in the Hase zoo or an earlier set at another size: this is a set of unseen
MODELS, not of unseen families. The rule: no model repeats an (architecture config, input shape, batch) of an
earlier set (dev1, dev2 to dev9, ../shared/models/exported; the same architecture at another size, batch or
resolution is fine), and README.md names the nearest earlier model of each.

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
Random weights, nothing downloaded; transformers models are built from configs whose defaults are the published
sizes, or given explicitly. The exporter's file cap (400 MiB) is below the float32 size of GPT-2 small and GPT-Neo-125m
with their full vocabularies (50257), and multilingual MiniLM's 250002-token table would be most of its file, so those
take a 16000-token vocabulary: only the embedding table (a Gather; no LM head is exported) shrinks, every layer is at
full size. Mix: 19 image models (CNNs from MobileNetV3 to ResNet-152 and DenseNet-201 size, ViTs, hybrids) and 9
text/speech models (4 text encoders, 1 encoder-decoder exported whole, 2 decoders without KV cache, 2 speech
encoders); batch 1-8, images 192-320 px, token sequences 64-128, audio 1-2 s. Each model's rough ONNX Runtime CPU
1-thread latency must be 10-300 ms and the set's total at most about 3 s; every ONNX file under 400 MiB (the
exporter's cap), the set under 4 GB.
Dropped before export (size): XLM-R-base (16000-token vocabulary, ~371 MiB) and ELECTRA-base at 256 tokens (~373
MiB): with them the set would pass 4 GB; multilingual MiniLM-L12 took XLM-R's place.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import BASE, NOCACHE, SpecList, f32, ids, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec

ROBERTA = dict(max_position_embeddings=514, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2)

# ---- timm CNNs, MobileNet to ResNet-152 size (published configurations, their native or training resolutions)
timm("resnet152", "resnet", "cnn", 224, 1)
timm("resnet34", "resnet", "cnn", 224, 4)
timm("regnety_032", "regnet", "cnn", 224, 1)
timm("efficientnet_b4", "efficientnet", "cnn", 320, 1)  # timm's training size for B4
timm("efficientnet_lite0", "efficientnet", "cnn", 224, 8)
timm("mobilenetv3_large_100", "mobilenetv3", "cnn", 224, 4)
timm("mnasnet_100", "mnasnet", "cnn", 224, 8)
timm("ghostnetv2_100", "ghostnet", "cnn", 224, 4)
timm("densenet201", "densenet", "cnn", 224, 1)
timm("mixnet_m", "mixnet", "cnn", 224, 4)
timm("tinynet_a", "efficientnet", "cnn", 192, 8)  # TinyNet-A's native 192 px
timm("hrnet_w18_small_v2", "hrnet", "cnn", 224, 1)
timm("convnext_tiny", "convnext", "cnn", 224, 2)
# ---- timm vision transformers and hybrids
timm("deit3_small_patch16_224", "vit", "vit", 224, 1)
timm("swin_small_patch4_window7_224", "swin", "vit", 224, 1)
timm("pvt_v2_b1", "pvt_v2", "vit", 224, 2)
timm("coatnet_0_rw_224", "coatnet", "hybrid", 224, 1)
timm("maxvit_tiny_rw_224", "maxvit", "hybrid", 224, 1)
timm("efficientvit_b2", "efficientvit_mit", "hybrid", 256, 1)  # EfficientViT-B2's 256 px
# ---- transformers: text encoders (vocabulary cut only where the file would pass 400 MiB)
hf("hf_albert_large_s64_b1", "albert", "text", "AlbertModel", "AlbertConfig",
   dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, embedding_size=128,
        vocab_size=30000), txt(1, 64, 30000))  # albert-large-v2
hf("hf_distilroberta_base_s128_b2", "roberta", "text", "RobertaModel", "RobertaConfig",
   dict(BASE, **ROBERTA, num_hidden_layers=6, vocab_size=50265), txt(2, 128, 50265))  # distilroberta-base
hf("hf_multilingual_minilm_l12_v16k_s128_b2", "xlm_roberta", "text", "XLMRobertaModel", "XLMRobertaConfig",
   dict(**ROBERTA, hidden_size=384, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1536,
        vocab_size=16000), txt(2, 128, 16000))  # paraphrase-multilingual-MiniLM-L12-v2 (vocabulary 250002 cut)
hf("hf_all_minilm_l6_s128_b4", "bert", "text", "BertModel", "BertConfig",
   dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
   txt(4, 128, 30522))  # sentence-transformers all-MiniLM-L6-v2 (vocabulary 30522)
# ---- transformers: an encoder-decoder exported whole (encoder over the source, decoder with cross-attention)
hf("hf_flan_t5_small_s128_d32_b1", "t5", "text", "T5Model", "T5Config",
   dict(NOCACHE, d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_decoder_layers=8, num_heads=6,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False),  # google/flan-t5-small (T5 v1.1, vocab 32128)
   txt(1, 128, 32128) + ids("decoder_input_ids", 32128, 1, 32), call_kwargs=NOCACHE)
# ---- transformers: decoders without KV cache
dec("hf_gpt2_small_v16k_s64_b2", "gpt2", "GPT2Model", "GPT2Config", {}, 2, 64)  # GPT2Config's defaults: gpt2 (124M)
dec("hf_gpt_neo_125m_v16k_s128_b1", "gpt_neo", "GPTNeoModel", "GPTNeoConfig",
    dict(hidden_size=768, num_layers=12, num_heads=12, attention_types=[[["global", "local"], 6]], window_size=256,
         max_position_embeddings=2048), 1, 128)  # EleutherAI/gpt-neo-125m
# ---- transformers: speech
hf("hf_wav2vec2_base_2s_b1", "wav2vec2", "speech", "Wav2Vec2Model", "Wav2Vec2Config", {},
   f32("input_values", 1, 32000))  # Wav2Vec2Config's defaults: wav2vec2-base (12 layers, 768)
hf("hf_wavlm_base_1s_b1", "wavlm", "speech", "WavLMModel", "WavLMConfig", {},
   f32("input_values", 1, 16000))  # WavLMConfig's defaults: wavlm-base (12 layers, 768)

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert 26 <= len(SPECS) <= 30, "about 28 models"
