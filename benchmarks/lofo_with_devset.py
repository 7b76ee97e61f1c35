"""Leave-one-family-out over the zoo and real exported models together.

The zoo's leave-family-out figure (`hase train`'s cross-validation) only holds out families Hase wrote. Here the
real models of dev-set folders join a copy of the store as families of their own, so each fold trains without
one family, real or built here, and predicts it: the held-out figure of a predictor that has seen real graphs of
other families. A folder's `models.tsv` gives a model's family: its `kind` column (cnn, hybrid, vit, text,
decoder, speech, seg, ...) when it has one, else `real-<group>` of a `hase evaluate --devset` CSV beside it, else
`real`. Never give it a frozen held-out part.

Usage: python benchmarks/lofo_with_devset.py --store data/hase.sqlite --device cpu-1t \
           --models models/dev2/check --models models/dev --groups reports/eval/a-dev/devset.csv --out /tmp/lofo
Prints the held-out scores (within ±10 %, RMSPE) of the zoo's families and of the real ones, for Hase and the
FLOPs+bytes line.
"""
from __future__ import annotations

import argparse
import csv
import shutil
from pathlib import Path

import pandas as pd

from hase.measure.collect import collect
from hase.measure.config import load_collect_config
from hase.measure.store import Store
from hase.measure.types import ModelSource
from hase.predict.metrics import score
from hase.predict.train import load_train_config, train


def real_sources(folders: list[Path], groups: dict[str, str]) -> list[ModelSource]:
    """Every model of the folders as a ModelSource whose family is its kind (or its dev-set group)."""
    out = []
    for folder in folders:
        rows = list(csv.DictReader((folder / "models.tsv").open(), delimiter="\t"))
        for row in rows:
            path = folder / row["file"]
            if not path.exists():
                continue
            kind = row.get("kind") or groups.get(path.name, "")
            family = f"real-{kind.lower()}" if kind else "real"
            out.append(ModelSource(path.stem, family, path))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--device", default="cpu-1t")
    ap.add_argument("--models", action="append", required=True, type=Path, help="a dev-set folder (repeatable)")
    ap.add_argument("--groups", action="append", default=[], type=Path,
                    help="devset.csv of `hase evaluate --devset`: its group column names a model's family")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--config", default=Path("configs/predictor.toml"), type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store_path = args.out / "lofo.sqlite"
    if not store_path.exists():
        shutil.copy(args.store, store_path)
    groups = {}
    for f in args.groups:
        g = pd.read_csv(f)
        groups |= dict(zip(g["model"], g["group"], strict=True))
    sources = real_sources(args.models, groups)
    cfg = load_collect_config("configs/devices.toml", [args.device])
    with Store(store_path) as store:
        collect(sources, cfg, store)
    result = train(store_path, args.out / "predictors", load_train_config(args.config), args.device)
    cv = pd.read_csv(args.out / "predictors" / args.device / "cv_models.csv")
    target = result.manifest.targets[result.default_target]
    held = cv[(cv["split"] == "held_out") & (cv["target"] == result.default_target)
              & (cv["calibration"] == target.calibration.calibration.name)]  # one row per model: the shipped form
    base = pd.read_csv(args.out / "predictors" / args.device / "baselines.csv").set_index("model_id")
    held = held.join(base[["flops", "flops+bytes"]], on="model_id")
    rows = []
    for label, part in [("zoo families", held[~held["family"].str.startswith("real")]),
                        ("real families", held[held["family"].str.startswith("real")]), ("all", held)]:
        for method, col in [("hase", "pred_ms"), ("flops", "flops"), ("flops+bytes", "flops+bytes")]:
            s = score(part["measured_ms"], part[col])
            rows.append({"part": label, "method": method, "n": s.n, "acc10": s.acc10, "acc5": s.acc5,
                         "rmspe": s.rmspe})
    print(f"leave-one-family-out, target {result.default_target}, calibration {target.calibration.calibration.name}, "
          f"{held['family'].nunique()} families held out")
    print(pd.DataFrame(rows).round(3).to_string(index=False))
    per_family = held.groupby("family")[["measured_ms", "pred_ms"]].apply(
        lambda p: pd.Series({"n": len(p), "acc10": score(p["measured_ms"], p["pred_ms"]).acc10,
                             "rmspe": score(p["measured_ms"], p["pred_ms"]).rmspe}))
    print(per_family.round(3).to_string())


if __name__ == "__main__":
    main()
