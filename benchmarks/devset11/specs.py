"""The eleventh development set's models: mainstream, widely deployed architectures at their STANDARD published sizes
(full depth and width), as declarative specs read by benchmarks/devset2/export.py (`--specs
benchmarks/devset11/specs.py`).

A fourth set made the way the eighth to tenth were ("the mainstream, at full published size"), with other models and
shapes: timm resnet50 at batch 8, wide_resnet50_2, resnext50_32x4d at batch 4, densenet161, convnext_small,
tf_efficientnetv2_s at 300 px, efficientnet_b0 at batch 16, mobilenetv2_100 at batch 2, mobilenetv3_small_100 at
batch 4, ghostnet_100 at batch 2, semnasnet_100 at batch 4, regnetx_008 at batch 8, hrnet_w18, deit_small_distilled,
vit_tiny at batch 8, swinv2_tiny_window8 at 256 px, pvt_v2_b2, cait_xxs36, beit_base, mobilevitv2_100 at 256 px;
transformers ALBERT-base at 2 x 128, ELECTRA-small at 4 x 128, MobileBERT at 2 x 128, all-MiniLM-L12 at 256 tokens,
DistilBERT at 2 x 128, DeBERTa-v3-xsmall, t5-small (whole) at batch 2, DistilGPT2 at batch 2, Pythia-70m at batch 2,
the Whisper-base encoder over 30 s and HuBERT-base at 1 s, batch 2. Most of these families are in the Hase zoo or an
earlier set at another size: this is a set of unseen MODELS, not of unseen families. The rule: no model repeats an
(architecture config, input shape, batch) of an earlier set (dev1, dev2 to dev10, ../shared/models/exported; the same
architecture at another size, batch or resolution is fine), and README.md names the nearest earlier model of each.

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
Random weights, nothing downloaded; transformers models are built from configs whose defaults are the published
sizes, or given explicitly. DistilGPT2, Pythia-70m and DeBERTa-v3-xsmall take a 16000-token vocabulary (only the
embedding table, a Gather, shrinks; no LM head is exported; every layer is at full size), to keep the set's files
small; the others keep their published vocabularies. Mix: 20 image models (CNNs from MobileNetV3-small to
Wide-ResNet-50 and ResNet-50 x 8 size, ViTs, a hybrid) and 11 text/speech models (6 text encoders, 1 encoder-decoder
exported whole, 2 decoders without KV cache, 2 speech encoders); batch 1-16, images 224-300 px, token sequences
128-256, audio 1 s (HuBERT) and 30 s (Whisper's fixed 3000 mel frames). Each model's rough ONNX Runtime CPU 1-thread
latency should be about 2 ms to 1.5 s; every ONNX file under 400 MiB (the exporter's cap), the set under 3.5 GiB.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import BASE, DEBERTA_V3, NOCACHE, SpecList, f32, ids, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec


# ---- timm CNNs, MobileNetV3-small to Wide-ResNet-50 size (published configurations, their native resolutions)
timm("resnet50", "resnet", "cnn", 224, 8)
timm("wide_resnet50_2", "resnet", "cnn", 224, 1)
timm("resnext50_32x4d", "resnext", "cnn", 224, 4)
timm("densenet161", "densenet", "cnn", 224, 1)
timm("convnext_small", "convnext", "cnn", 224, 1)
timm("tf_efficientnetv2_s", "efficientnetv2", "cnn", 300, 1)  # EfficientNetV2-S at its 300 px training size
timm("efficientnet_b0", "efficientnet", "cnn", 224, 16)
timm("mobilenetv2_100", "mobilenetv2", "cnn", 224, 2)
timm("mobilenetv3_small_100", "mobilenetv3", "cnn", 224, 4)
timm("ghostnet_100", "ghostnet", "cnn", 224, 2)
timm("semnasnet_100", "mnasnet", "cnn", 224, 4)  # MnasNet-A1 (with SE)
timm("regnetx_008", "regnet", "cnn", 224, 8)
timm("hrnet_w18", "hrnet", "cnn", 224, 1)
# ---- timm vision transformers and hybrids
timm("deit_small_distilled_patch16_224", "vit", "vit", 224, 1)
timm("vit_tiny_patch16_224", "vit", "vit", 224, 8)
timm("swinv2_tiny_window8_256", "swinv2", "vit", 256, 1)  # Swin-V2-T at its 256 px
timm("pvt_v2_b2", "pvt_v2", "vit", 224, 1)
timm("cait_xxs36_224", "cait", "vit", 224, 1)
timm("beit_base_patch16_224", "beit", "vit", 224, 1)
timm("mobilevitv2_100", "mobilevitv2", "hybrid", 256, 1)  # MobileViTv2-1.0 at its 256 px
# ---- transformers: text encoders (vocabulary cut only for DeBERTa-v3's 128100-token table)
hf("hf_albert_base_s128_b2", "albert", "text", "AlbertModel", "AlbertConfig",
   dict(BASE, embedding_size=128), txt(2, 128, 30000))  # albert-base-v2 (12 shared layers)
hf("hf_electra_small_s128_b4", "electra", "text", "ElectraModel", "ElectraConfig", {},
   txt(4, 128, 30522))  # ElectraConfig's defaults: the electra-small discriminator
hf("hf_mobilebert_s128_b2", "mobilebert", "text", "MobileBertModel", "MobileBertConfig", {},
   txt(2, 128, 30522))  # MobileBertConfig's defaults: mobilebert-uncased
hf("hf_all_minilm_l12_s256_b1", "bert", "text", "BertModel", "BertConfig",
   dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1536),
   txt(1, 256, 30522))  # sentence-transformers all-MiniLM-L12-v2 (vocabulary 30522)
hf("hf_distilbert_base_s128_b2", "distilbert", "text", "DistilBertModel", "DistilBertConfig", {},
   txt(2, 128, 30522))  # DistilBertConfig's defaults: distilbert-base (6 layers, 768)
hf("hf_deberta_v3_xsmall_v16k_s128_b2", "deberta_v2", "text", "DebertaV2Model", "DebertaV2Config",
   dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, **DEBERTA_V3,
        vocab_size=16000), txt(2, 128, 16000))  # microsoft/deberta-v3-xsmall (vocabulary 128100 cut)
# ---- transformers: an encoder-decoder exported whole (encoder over the source, decoder with cross-attention)
hf("hf_t5_small_s128_d32_b2", "t5", "text", "T5Model", "T5Config", dict(NOCACHE),  # T5Config's defaults: t5-small
   txt(2, 128, 32128) + ids("decoder_input_ids", 32128, 2, 32), call_kwargs=NOCACHE)
# ---- transformers: decoders without KV cache
dec("hf_distilgpt2_v16k_s128_b2", "gpt2", "GPT2Model", "GPT2Config", dict(n_layer=6), 2, 128)  # distilgpt2
dec("hf_pythia_70m_v16k_s128_b2", "gpt_neox", "GPTNeoXModel", "GPTNeoXConfig",
    dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048, rotary_pct=0.25,
         max_position_embeddings=2048), 2, 128)  # EleutherAI/pythia-70m
# ---- transformers: speech
hf("hf_whisper_base_encoder_30s_b1", "whisper", "speech", "WhisperModel", "WhisperConfig",
   dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_mel_bins=80),  # openai/whisper-base, its encoder
   f32("input_features", 1, 80, 3000), sub="get_encoder")  # Whisper's fixed 30 s window (3000 mel frames)
hf("hf_hubert_base_1s_b2", "hubert", "speech", "HubertModel", "HubertConfig", {},
   f32("input_values", 2, 16000))  # HubertConfig's defaults: hubert-base-ls960

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert 28 <= len(SPECS) <= 32, "about 30 models"
