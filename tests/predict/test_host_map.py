"""hase.predict.host_map: the size curve and per-forest offsets recovered from kernels whose host ratio grows with
their size, the intensity curve from kernels of one size that the target host runs slower or faster by their FLOPs
per byte, flat past the values measured, shrunk where few kernels speak, written and read back unchanged."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hase.predict.host_map import AI_FLOOR, KNOTS, HostMap, fit_host_map


def _kernels(n: int = 4000) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Predictions from 1 µs to 1 ms; the target host runs them 1.3x at 1 µs rising to 2.2x at 1 ms (linear in
    log size, as measured between a Zen 5 and a Zen 4 VM), and forest "B" a further 1.5x."""
    p = np.logspace(-3, 0, n)
    ratio = 1.3 + 0.3 * (np.log10(p) + 3)
    labels = ["A" if i % 2 else "B" for i in range(n)]
    y = p * ratio * np.where(np.array(labels) == "B", 1.5, 1.0)
    return labels, p, y


def test_the_curve_follows_the_size_and_the_offset_the_forest():
    labels, p, y = _kernels()
    m = fit_host_map(labels, p, y, shrink=5.0)
    moved = p * np.exp(m.log_factor(p, labels))
    np.testing.assert_allclose(moved, y, rtol=0.06)  # a knot weighs its larger kernels more: ratio of sums
    assert math.exp(m.offsets["B"] - m.offsets["A"]) == pytest.approx(1.5, rel=0.03)
    # one factor for all (the old per-forest scale) would miss the small kernels by far more
    one = y.sum() / p.sum()
    assert np.max(np.abs(p * one / y - 1)) > 0.3


def test_past_the_measured_sizes_the_curve_is_flat_and_an_unknown_forest_gets_no_offset():
    labels, p, y = _kernels()
    m = fit_host_map(labels, p, y)
    big = m.log_factor([10.0, 100.0], ["A", "A"])
    assert big[0] == pytest.approx(big[1]) and big[0] == pytest.approx(m.log_factor([1.0], ["A"])[0], abs=0.05)
    assert m.log_factor([1e-2], ["never seen"])[0] == pytest.approx(float(np.interp(-2.0, m.knots, m.curve)))


def test_few_kernels_stay_near_the_global_ratio():
    p = np.array([1e-3, 1e-3, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    y = p * np.array([4.0, 4.0] + [2.0] * 8)  # two tiny kernels at 4x, the rest (and the sums) at 2x
    m = fit_host_map(["A"] * len(p), p, y, shrink=5.0)
    g = math.log(y.sum() / p.sum())
    small = float(np.interp(-3.0, m.knots, m.curve))
    assert g < small < math.log(4.0)  # pulled toward the global ratio by the shrink


def test_a_map_is_written_and_read_back_and_bad_ones_are_named():
    labels, p, y = _kernels()
    m = fit_host_map(labels, p, y)
    assert HostMap.from_dict(m.to_dict()).log_factor(p, labels) == pytest.approx(m.log_factor(p, labels), abs=1e-5)
    assert len(m.knots) == len(KNOTS) and "×" in m.describe() and "ms" in m.describe()
    with pytest.raises(ValueError, match="knots must increase"):
        HostMap((0.0, -1.0), (0.0, 0.0))
    with pytest.raises(ValueError, match="expected knots"):
        HostMap.from_dict({"curve": [0.0]})
    with pytest.raises(ValueError, match="no kernel"):
        fit_host_map(["A"], [float("nan")], [1.0])


def test_the_intensity_curve_separates_memory_bound_from_compute_bound_kernels_of_one_size():
    """As from a Zen 4 to a Xeon VM: at every size, kernels under 1 FLOP/byte run 2x slower, those over 10 FLOPs/byte
    0.75x, in the same forest: a size curve alone averages them, the intensity curve tells them apart."""
    rng = np.random.default_rng(0)
    n = 4000
    p = 10 ** rng.uniform(-3, 0, n)
    ai = np.where(rng.random(n) < 0.5, 10 ** rng.uniform(-1, -0.2, n), 10 ** rng.uniform(1.2, 2.5, n))
    y = p * np.where(ai < 1, 2.0, 0.75)
    labels = ["Gemm"] * n
    m = fit_host_map(labels, p, y, shrink=5.0, intensity=ai)
    np.testing.assert_allclose(p * np.exp(m.log_factor(p, labels, ai)), y, rtol=0.05)
    size_only = fit_host_map(labels, p, y, shrink=5.0)
    assert np.max(np.abs(p * np.exp(size_only.log_factor(p, labels)) / y - 1)) > 0.3
    # a kernel without arithmetic (a Reshape) is memory-bound: it is read at the floor of the curve
    assert m.log_factor([1e-2], ["Gemm"], [0.0])[0] == pytest.approx(m.log_factor([1e-2], ["Gemm"], [AI_FLOOR])[0])
    again = HostMap.from_dict(m.to_dict())
    assert again == m and "FLOP/B" in m.describe()
    with pytest.raises(ValueError, match="intensity curve"):
        m.log_factor(p, labels)


def test_a_map_written_before_the_intensity_curve_applies_its_size_curve_alone():
    labels, p, y = _kernels()
    m = fit_host_map(labels, p, y)
    old = {k: v for k, v in m.to_dict().items() if not k.startswith("ai_")}
    assert "ai_knots" not in m.to_dict()
    np.testing.assert_allclose(HostMap.from_dict(old).log_factor(p, labels), m.log_factor(p, labels))
    with pytest.raises(ValueError, match="intensity knots"):
        HostMap((0.0,), (0.0,), {}, (0.0, 1.0), (0.0,))
