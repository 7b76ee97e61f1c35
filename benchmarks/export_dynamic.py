"""Export a few HuggingFace text encoders with symbolic `batch` and `sequence` dimensions, as users export them
for serving, for the devset's batch sweep (`make devset-sweep`).

The development set (`make devset`) is exported with static shapes, and a transformer's static export bakes its
batch into Reshape targets, so `hase evaluate --batch-sweep` cannot make those symbolic afterwards (CNNs it can).
This script re-exports small encoders from their transformers configs (random weights, nothing downloaded) with
`dynamic_axes`, opset 17, TorchScript exporter. It needs torch and transformers, which the devset's own venv has:

    /tmp/devset-venv/bin/python benchmarks/export_dynamic.py --out models/dev/dynamic-text

Writes OUT/<name>.onnx and OUT/models.tsv (file, source, inputs at the sequence length the sweep uses,
ort_cpu_1t_median_ms left empty so the sweep's latency filter does not apply to them).
"""
from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

SEQ = 128  # the token count the sweep evaluates (`--free-dim sequence=128`)

# name -> (model class, config class, config keyword arguments, vocabulary size); small, as the devset's are
MODELS = {
    "hf_bert_mini_dyn": ("BertModel", "BertConfig",
                         {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
                          "intermediate_size": 1024}, 30522),
    "hf_electra_small_dyn": ("ElectraModel", "ElectraConfig", {}, 30522),
    "hf_roberta_4l_dyn": ("RobertaModel", "RobertaConfig",
                          {"hidden_size": 384, "num_hidden_layers": 4, "num_attention_heads": 6,
                           "intermediate_size": 1536}, 50265),
    "hf_distilbert_dyn": ("DistilBertModel", "DistilBertConfig", {"n_layers": 3}, 30522),
}


def export(name: str, out: Path) -> dict[str, str]:
    """Export one encoder with symbolic batch and sequence; its models.tsv row."""
    import torch
    import transformers

    cls, cfg_cls, kwargs, vocab = MODELS[name]
    cfg = getattr(transformers, cfg_cls)(**kwargs)
    cfg._attn_implementation = "eager"  # the attention the TorchScript exporter traces with symbolic shapes
    model = getattr(transformers, cls)(cfg).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(0, vocab, (2, SEQ))
    mask = torch.ones(2, SEQ, dtype=torch.int64)
    path = out / f"{name}.onnx"
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(Encoder(), (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["output"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "output": axes})
    return {"file": path.name, "source": f"transformers {cls}({cfg_cls}({kwargs})), symbolic batch and sequence",
            "inputs": f"input_ids:int64[1x{SEQ}];attention_mask:int64[1x{SEQ}]", "ort_cpu_1t_median_ms": ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="models/dev/dynamic-text")
    ap.add_argument("--only", default=None, help="comma-separated names of " + ", ".join(MODELS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    rows = [export(n, out) for n in (args.only.split(",") if args.only else MODELS)]
    with open(out / "models.tsv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} models in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
