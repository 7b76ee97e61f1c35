"""Benchmark of the median-interval stop (`rel_ci`): what it saves in a spans-only collect, and what it moves.

The same zoo models are collected spans-only (what `make own-predictor` runs) into fresh temporary stores under
two measuring settings, alternately A, B, A, B, ... (`--rounds` of each): A the config as it is, B the same with
`[model_timing] rel_ci` and `[profile] min_runs`/`rel_ci` set. The canary and the later timing pass are off in both,
so the figures are the stop rules' own. Printed: each setting's collect wall time, and how far B's figures lie from
A's (median |ln(B/A)| of the model latency, of the sum of node spans and of each node's span) beside how far A's own
two rounds lie apart: a stop rule that moves the figures less than a repeat does is as good a truth, cheaper.

Usage: python benchmarks/bench_stop_rule.py [--limit 80] [--rounds 2] [--rel-ci 0.02] [--profile-min-runs 5]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from figures import print_figures

from hase import paths
from hase.measure import collect as coll
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.host import host_fingerprint
from hase.sampler.config import read_zoo
from hase.zoo.order import coverage_order


def sample(sources: list[coll.ModelSource], limit: int) -> list[coll.ModelSource]:
    """`limit` models spread over the coverage order (architectures and blocks alike), every k-th one."""
    step = max(len(sources) // limit, 1)
    return sources[::step][:limit]


def run(sources: list[coll.ModelSource], cfg: coll.CollectConfig, folder: Path, tag: str
        ) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    """One spans-only collect into a fresh store: its wall time, model rows and node spans (a fresh store's model ids
    are the models' names)."""
    with Store(folder / f"{tag}.sqlite") as store:
        report = coll.collect(sources, cfg, store, spans_only=True)
        mm, spans = store.table("model_measurements"), store.table("node_spans")
    return report.wall_s, mm.set_index("model_id"), spans.set_index(["model_id", "node_name"])


def apart(a: pd.Series, b: pd.Series) -> float:
    """Median |ln(b/a)| over the rows both have with positive values, in %."""
    both = pd.concat([a, b], axis=1, join="inner").dropna()
    both = both[(both > 0).all(axis=1)]
    return float(np.median(np.abs(np.log(both.iloc[:, 1] / both.iloc[:, 0])))) * 100 if len(both) else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default=paths.ZOO_CONFIG)
    ap.add_argument("--devices", default=paths.DEVICES_CONFIG)
    ap.add_argument("--device", default=paths.DEFAULT_DEVICE)
    ap.add_argument("--zoo-dir", default=paths.ZOO_DIR)
    ap.add_argument("--limit", type=int, default=80, help="models, spread over the zoo's coverage order")
    ap.add_argument("--rounds", type=int, default=2, help="collects of each setting, alternating")
    ap.add_argument("--rel-ci", type=float, default=0.02, help="B's rel_ci for model timing and profiled runs")
    ap.add_argument("--profile-min-runs", type=int, default=5, help="B's [profile] min_runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    base = coll.load_collect_config(args.devices, [args.device])
    settings = dataclasses.replace(base.settings, model_passes=1,
                                   canary=dataclasses.replace(base.settings.canary, enabled=False))
    a = coll.CollectConfig(base.devices, settings)
    b = coll.CollectConfig(base.devices, dataclasses.replace(
        settings, model=dataclasses.replace(settings.model, rel_ci=args.rel_ci),
        profile_min_runs=min(args.profile_min_runs, settings.profile_runs), profile_rel_ci=args.rel_ci))
    config = read_zoo(paths.config_file(args.zoo, paths.ZOO_CONFIG))
    config = dataclasses.replace(config, specs=tuple(coverage_order(config.specs)))
    sources = sample(list(coll.zoo_sources(config, args.zoo_dir)), args.limit)
    walls: dict[str, list[float]] = {"A": [], "B": []}
    rows: dict[str, list[tuple[pd.DataFrame, pd.DataFrame]]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="hase_stop_") as tmp:
        for r in range(args.rounds):
            for tag, cfg in (("A", a), ("B", b)):
                wall, mm, spans = run(sources, cfg, Path(tmp), f"{tag}{r}")
                walls[tag].append(wall)
                rows[tag].append((mm, spans))
                print(f"round {r + 1} {tag}: {wall:.1f} s", file=sys.stderr)
    (a0, sa0), (a1, sa1) = rows["A"][0], rows["A"][-1]
    (b0, sb0) = rows["B"][0]
    span_sum = "node_span_sum_us"
    fp = host_fingerprint()
    figures = {
        "models": len(sources), "rounds": args.rounds,
        "A_wall_s_median": round(float(np.median(walls["A"])), 1),
        "B_wall_s_median": round(float(np.median(walls["B"])), 1),
        "A_walls_s": [round(w, 1) for w in walls["A"]], "B_walls_s": [round(w, 1) for w in walls["B"]],
        "B_saves_pct": round((1 - np.median(walls["B"]) / np.median(walls["A"])) * 100, 1),
        "profiled_runs_A_median": float(a0["n_profiled_runs"].median()),
        "profiled_runs_B_median": float(b0["n_profiled_runs"].median()),
        "timed_runs_A_median": float(a0["n_runs"].median()), "timed_runs_B_median": float(b0["n_runs"].median()),
        "latency_A_vs_A_pct": round(apart(a0["latency_ms"], a1["latency_ms"]), 2),
        "latency_A_vs_B_pct": round(apart(a0["latency_ms"], b0["latency_ms"]), 2),
        "span_sum_A_vs_A_pct": round(apart(a0[span_sum], a1[span_sum]), 2),
        "span_sum_A_vs_B_pct": round(apart(a0[span_sum], b0[span_sum]), 2),
        "node_span_A_vs_A_pct": round(apart(sa0["span_ms"], sa1["span_ms"]), 2),
        "node_span_A_vs_B_pct": round(apart(sa0["span_ms"], sb0["span_ms"]), 2),
        "B_settings": f"[model_timing] rel_ci={args.rel_ci}, [profile] min_runs={b.settings.profile_min_runs} "
                      f"rel_ci={args.rel_ci}",
        "host": fp.digest, "cpu": f"family {fp.cpu_family} model {fp.cpu_model_id}",
        **sessions.device_metadata(base.devices[0]),
    }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
