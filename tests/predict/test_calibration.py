"""hase.predict.calibration: the fits recover known coefficients; the one relative least squares; entries."""
from __future__ import annotations

import numpy as np
import pytest

from hase.errors import HaseError
from hase.predict.calibration import (
    CANDIDATES,
    FITTERS,
    FORMS,
    Calibration,
    fit_calibration,
    large_rows,
    node_term,
    relative_lstsq,
    size_balance,
)


def test_fits_recover_exact_coefficients():
    rng = np.random.default_rng(0)
    s, n = rng.uniform(0.5, 50, 30), rng.integers(10, 300, 30).astype(float)
    y_scale = 0.8 * s + 0.3
    y_kernel = 0.8 * s - 0.004 * n + 0.3 + 0.004 * 300
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, n, y_scale, "scale", fitter)
        assert (c.alpha, c.beta, c.gamma) == pytest.approx((0.8, 0.3, 0.0), abs=1e-6)
        k = fit_calibration(s, n, y_kernel, "per_kernel", fitter)
        assert (k.alpha, k.gamma) == pytest.approx((0.8, -0.004), abs=1e-6)
        assert np.allclose(k.apply(s, n), y_kernel)


def test_relative_least_squares_weighs_every_model_alike():
    X = np.column_stack([np.array([1.0, 10.0, 100.0, 1000.0]), np.ones(4)])
    exact = X @ np.array([2.0, 0.5])
    assert relative_lstsq(X, exact) == pytest.approx([2.0, 0.5])
    noisy = exact * np.array([1.1, 1.0, 1.0, 1.0])  # 10 % off on the smallest model
    rel, ols = relative_lstsq(X, noisy), np.linalg.lstsq(X, noisy, rcond=None)[0]
    rel_err = np.abs(X @ rel / noisy - 1)
    ols_err = np.abs(X @ ols / noisy - 1)
    assert np.sqrt(np.mean(rel_err**2)) < np.sqrt(np.mean(ols_err**2))  # it minimises what RMSPE measures


def test_huber_resists_an_outlier_model():
    s = np.linspace(1, 20, 20)
    y = 0.5 * s + 0.1
    y[3] *= 3  # one model measured under contention
    huber = fit_calibration(s, np.ones(20), y, "scale", "huber")
    rel = fit_calibration(s, np.ones(20), y, "scale", "relative")
    assert abs(huber.alpha - 0.5) < abs(rel.alpha - 0.5) and huber.alpha == pytest.approx(0.5, rel=0.02)


def test_non_finite_and_non_positive_models_are_ignored():
    s = np.array([1.0, 2.0, 3.0, 4.0, 5.0, np.nan])
    y = np.array([2.5, 4.5, 6.5, 8.5, -1.0, 3.0])  # 2s + 0.5, one bad measurement, one missing sum
    c = fit_calibration(s, np.ones(6), y, "scale", "ols")
    assert (c.alpha, c.beta) == pytest.approx((2.0, 0.5))


def test_a_negative_intercept_never_makes_a_latency_negative():
    c = Calibration("per_kernel", "ols", 1.0, -0.03, -0.002)
    assert c.apply(10.0, 100) == pytest.approx(10.0 - 0.2 - 0.03)  # fitted sizes: the line itself
    assert c.apply(0.01, 1) == pytest.approx(0.0005)  # one tiny kernel: 5 % of its sum, not -0.022 ms
    warm = Calibration("per_kernel", "ols", 0.9, 0.05, -0.033)  # standalone sums: ~31 us a kernel too many
    assert warm.apply(30.0, 600) == pytest.approx(0.9 * 30 + 0.05 - 0.033 * 600)  # 7.25 ms: a quarter of the sum
    assert np.all(c.apply(np.array([0.001, 0.02, 5.0]), np.array([1, 2, 50])) > 0)


