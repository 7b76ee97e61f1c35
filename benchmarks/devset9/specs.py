"""The ninth development set's models: mainstream, widely deployed architectures at their STANDARD published sizes
(full depth and width), as declarative specs read by benchmarks/devset2/export.py (`--specs
benchmarks/devset9/specs.py`).

A second set made the way the eighth was (benchmarks/devset8/specs.py: "the mainstream, at full published size"),
with other models and shapes: timm resnet101, resnext50_32x4d, efficientnet_b3, efficientnetv2_rw_s,
mobilenetv3_small_100, mobilenetv2_140, regnetx_032, ghostnet_100, convnext_nano, densenet169, inception_v4,
swin_tiny, vit_small at 384 px, poolformer_s24, efficientformer_l3, mobilevit_xs, edgenext_small, convnextv2_tiny;
transformers BERT-base, DistilBERT at 512 tokens, MPNet-base, DeBERTa-v3-small, ELECTRA-small at 512 tokens,
MobileBERT at 384 tokens, the BART-base encoder, the T5-base encoder, OPT-125m, Pythia-160m, Data2Vec-audio-base and
S2T-small (both halves). Most
of these families are in the Hase zoo or an earlier set at another size: this is a set of unseen MODELS, not of
unseen families. The rule: no model repeats an (architecture config, input shape, batch) of an earlier set (dev1,
dev2 to dev8, ../shared/models/exported; the same architecture at another size, batch or resolution is fine), and
README.md names the nearest earlier model of each.

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
Random weights, nothing downloaded; transformers models are built from configs whose defaults are the published
sizes, or given explicitly. The exporter's file cap (400 MiB) is below the float32 size of BERT-base, MPNet-base,
OPT-125m, Pythia-160m and the T5-base encoder with their full vocabularies, and DeBERTa-v3's 128100-token table would
dominate its file, so those take a smaller vocabulary (BERT-base: 21128, bert-base-chinese's; the others 16000): only
the embedding table (a Gather) shrinks, every layer is at full size. Mix: 18 image models (CNNs from MobileNet-small
to ResNet-101 and Inception-v4 size, ViTs, hybrids, metaformers) and 12 text/speech models (8 text encoders, 2
decoders without KV cache, a speech encoder and a speech encoder-decoder exported whole); batch 1-16, images
224-384 px, token sequences 64-512, audio 1 s (S2T: 10 s, 1000 fbank frames). Each model's rough ONNX Runtime CPU
1-thread latency must be 10-400 ms and the set's total at most about 4 s; every ONNX file under 400 MiB (the
exporter's cap), the set under 5 GB.
Dropped: timm levit_192 at batch 4 (ONNX Runtime's output differed from torch's by 11 % of its largest value: its
random-weight activations reach ~1600), replaced by efficientnetv2_rw_s.
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


# ---- timm CNNs, MobileNet-small to ResNet-101 size (published configurations, their native resolutions)
timm("resnet101", "resnet", "cnn", 224, 1)
timm("resnext50_32x4d", "resnet", "cnn", 224, 1)
timm("efficientnet_b3", "efficientnet", "cnn", 288, 1)
timm("efficientnetv2_rw_s", "efficientnet", "cnn", 288, 1)  # EfficientNetV2-S (timm's PyTorch-native weights)
timm("mobilenetv3_small_100", "mobilenetv3", "cnn", 224, 16)
timm("mobilenetv2_140", "mobilenetv2", "cnn", 224, 4)
timm("regnetx_032", "regnet", "cnn", 224, 2)
timm("ghostnet_100", "ghostnet", "cnn", 224, 8)
timm("convnext_nano", "convnext", "cnn", 224, 2)
timm("convnextv2_tiny", "convnextv2", "cnn", 224, 1)
timm("densenet169", "densenet", "cnn", 224, 1)
timm("inception_v4", "inception", "cnn", 299, 1)
# ---- timm vision transformers, hybrids and metaformers
timm("swin_tiny_patch4_window7_224", "swin", "vit", 224, 2)
timm("vit_small_patch16_384", "vit", "vit", 384, 1)
timm("poolformer_s24", "poolformer", "mlp", 224, 1)
timm("efficientformer_l3", "efficientformer", "hybrid", 224, 1)
timm("mobilevit_xs", "mobilevit", "hybrid", 256, 4)
timm("edgenext_small", "edgenext", "hybrid", 256, 1)
# ---- transformers: text encoders (vocabulary cut only where the file would pass 400 MiB, or for DeBERTa-v3's table)
hf("hf_bert_base_v21k_s64_b4", "bert", "text", "BertModel", "BertConfig", dict(BASE, vocab_size=21128),
   txt(4, 64, 21128))  # bert-base-chinese's config (BERT-base body, 21128-token vocabulary)
hf("hf_distilbert_base_s512_b1", "distilbert", "text", "DistilBertModel", "DistilBertConfig", {},
   txt(1, 512, 30522))  # DistilBertConfig's defaults: distilbert-base (6 layers, 768)
hf("hf_mpnet_base_v16k_s64_b1", "mpnet", "text", "MPNetModel", "MPNetConfig", dict(vocab_size=16000),
   txt(1, 64, 16000))  # MPNetConfig's defaults: mpnet-base / all-mpnet-base-v2 (12 layers, 768)
hf("hf_deberta_v3_small_v16k_s128_b1", "deberta_v2", "text", "DebertaV2Model", "DebertaV2Config",
   dict(BASE, **DEBERTA_V3, num_hidden_layers=6, vocab_size=16000), txt(1, 128, 16000))  # deberta-v3-small
hf("hf_electra_small_s512_b1", "electra", "text", "ElectraModel", "ElectraConfig", {},
   txt(1, 512, 30522))  # ElectraConfig's defaults: the electra-small discriminator
hf("hf_mobilebert_s384_b1", "mobilebert", "text", "MobileBertModel", "MobileBertConfig", {},
   txt(1, 384, 30522))  # MobileBertConfig's defaults: mobilebert-uncased, at SQuAD's 384 tokens
hf("hf_bart_base_encoder_s256_b1", "bart", "text", "BartModel", "BartConfig",
   dict(NOCACHE, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
        decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072),  # bart-base (vocab 50265)
   txt(1, 256, 50265), sub="get_encoder")
hf("hf_t5_base_encoder_v16k_s128_b1", "t5", "text", "T5EncoderModel", "T5Config",
   dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, vocab_size=16000),
   txt(1, 128, 16000))  # t5-base's encoder
# ---- transformers: decoders without KV cache
dec("hf_opt_125m_v16k_s128_b1", "opt", "OPTModel", "OPTConfig", {}, 1, 128)  # OPTConfig's defaults: opt-125m
dec("hf_pythia_160m_v16k_s128_b1", "gpt_neox", "GPTNeoXModel", "GPTNeoXConfig",
    dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, rotary_pct=0.25,
         max_position_embeddings=2048), 1, 128)  # pythia-160m
# ---- transformers: speech
hf("hf_data2vec_audio_base_1s_b2", "data2vec_audio", "speech", "Data2VecAudioModel", "Data2VecAudioConfig", {},
   f32("input_values", 2, 16000))  # Data2VecAudioConfig's defaults: data2vec-audio-base (12 layers, 768)
hf("hf_s2t_small_10s_d32_b1", "speech_to_text", "speech", "Speech2TextModel", "Speech2TextConfig", dict(NOCACHE),
   f32("input_features", 1, 1000, 80) + ids("decoder_input_ids", 10000, 1, 32),
   call_kwargs=NOCACHE)  # Speech2TextConfig's defaults: s2t-small-librispeech-asr (12+6 layers, 256 wide), whole

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert 28 <= len(SPECS) <= 32, "about 30 models"
