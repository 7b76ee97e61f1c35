"""hase.measure.signature: every probe runs on the real ONNX Runtime, and two signatures compare per op family."""
from __future__ import annotations

import dataclasses

import pytest

from hase.errors import HaseError
from hase.measure.signature import (
    DIFFERENT,
    FAMILIES,
    NOISY,
    PROBES,
    SAME,
    Signature,
    compare,
    measure_signature,
    verdict,
)
from hase.runtime.types import EPConfig


@pytest.fixture(scope="module")
def signature() -> Signature:
    """This host's signature, quickly (about 2 s)."""
    return measure_signature(EPConfig(name="cpu-1t"), budget_s=2.0)


def test_every_probe_runs_and_every_family_is_covered(signature):
    assert [p.name for p in signature.probes] == [p.name for p in PROBES]
    assert {p.family for p in signature.probes} == set(FAMILIES)
    for p in signature.probes:
        assert (p.ms > 0 and p.n_runs >= 15 and not p.error) or (p.family == "reorder" and p.error), p
    assert signature.host_fp and signature.device == "cpu-1t"
    assert Signature.from_dict(signature.to_dict()) == signature
    with pytest.raises(HaseError, match="measure it again"):
        Signature.from_dict({**signature.to_dict(), "probes": [{"name": "x"}]})


def test_a_host_that_runs_a_family_slower_is_told_apart(signature):
    assert {v.verdict for v in compare(signature, signature)} <= {SAME, NOISY}
    slower_conv = dataclasses.replace(signature, probes=tuple(
        dataclasses.replace(p, ms=p.ms * 1.5, spread=0.01) if p.family == "conv" else p for p in signature.probes))
    by_family = {v.family: v for v in compare(slower_conv, signature)}
    assert by_family["conv"].time_ratio == pytest.approx(1.5) and by_family["conv"].n_probes == 3
    assert by_family["conv"].verdict in (DIFFERENT, NOISY)


def test_the_verdict_weighs_the_gap_against_the_noise():
    assert verdict(1.05, 0.02) == SAME
    assert verdict(1.30, 0.05) == DIFFERENT
    assert verdict(1.15, 0.20) == NOISY and verdict(1.02, 0.40) == NOISY
    assert verdict(0.70, 0.05) == DIFFERENT
