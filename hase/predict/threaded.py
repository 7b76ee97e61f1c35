"""A many-thread device made of a one-thread predictor: its forests and calibration, and its host's thread model.

`cpu-mt` forests trained on 2-thread spans learn a host's thread pool and its noise together (on a 2-vCPU VM a
2-thread run lands at one of two speeds: docs/results.md); the one-thread forests moved kernel by kernel to T threads
by the thread model (`hase.predict.threads`: t1 * (s + (1 - s) / T) + sigma * log2(T)) keep the thread count
explicit. On `56e9708810e3` (2026-11-29) that route scored 78.9-86.8 % within ±10 % of `dev14` at 2 threads, the
2-thread forests 73.7 %. `derive_threaded` writes such a device as an ordinary predictor directory (the source's
files, its manifest with the device, its thread count and `threads.moved_from`), so `hase predict --device cpu-mt`,
`--compare` and `hase evaluate --devset` use it as any other; `PredictorBundle.moved_threads` says how many threads
its kernels are moved to (ORT's default: this host's physical cores).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from hase.errors import HaseError
from hase.predict.bundle import EXTRA_FILES, MOVED_FROM, PredictorBundle, load_bundle, save_bundle
from hase.predict.threads import ThreadModel

THREAD_META = ("models", "kernels", "gated")  # what the manifest says of the thread model that moves the device


def derive_threaded(source: str | Path, out_dir: str | Path, device: str, intra_op_threads: int = 0,
                    thread_model: ThreadModel | None = None) -> Path:
    """Write `device` to `out_dir`: the one-thread predictor at `source` moved to `intra_op_threads` (0: ORT's default,
    one per physical core of the host predicting) by the thread model trained with it, or by `thread_model` (one of
    the same host, e.g. `hase host threads`'s). A source that is no one-thread CPU predictor, or has no thread model
    and none is given, is a HaseError naming the fix."""
    src = load_bundle(source)
    ep = src.ep_config()
    if ep.ep != "cpu" or ep.intra_op_threads != 1 or src.moved_threads() is not None:
        raise HaseError(f"{source}: a threaded device is made of a one-thread CPU predictor, and {src.device!r} runs "
                        f"{ep.ep} with {ep.intra_op_threads or 'the default'} intra-op threads: give a cpu-1t")
    model = thread_model if thread_model is not None else src.thread_model()
    if model is None:
        raise HaseError(f"{source}: predictor {src.device!r} has no thread model: collect the same zoo at ORT's "
                        "default threads into its store (`hase collect --device cpu-mt --spans-only`) and train it "
                        "again")
    if intra_op_threads < 0:
        raise HaseError(f"intra_op_threads must be 0 (ORT's default) or more, got {intra_op_threads}")
    m = src.manifest
    meta = dataclasses.replace(m.device_meta, device=device, intra_op_threads=intra_op_threads)
    manifest = dataclasses.replace(m, device=device, device_meta=meta,
                                   threads={**m.threads, MOVED_FROM: src.device,
                                            "thread_model": {"host": model.host, "threads": list(model.threads),
                                                             **{k: model.meta[k] for k in THREAD_META
                                                                if k in model.meta}}})
    assert src.path is not None  # load_bundle sets it
    extra = {name: pd.read_csv(src.path / name) for name in EXTRA_FILES if name in m.files}
    return save_bundle(out_dir, manifest, src.predictors, extra, model)


def device_thread_model(bundle: PredictorBundle) -> tuple[ThreadModel, str]:
    """The thread model a threaded device moves its kernels with here, and a line saying which: this host's own
    (`hase host threads`), the one trained with the device when this is its host, the one shipped for this host,
    else the shipped one of the nearest core count (`hase.predict.thread_estimate.pick_thread_model`), so a host
    with other cores is one `hase host threads` away, not a new predictor."""
    from hase.predict.thread_estimate import pick_thread_model  # noqa: PLC0415 - it imports the estimator
    from hase.runtime.host import host_fingerprint  # noqa: PLC0415

    return pick_thread_model(host_fingerprint(), bundle=bundle)


def is_threaded(bundle: PredictorBundle) -> bool:
    """Whether `bundle` is a one-thread predictor moved to threads (`derive_threaded`)."""
    return bundle.moved_threads() is not None
