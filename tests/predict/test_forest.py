"""hase.predict.forest: packed forests predict exactly what scikit-learn predicts, survive the trip through
plain arrays bit for bit (damaged arrays refused); the linear cost base."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from hase.kernels.types import KernelSpec, TensorSpec
from hase.predict import features
from hase.predict.forest import ARRAY_DTYPES, FittedForest, PackedForest, fit_base, linear_base_ms, pack_forest


def data(n: int, n_features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, n_features)).astype(np.float32)
    y = 3 * X[:, 0] + np.sin(5 * X[:, 1]) + rng.normal(0, 0.05, n)
    return X, y


@pytest.mark.parametrize(("params", "n_features"), [
    ({"n_estimators": 12, "min_samples_leaf": 2}, 6),
    ({"n_estimators": 5, "max_depth": None, "max_features": 0.5}, 9),  # fully grown trees of uneven depth
    ({"n_estimators": 1, "max_depth": 2, "bootstrap": False}, 3),
])
def test_packed_forest_matches_scikit_learn(params, n_features):
    X, y = data(300, n_features, seed=n_features)
    forest = RandomForestRegressor(random_state=0, **params).fit(X, y)
    packed = pack_forest(forest)
    Xt, _ = data(80, n_features, seed=100)
    trees = packed.predict_trees(Xt)
    assert trees.shape == (params["n_estimators"], 80) and packed.n_trees == params["n_estimators"]
    assert np.array_equal(trees, np.stack([t.predict(Xt) for t in forest.estimators_]))  # tree by tree
    assert np.allclose(trees.mean(axis=0), forest.predict(Xt), rtol=1e-12, atol=1e-12)
    assert packed.n_nodes == sum(t.tree_.node_count for t in forest.estimators_)
    with pytest.raises(ValueError, match=f"expected {n_features} features"):
        packed.predict_trees(Xt[:, :2])


def test_a_constant_target_packs_into_single_leaf_trees():
    X, _ = data(40, 4, seed=1)
    forest = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, np.full(40, 2.5))
    packed = pack_forest(forest)
    assert packed.n_nodes == 3 and np.array_equal(packed.predict_trees(X[:5]), np.full((3, 5), 2.5))


def small_forest() -> tuple[PackedForest, np.ndarray]:
    X, y = data(200, 5, seed=7)
    return pack_forest(RandomForestRegressor(n_estimators=6, random_state=0).fit(X, y)), X


def test_a_packed_forest_round_trips_through_plain_arrays(tmp_path):
    packed, X = small_forest()
    arrays = packed.to_arrays()
    assert list(arrays) == list(ARRAY_DTYPES) and all(a.dtype == ARRAY_DTYPES[k] for k, a in arrays.items())
    np.savez(tmp_path / "f.npz", **arrays)
    with np.load(tmp_path / "f.npz", allow_pickle=False) as npz:
        back = PackedForest.from_arrays({k: npz[k] for k in npz.files}, packed.depth, packed.n_features)
    assert np.array_equal(back.predict_trees(X), packed.predict_trees(X))  # bit for bit


def damaged(name: str, fn) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    arrays = dict(small_forest()[0].to_arrays())
    arrays[name] = fn(arrays[name])
    return arrays


@pytest.mark.parametrize(("arrays", "depth", "n_features", "match"), [
    (damaged("left", lambda a: a.astype(np.int64)), 30, 5, "'left' is int64"),
    (damaged("threshold", lambda a: a.astype(np.float32)), 30, 5, "'threshold' is float32"),
    (damaged("value", lambda a: a.reshape(1, -1)), 30, 5, r"'value' is float64 of shape \(1, "),
    (damaged("roots", lambda a: a[:0]), 30, 5, "not a non-empty 1-D int32"),
    (damaged("feature", lambda a: a[:-1]), 30, 5, "differ in length"),
    (damaged("right", lambda a: a + len(a)), 30, 5, "'right' has indices outside"),
    (damaged("left", lambda a: np.where(a == a.max(), -1, a).astype(np.int32)), 30, 5, "'left' has indices outside"),
    (damaged("roots", lambda a: a * 0 - 2), 30, 5, "'roots' has indices outside"),
    (damaged("feature", lambda a: a + 0), 30, 2, "'feature' has indices outside 0..1"),
    (damaged("feature", lambda a: a + 0), 0, 5, "depth is 0, not a positive integer"),
    (damaged("feature", lambda a: a + 0), True, 5, "depth is True"),
    ({k: v for k, v in small_forest()[0].to_arrays().items() if k != "value"}, 30, 5, r"\['value'\] are missing"),
])
def test_damaged_forest_arrays_are_a_value_error(arrays, depth, n_features, match):
    with pytest.raises(ValueError, match=match):
        PackedForest.from_arrays(arrays, depth, n_features)


def conv_spec(c: int, hw: int) -> KernelSpec:
    ins = (TensorSpec("x", (1, c, hw, hw), "float32"), TensorSpec("w", (c, c, 3, 3), "float32", True))
    attrs = (("group", 1), ("kernel_shape", [3, 3]), ("pads", [1, 1, 1, 1]))
    return KernelSpec(f"c{c}-{hw}", "Conv", "", attrs, ins, (TensorSpec("y", (1, c, hw, hw), "float32"),))


def conv_matrix() -> tuple[features.FeatureFamily, np.ndarray]:
    fam = features.get_family("conv")
    specs = [conv_spec(c, hw) for c in (4, 8, 16) for hw in (8, 16, 32)]
    return fam, np.array([list(fam.extract(s).values()) for s in specs], dtype=np.float32)


def test_fit_base_is_non_negative_relative_least_squares():
    fam, X = conv_matrix()
    y = 2e-9 * X[:, fam.column_names.index("flops")] + 0.005
    a, b, c = fit_base(X, y, fam)
    assert a == pytest.approx(2e-9, rel=1e-3) and c == pytest.approx(0.005, rel=1e-3) and b >= 0


def test_linear_base_has_a_floor_and_a_no_base_mode():
    fam, X = conv_matrix()
    flops = X[:, fam.column_names.index("flops")].astype(float)
    base = linear_base_ms(X, fam, (1e-9, 0.0, 0.001), floor_ms=0.0)
    assert np.allclose(base, 1e-9 * flops + 0.001)
    assert np.all(linear_base_ms(X, fam, (1e-9, 0.0, 0.0), floor_ms=1e3) == 1e3)
    assert np.array_equal(linear_base_ms(X, fam, (0.0, 0.0, 0.0), floor_ms=5.0), np.ones(len(X)))
    forest = pack_forest(RandomForestRegressor(n_estimators=2, random_state=0).fit(X, np.ones(len(X))))
    member = FittedForest("conv", forest, (1e-9, 0.0, 0.001), 0.0)
    assert np.array_equal(member.base_ms(X, fam), base)