def test_raw_and_degenerate_calibrations():
    assert fit_calibration([1.0, 2.0], [1, 1], [3.0, 4.0], "raw", "none") == Calibration()
    assert fit_calibration([1.0, 2.0], [1, 1], [3.0, 4.0], "per_kernel", "ols") == Calibration()  # too few models
    with pytest.raises(HaseError, match="unknown calibration"):
        fit_calibration([1.0], [1], [1.0], "cubic", "ols")
    assert {f for f, _ in CANDIDATES} == set(FORMS) and {f for _, f in CANDIDATES} == set(FITTERS)
    assert len(CANDIDATES) == 13


def test_large_form_reads_gamma_off_small_models_and_fits_alpha_on_large_ones():
    rng = np.random.default_rng(2)
    small_s, small_n = rng.uniform(0.2, 1.5, 40), rng.integers(20, 200, 40).astype(float)
    large_s, large_n = rng.uniform(5, 200, 12), rng.integers(20, 300, 12).astype(float)
    s, n = np.concatenate([small_s, large_s]), np.concatenate([small_n, large_n])
    y = 0.93 * s - 0.005 * n
    y[:40] = small_s - 0.005 * small_n  # the small models: 5 us a node, at another scale than the large ones
    assert node_term(s, n, y) == pytest.approx(-0.005)
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, n, y, "large", fitter)
        assert (c.name, c.gamma, c.beta) == (f"large/{fitter}", pytest.approx(-0.005), 0.0)
        assert c.alpha == pytest.approx(0.93, abs=1e-6)  # the large models' scale, the small ones' left out
    assert np.isnan(node_term([1.0], [2], [np.nan]))
    few = node_term([10.0, 20.0, 30.0, 40.0], [10, 10, 10, 10], [9.0, 18.0, 28.0, 30.0])  # none under 2 ms
    assert few == pytest.approx(-0.2)  # the three quickest: -median(0.1, 0.2, 0.2)
    assert list(large_rows(np.array([1.0, 6.0, 2.0]))) == [1, 2, 0]  # fewer than 8 large: the largest first


def test_large_form_has_no_intercept_to_carry_a_gamma_error_onto_small_models():
    """The large models pay less per node than the small ones say (noise, the profiler's share): a fitted intercept
    would soak that up over their hundreds of kernels and put it whole on every small model; without one, the small
    models keep the fit the per-node term gave them."""
    rng = np.random.default_rng(3)
    small_s, small_n = rng.uniform(0.1, 1.5, 40), rng.integers(10, 60, 40).astype(float)
    large_s, large_n = rng.uniform(5, 80, 20), rng.integers(150, 400, 20).astype(float)
    s, n = np.concatenate([small_s, large_s]), np.concatenate([small_n, large_n])
    y = np.concatenate([small_s - 0.005 * small_n, 0.95 * large_s - 0.002 * large_n])
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, n, y, "large", fitter)
        assert c.beta == 0.0 and c.gamma == pytest.approx(-0.005)
        small_err = np.abs(c.apply(small_s, small_n) / y[:40] - 1)
        large_err = np.abs(c.apply(large_s, large_n) / y[40:] - 1)
        assert np.median(small_err) < 0.10 and np.median(large_err) < 0.05


def test_size_form_recovers_a_scale_that_grows_with_the_model_and_stays_flat_outside_its_fit():
    rng = np.random.default_rng(1)
    s, n = rng.uniform(0.2, 200, 40), rng.integers(10, 400, 40).astype(float)
    y = (1.0 + 0.012 * np.log(s)) * s + 0.02 * n - 0.03
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, n, y, "size", fitter)
        assert (c.alpha, c.beta, c.gamma, c.delta) == pytest.approx((1.0, -0.03, 0.02, 0.012), abs=1e-5)
        assert (c.sum_lo_ms, c.sum_hi_ms) == (s.min(), s.max()) and np.allclose(c.apply(s, n), y)
    big = c.apply(2000.0, 100)  # ten times the largest fitted sum: the scale of the largest, not extrapolated
    assert big == pytest.approx((1.0 + 0.012 * np.log(s.max())) * 2000 + 2.0 - 0.03)
    assert c.scaled(2.0).apply(50.0, 100) == pytest.approx(2 * c.apply(50.0, 100))
    assert "δ=0.0120 per ln(Σ/ms)" in c.describe() and "δ" not in Calibration().describe()
    # a zero or negative sum cannot take a logarithm: it is left out of the fit, never turned into NaN
    c0 = fit_calibration(np.r_[s, 0.0], np.r_[n, 5], np.r_[y, 0.1], "size", "relative")
    assert c0.delta == pytest.approx(0.012, abs=1e-5)


