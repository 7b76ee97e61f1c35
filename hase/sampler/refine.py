"""Adaptive sampling: a new round of block models around the sampled kernels the predictor gets most wrong.

After a round is collected, each sampled block's kernel (the largest kernel of the block's own op, e.g. its
convolution) is predicted k-fold: the store's kernels are cut into `folds` parts, and each part is predicted
by the per-op forests (`hase.predict.predictor.KernelPredictor`, the settings of configs/predictor.toml)
fitted on the others. Every block whose kernel's held-out error exceeds `threshold` (at most `max_points`,
the worst first) gets `neighbours` new blocks around it: each size multiplied by a random factor around 1,
the block's kind (depthwise, activation, op) kept. nn-Meter does the same (+20 around each point above 10 %
error, 3 rounds). The round is written as a plain zoo config (`<config>.round<N>.toml`), so `hase collect
--zoo` measures it like any zoo and skips what is stored; the same store, config and seed give the same round.
"""
from __future__ import annotations

import json
import math
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.files import write_atomic
from hase.measure.store import Store
from hase.predict import dataset
from hase.predict.train import load_train_config
from hase.sampler.config import read_zoo, zoo_sampler
from hase.sampler.draw import SamplerConfig
from hase.zoo.blocks import MAIN_OPS, block_flops, is_sampled
from hase.zoo.registry import ModelSpec, get_family

POINTS_COLUMNS = ("model_id", "family", "kernel_id", "op_type", "y_ms", "pred_ms", "error")
_SHA_SUFFIX = re.compile(r"-[0-9a-f]{8,64}$")
_KEEP = frozenset({"act", "gelu", "op", "kind", "skip", "rank", "dilation"})  # the block's kind: never perturbed
_SPREAD = 0.3  # sd of the log-factor a neighbour's sizes are multiplied by


@dataclass(frozen=True)
class RefineResult:
    """One refinement round: the points and their held-out errors, the chosen ones, the new blocks."""

    round: int
    points: pd.DataFrame  # POINTS_COLUMNS, one row per sampled block measured
    chosen: tuple[str, ...]  # model ids of the blocks refined, worst first
    specs: tuple[ModelSpec, ...]  # the new round's blocks
    config_path: Path | None  # the round's zoo config (None when there was nothing to refine)


def spec_from_name(model_id: str) -> ModelSpec:
    """The block spec a sampled model's name encodes (`sampled-conv_b1_i32_...`, a store suffix `-<sha>` allowed)."""
    family_name, _, rest = model_id.partition("_")
    family = get_family(family_name)
    labels = _SHA_SUFFIX.sub("", rest).split("_")
    if len(labels) != len(family.params):
        raise HaseError(f"model {model_id!r} is not named like a {family_name} block: rerun its zoo to rebuild it")
    values: dict[str, Any] = {}
    for param, label in zip(family.params, labels, strict=True):
        text = label[len(param.tag):] if label.startswith(param.tag) else label
        kind = type(param.default)
        try:
            values[param.name] = kind(text) if kind is not bool else text == "1"
        except ValueError:
            raise HaseError(f"model {model_id!r}: {param.name} {text!r} is not a {kind.__name__}") from None
    return family.spec(values)


def point_errors(store_path: str | Path, device: str, cfg: SamplerConfig, predictor_config: str | Path) -> pd.DataFrame:
    """Each measured sampled block's kernel with its k-fold held-out prediction and error (pred / y - 1)."""

    data = dataset.load_device_data(store_path, device)
    y = dataset.kernel_targets(data, cfg.target)
    main = _main_kernels(data.nodes, y)
    if main.empty:
        raise HaseError(f"the store holds no measured sampled blocks for {device!r}: collect a zoo with a [sampler] "
                        f"table first (make collect)")
    make = load_train_config(predictor_config)
    fold = np.random.default_rng(cfg.seed).permutation(len(y)) % cfg.folds
    pred = pd.Series(np.nan, index=y.index)
    for k in range(cfg.folds):
        train, test = y.index[fold != k], y.index[fold == k]
        wanted = test[test.isin(main["kernel_id"])]
        if len(wanted) and len(train):
            fitted = make.predictor(cv=True).fit([data.specs[i] for i in train], y[train].to_numpy())
            pred[wanted] = fitted.predict([data.specs[i] for i in wanted])
    main["pred_ms"] = main["kernel_id"].map(pred)
    main["error"] = main["pred_ms"] / main["y_ms"] - 1
    return main[list(POINTS_COLUMNS)].dropna().reset_index(drop=True)


def _main_kernels(nodes: pd.DataFrame, y: pd.Series) -> pd.DataFrame:
    """Per sampled block: its main kernel (of the block family's ops, the largest measured) and its y_ms."""
    rows = nodes[nodes["family"].map(is_sampled)].copy()
    rows = rows[[op in MAIN_OPS.get(fam, ()) for op, fam in zip(rows["op_type"], rows["family"], strict=True)]]
    rows["y_ms"] = rows["kernel_id"].map(y)
    rows = rows.dropna(subset=["y_ms"]).sort_values(["model_id", "y_ms"], ascending=[True, False])
    return rows.groupby("model_id", as_index=False).head(1)[["model_id", "family", "kernel_id", "op_type", "y_ms"]]


