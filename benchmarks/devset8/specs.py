"""The eighth development set's models: mainstream, widely deployed architectures at their STANDARD published sizes
(full depth and width), as declarative specs read by benchmarks/devset2/export.py (`--specs
benchmarks/devset8/specs.py`).

The earlier sets (the first, ../shared/models/devset/export.py; the second to seventh, benchmarks/devset2..7/
specs.py; ../shared/models/exported) used up the untaken architecture families, mostly at SMALL configurations (4-6
layers, narrow). An outside evaluation used "51 real models exported from timm and transformers: CNNs from mobile to
ResNet-50 size, vision transformers and hybrids, a segmentation model, BERT/GPT-2-size text encoders and decoders,
speech and text encoders; batch 1-8". So this set is the mainstream at full size: timm resnet50/resnet18,
efficientnet_b0/b1, mobilenetv3_large_100, mobilenetv2_100, regnety_016, convnext_tiny, densenet121, inception_v3,
vit_small/vit_base, efficientvit_b1, levit_256, mobilevit_s; transformers SegFormer-B1, DETR-R50, the CLIP ViT-B/32
image tower, BERT-base, RoBERTa-base, DistilBERT, ALBERT-base, ELECTRA-base, MiniLM-L12/L6-H384, GPT-2 small,
DistilGPT-2, T5-small and Marian opus-mt (both halves), Whisper tiny (both halves), wav2vec2-base, HuBERT-base.
Most of these families are in the Hase zoo or an earlier set at another size: this is a set of unseen MODELS, not of
unseen families. The rule: no model repeats an (architecture config, input shape, batch) of an earlier set (the
same architecture at another size, batch or resolution is fine), and README.md names the nearest earlier model of
each.

The whole set is held out (`PART`): it is never split into a check part, so nothing of it may be used for tuning.
Random weights, nothing downloaded; transformers models are built from configs whose defaults are the published
base sizes, or given explicitly. The exporter's file cap (400 MiB) is below BERT-base's, RoBERTa-base's,
ELECTRA-base's and GPT-2's float32 size with their full vocabularies, so those four take a smaller vocabulary
(BERT-base: 21128, bert-base-chinese's; the others 16000): only the embedding table (a Gather) shrinks, every layer
is at full size. Mix: 18 image models (CNNs from mobile to ResNet-50 size, ViTs, hybrids, a segmentation model, a
detector, a CLIP image tower) and 14 text/speech models (7 text encoders, 2 decoders without KV cache, 2 text
encoder-decoders, 3 speech models of which Whisper has its decoder; the 3 encoder-decoders are exported whole);
batch 1-8, images 224-512 px, token sequences 64-512, audio 1-2 s (whisper: 30 s, 3000 mel frames). Each model's
rough ONNX Runtime CPU 1-thread latency must be 10-600 ms and the set's total at most about 6 s (as built: 20-257 ms,
2.8 s); every ONNX file under 400 MiB (the exporter's cap), the set under 6 GB.
Dropped: none (whisper first failed on torch.diff; fixed with an all-ones decoder mask, see its spec).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "devset2"))
from specs import BASE, NOCACHE, SpecList, f32, ids, img, ones, txt

PART = "heldout"  # every model of this set is held out (export.py: no split.csv, all in OUT/heldout)
DYNAMO_FALLBACK = False  # every model exported by the TorchScript exporter at opset 17, or failed

SPECS = SpecList()
timm, hf, dec = SPECS.timm, SPECS.hf, SPECS.dec


MINILM = dict(hidden_size=384, num_attention_heads=12, intermediate_size=1536)  # MiniLM-H384 (all-MiniLM-L*-v2)

# ---- timm CNNs, mobile to ResNet-50 size (published configurations, their native resolutions)
timm("resnet50", "resnet", "cnn", 224, 1)
timm("resnet18", "resnet", "cnn", 224, 4)
timm("efficientnet_b0", "efficientnet", "cnn", 224, 4)
timm("efficientnet_b1", "efficientnet", "cnn", 240, 2)
timm("mobilenetv3_large_100", "mobilenetv3", "cnn", 224, 8)
timm("mobilenetv2_100", "mobilenetv2", "cnn", 224, 8)
timm("regnety_016", "regnet", "cnn", 224, 2)
timm("convnext_tiny", "convnext", "cnn", 224, 1)
timm("densenet121", "densenet", "cnn", 224, 1)
timm("inception_v3", "inception", "cnn", 299, 2)
# ---- timm vision transformers and hybrids
timm("vit_small_patch16_224", "vit", "vit", 224, 2)
timm("vit_base_patch16_224", "vit", "vit", 224, 1)
timm("efficientvit_b1", "efficientvit_mit", "hybrid", 224, 4)
timm("levit_256", "levit", "hybrid", 224, 2)
timm("mobilevit_s", "mobilevit", "hybrid", 256, 1)
# ---- transformers: segmentation, detection, a CLIP image tower
hf("hf_segformer_b1_512_b1", "segformer", "seg", "SegformerForSemanticSegmentation", "SegformerConfig",
   dict(hidden_sizes=[64, 128, 320, 512], decoder_hidden_size=256, num_labels=150), img(1, 512),
   attr="logits")  # SegFormer-B1, ADE20K head (150 classes)
hf("hf_detr_r50_512_b1", "detr", "det", "DetrModel", "DetrConfig",
   dict(use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=dict(model_type="resnet", out_features=["stage4"])),  # ResNetConfig's defaults: ResNet-50
   img(1, 512))  # DETR-R50: 6+6 layers, d_model 256, FFN 2048, 100 queries
hf("hf_clip_vit_b32_vision_224_b2", "clip", "vit", "CLIPVisionModel", "CLIPVisionConfig", {},
   img(2, 224))  # CLIPVisionConfig's defaults: the ViT-B/32 image tower
# ---- transformers: text encoders at base size (vocabulary cut only where the file would pass 400 MiB)
hf("hf_bert_base_v21k_s128_b1", "bert", "text", "BertModel", "BertConfig", dict(BASE, vocab_size=21128),
   txt(1, 128, 21128))  # bert-base-chinese's config (BERT-base body, 21128-token vocabulary)
hf("hf_roberta_base_v16k_s256_b1", "roberta", "text", "RobertaModel", "RobertaConfig", dict(BASE, vocab_size=16000),
   txt(1, 256, 16000))
hf("hf_distilbert_base_s128_b1", "distilbert", "text", "DistilBertModel", "DistilBertConfig", {},
   txt(1, 128, 30522))  # DistilBertConfig's defaults: distilbert-base (6 layers, 768)
hf("hf_albert_base_s64_b1", "albert", "text", "AlbertModel", "AlbertConfig",
   dict(BASE, embedding_size=128), txt(1, 64, 30000))  # albert-base-v2 (12 shared layers)
hf("hf_electra_base_v16k_s64_b2", "electra", "text", "ElectraModel", "ElectraConfig",
   dict(BASE, embedding_size=768, vocab_size=16000), txt(2, 64, 16000))  # the electra-base discriminator body
hf("hf_minilm_l12_h384_s128_b2", "bert", "text", "BertModel", "BertConfig", dict(MINILM, num_hidden_layers=12),
   txt(2, 128, 30522))  # all-MiniLM-L12-v2 / MiniLM-L12-H384
hf("hf_minilm_l6_h384_s512_b1", "bert", "text", "BertModel", "BertConfig", dict(MINILM, num_hidden_layers=6),
   txt(1, 512, 30522))  # all-MiniLM-L6-v2
# ---- transformers: decoders without KV cache
dec("hf_gpt2_small_v16k_s128_b1", "gpt2", "GPT2Model", "GPT2Config", {}, 1, 128)  # GPT-2 124M body, vocab 16000
dec("hf_distilgpt2_s256_b1", "gpt2", "GPT2Model", "GPT2Config", dict(n_layer=6), 1, 256, vocab=50257)
# ---- transformers: encoder-decoders, exported whole (encoder over the source, decoder with cross-attention)
hf("hf_t5_small_s256_d64_b1", "t5", "text", "T5Model", "T5Config", dict(NOCACHE),
   txt(1, 256, 32128) + ids("decoder_input_ids", 32128, 1, 64), call_kwargs=NOCACHE)  # T5Config's defaults: t5-small
hf("hf_marian_en_de_s64_b2", "marian", "text", "MarianModel", "MarianConfig",
   dict(NOCACHE, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048),  # opus-mt-en-de (vocab 58101)
   txt(2, 64, 58101) + ids("decoder_input_ids", 58101, 2, 64), call_kwargs=NOCACHE)
# ---- transformers: speech
hf("hf_whisper_tiny_30s_d32_b1", "whisper", "speech", "WhisperModel", "WhisperConfig", dict(NOCACHE),
   f32("input_features", 1, 80, 3000) + ids("decoder_input_ids", 51865, 1, 32) + ones("decoder_attention_mask", 1, 32),
   call_kwargs=NOCACHE)  # WhisperConfig's defaults: whisper-tiny, encoder over 30 s + decoder over 32 tokens; the
# all-ones decoder mask keeps transformers from checking position ids for packed sequences (torch.diff: no ONNX op)
hf("hf_wav2vec2_base_1s_b1", "wav2vec2", "speech", "Wav2Vec2Model", "Wav2Vec2Config", {},
   f32("input_values", 1, 16000))  # Wav2Vec2Config's defaults: wav2vec2-base (12 layers, 768)
hf("hf_hubert_base_2s_b1", "hubert", "speech", "HubertModel", "HubertConfig", {},
   f32("input_values", 1, 32000))  # HubertConfig's defaults: hubert-base-ls960

SPEC_BY_NAME = {s.name: s for s in SPECS}
assert len(SPEC_BY_NAME) == len(SPECS), "duplicate spec names"
assert 30 <= len(SPECS) <= 34, "about 32 models"
