"""CUDA-EP profiles and CUPTI records CAPTURED on a real GPU, for the CPU-only suite.

Captured by `scripts/gpu/run_on_device.sh` (step `fixtures`) on 2026-11-28: NVIDIA H200 (driver 580.159.04),
onnxruntime-gpu 1.31.1 (CUDA 13.0), cupti-python 13.0.1, Intel Xeon (family 6 model 207) host; each a zoo model
profiled with `profile_model(..., runs=3, warmup=1, cupti=True)`: ORT's profile (4 model_run events), every CUPTI
record of the recording (kernels, memcpy, memset, runtime and driver API calls) and the clock pair.
Files: tests/data/gpu/<stem>.profile.json.gz, .cupti.csv.gz (the records frame), .clock.json.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

from hase.profiling.gpu.records import ClockSync
from hase.runtime.profile import parse_events

DATA = Path(__file__).resolve().parents[2] / "data" / "gpu"
RESNET = "resnet_d10_w0.25_r64_b1"
BERT = "bert_l1_h64_a2_s32_b1_v2048_erf_matmul_div"
STEMS = (RESNET, BERT)


def captured(stem: str) -> tuple[pd.DataFrame, pd.DataFrame, ClockSync, dict]:
    """(profile events, CUPTI records frame, clock pair, run metadata) of one capture."""
    with gzip.open(DATA / f"{stem}.profile.json.gz", "rt", encoding="utf-8") as f:
        events = parse_events(json.load(f))
    records = pd.read_csv(DATA / f"{stem}.cupti.csv.gz", keep_default_na=False)
    clock = json.loads((DATA / f"{stem}.clock.json").read_text(encoding="utf-8"))
    pair = ClockSync(cupti_ns=clock["cupti_ns"], wall_ns=clock["wall_ns"], profile_start_ns=clock["profile_start_ns"])
    return events, records, pair, clock["metadata"]