def neighbours(spec: ModelSpec, cfg: SamplerConfig, round_no: int) -> list[ModelSpec]:
    """`cfg.neighbours` distinct blocks around `spec` (deterministic given the seed, round and spec)."""
    rng = np.random.default_rng([cfg.seed, round_no, zlib.crc32(spec.name.encode())])
    family = get_family(spec.family)
    base = spec.kwargs()
    out: dict[str, ModelSpec] = {}
    for _ in range(cfg.neighbours * 20):
        if len(out) == cfg.neighbours:
            break
        values = {k: _nudge(v, rng) if k not in _KEEP and isinstance(v, int) else v for k, v in base.items()}
        values = _keep_kind(spec.family, base, values)
        if block_flops(spec.family, values) > cfg.max_mflop * 1e6:
            continue
        try:
            new = family.spec(values)
        except HaseError:
            continue
        if new.name != spec.name:
            out.setdefault(new.name, new)
    return list(out.values())


def _nudge(value: int, rng: np.random.Generator) -> int:
    """A size multiplied by exp(N(0, SPREAD)), kept a multiple of 8 where it was one."""
    new = max(1, round(value * math.exp(rng.normal(0.0, _SPREAD))))
    return max(8, round(new / 8) * 8) if value % 8 == 0 and value >= 16 else new


def _keep_kind(family: str, base: Mapping[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """A neighbour's values made consistent with the base block's kind (depthwise stays depthwise, ...)."""
    if family == "sampled-conv":
        p["stride"], p["kernel"] = base["stride"], base["kernel"]
        if base["groups"] == base["c_in"] and base["groups"] > 1:
            p["c_out"] = p["groups"] = p["c_in"]
        elif base["groups"] > 1:
            width = base["c_in"] // base["groups"]
            p["c_in"] = max(width, p["c_in"] // width * width)
            p["groups"] = p["c_in"] // width
            p["c_out"] = max(p["groups"], p["c_out"] // p["groups"] * p["groups"])
        else:
            p["groups"] = 1
        p["spatial"] = max(p["spatial"], p["kernel"])
    if family == "sampled-pool":
        p["kernel"], p["stride"] = base["kernel"], base["stride"]
    return p


def refine(config_path: str | Path, store_path: str | Path, device: str, predictor_config: str | Path,
           out_dir: str | Path) -> RefineResult:
    """Compute the points' errors and write the next round's zoo config into `out_dir` (none if nothing to refine).

    Round N is refused while round N-1's blocks are not all in the store (collect it first), and after
    `[sampler] rounds` rounds.
    """
    zoo = read_zoo(config_path)
    cfg, stem = zoo_sampler(zoo), Path(config_path).stem
    if cfg is None:
        raise HaseError(f"{config_path} has no [sampler] table: add one (see configs/zoo_small.toml) to refine")
    done = _round_files(Path(out_dir), stem)
    if len(done) >= cfg.rounds:
        return RefineResult(len(done), pd.DataFrame(columns=POINTS_COLUMNS), (), (), None)
    _check_collected(done, _registered(store_path), store_path)
    points = point_errors(store_path, device, cfg, predictor_config)
    round_no = len(done) + 1
    worst = points.loc[points["error"].abs().sort_values(ascending=False).index]
    chosen = tuple(worst.loc[worst["error"].abs() > cfg.threshold, "model_id"][: cfg.max_points])
    known = set(points["model_id"]) | {s.name for s in zoo.specs}
    specs: dict[str, ModelSpec] = {}
    for model_id in chosen:
        for spec in neighbours(spec_from_name(str(model_id)), cfg, round_no):
            if spec.name not in known:
                specs.setdefault(spec.name, spec)
    if not specs:
        return RefineResult(round_no, points, chosen, (), None)
    path = Path(out_dir) / f"{stem}.round{round_no}.toml"

    write_atomic(path, round_toml(list(specs.values()), zoo.seed, zoo.opset, str(config_path), round_no))
    return RefineResult(round_no, points, chosen, tuple(specs.values()), path)


def _round_files(folder: Path, stem: str) -> list[Path]:
    return sorted(folder.glob(f"{stem}.round*.toml"), key=lambda p: int(p.suffixes[-2].removeprefix(".round")))


def _registered(store_path: str | Path) -> set[str]:
    """Names of the models a collect has split into the store (measured, or skipped after the split)."""

    with Store(store_path, readonly=True) as store:
        return {_SHA_SUFFIX.sub("", str(m)) for m in store.table("models")["model_id"]}


def _check_collected(rounds: Sequence[Path], collected: set[str], store_path: str | Path) -> None:
    """The last round's blocks must all be collected before the next round is computed."""
    if not rounds:
        return
    missing = [s.name for s in read_zoo(rounds[-1]).specs if s.name not in collected]
    if missing:
        raise HaseError(f"{len(missing)} blocks of {rounds[-1]} are not measured in {store_path} yet: run "
                        f"`hase collect --zoo {rounds[-1]}` first")


def round_toml(specs: Sequence[ModelSpec], seed: int, opset: int, parent: str, round_no: int) -> str:
    """A zoo config listing `specs` one by one (a grid of single values each), with where it came from."""
    lines = [f"# Round {round_no} of the kernel sampler of {parent}: blocks around the sampled kernels with the",
             f"# largest held-out error (hase zoo --refine, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
             f"seed = {seed}", f"opset = {opset}", "", "[families]"]
    by_family: dict[str, list[ModelSpec]] = {}
    for spec in specs:
        by_family.setdefault(spec.family, []).append(spec)
    for family, members in by_family.items():
        lines.append(f"{family} = [")
        lines.extend("    { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in s.params) + " }," for s in members)
        lines.append("]")
    return "\n".join(lines) + "\n"