def test_calibration_entry_round_trip_and_errors():
    c = Calibration("per_kernel", "huber", 0.9, 0.1, -0.002)
    assert Calibration.from_dict(c.to_dict()) == c and c.name == "per_kernel/huber" and Calibration().name == "raw"
    assert float(c.apply(10.0, 100)) == pytest.approx(0.9 * 10 + 0.1 - 0.2)
    old = {"form": "per_kernel", "fitter": "huber", "alpha": 0.9, "beta": 0.1, "gamma": -0.002}  # before "size"
    assert Calibration.from_dict(old) == c
    size = Calibration("size", "relative", 1.0, 0.0, 0.01, 0.012, 0.05, 300.0)
    assert Calibration.from_dict(size.to_dict()) == size
    with pytest.raises(HaseError, match=r"targets\.warm\.calibration lacks \['fitter', 'gamma'\].*make train"):
        Calibration.from_dict({"form": "scale", "alpha": 1.0, "beta": 0.0}, "targets.warm.calibration")


def test_size_balance_gives_every_half_decade_of_latency_the_same_say():
    """Eight small models and two large ones: each half-decade bin sums to the same weight, the mean stays 1."""
    ms = np.array([0.2, 0.21, 0.25, 0.3, 0.22, 0.24, 0.28, 0.29, 40.0, 60.0])
    w = size_balance(ms)
    assert w.mean() == pytest.approx(1.0)
    assert w[:8].sum() == pytest.approx(w[8:].sum()) and w[8] == pytest.approx(4 * w[0])
    assert size_balance([1.0, 2.0, 5.0]) == pytest.approx([0.75, 0.75, 1.5])  # 5 ms opens the next half-decade
    assert size_balance([np.nan, -1.0, 3.0]) == pytest.approx([0.75, 0.75, 1.5])  # the unusable share a bin
    assert size_balance([]).size == 0


def test_a_size_balanced_fit_follows_the_large_models():
    """Many small models on one line, a few large ones on another: weighted by size_balance, the scale is the
    large models' far more than unweighted."""
    small, large = np.linspace(0.2, 0.9, 30), np.array([20.0, 50.0, 120.0])
    s = np.concatenate([small, large])
    y = np.concatenate([1.0 * small, 0.8 * large])
    n = np.full_like(s, 50.0)
    plain = fit_calibration(s, n, y, "scale", "relative")
    balanced = fit_calibration(s, n, y, "scale", "relative", size_balance(y))
    assert abs(balanced.alpha - 0.8) < abs(plain.alpha - 0.8) / 2


def test_a_huber_fit_that_scikit_learn_cannot_finish_falls_back_to_relative_least_squares():
    """Weights thirteen orders of magnitude apart stop scikit-learn's L-BFGS-B abnormally (it raises); the fit
    returns the relative least squares instead of failing `hase train`."""
    s = np.array([50.04728508349599, 74.43533818033656, 17.80495137341842, 38.867866505273476])
    y = np.array([29.04491411451326, 91.72115700070304, 11.37780057625045, 35.55622214817353])
    w = np.array([4.4175692046098383e06, 1.0925671657327821e-06, 1.5031644125748901e-07, 1.3341972989765935e-07])
    huber = fit_calibration(s, np.ones(4), y, "scale", "huber", w)
    relative = fit_calibration(s, np.ones(4), y, "scale", "relative", w)
    assert np.isfinite([huber.alpha, huber.beta]).all()
    assert (huber.alpha, huber.beta) == pytest.approx((relative.alpha, relative.beta), rel=0.05, abs=0.05)
