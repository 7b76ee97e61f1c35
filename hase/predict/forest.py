"""One fitted forest: scikit-learn trees packed into flat numpy arrays (predicted by a vectorised tree
walk), and the linear FLOPs/bytes cost base the trees correct.

Why: `hase predict` must answer in about a second, and importing scikit-learn alone costs ~0.7 s.
Packed forests load and predict with numpy only, keep every tree's prediction (the spread gives the
interval) and take about a third of the bytes of a pickled RandomForestRegressor. They are plain arrays
(`PackedForest.to_arrays`), saved in `.npz` files that load with `allow_pickle=False`.

    >>> packed = pack_forest(RandomForestRegressor(n_estimators=50).fit(X, y))
    >>> packed.predict_trees(X_new).shape          # (n_trees, n_samples), same values as each tree
    (50, len(X_new))
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:  # pragma: no cover
    from sklearn.ensemble import RandomForestRegressor

    from hase.predict.features import FeatureFamily

TREE_LEAF = -1  # scikit-learn's marker of a leaf in children_left / children_right
# the node-table arrays of a PackedForest, in field order, with the one dtype each is stored and loaded as
ARRAY_DTYPES: dict[str, type[np.generic]] = {"left": np.int32, "right": np.int32, "feature": np.int32,
                                             "threshold": np.float64, "value": np.float64, "roots": np.int32}


@dataclass(frozen=True, eq=False)
class PackedForest:
    """All trees of a forest in one node table; `roots[t]` is the first node of tree t.

    Leaves point to themselves, so walking `depth` steps from every root lands every sample on its leaf.
    """

    left: NDArray[np.int32]         # child when x[feature] <= threshold
    right: NDArray[np.int32]        # child otherwise
    feature: NDArray[np.int32]      # 0 at leaves (never read there)
    threshold: NDArray[np.float64]  # as scikit-learn stores it
    value: NDArray[np.float64]      # the leaf prediction
    roots: NDArray[np.int32]        # one per tree
    depth: int
    n_features: int

    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return len(self.roots)

    @property
    def n_nodes(self) -> int:
        """Nodes of all trees together (what the file size follows)."""
        return len(self.left)

    def predict_trees(self, features: ArrayLike) -> NDArray[np.float64]:
        """Every tree's prediction for every row of X: shape (n_trees, n_samples)."""
        X = np.asarray(features, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features, got array of shape {X.shape}")
        n = len(X)
        flat = np.ascontiguousarray(X).ravel()  # X[i, f] is flat[i * n_features + f]: one 1-D gather per step
        node = np.repeat(self.roots, n)
        row_start = np.tile(np.arange(n, dtype=np.intp) * self.n_features, self.n_trees)
        left, right, feature, threshold = self.left, self.right, self.feature, self.threshold
        for step in range(self.depth):
            nxt = np.where(flat[row_start + feature[node]] <= threshold[node], left[node], right[node])
            if step % 8 == 7 and np.array_equal(nxt, node):
                break
            node = nxt
        return self.value[node].reshape(self.n_trees, n)

    def to_arrays(self) -> dict[str, NDArray[Any]]:
        """The node table as named arrays (`ARRAY_DTYPES`); `depth` and `n_features` are stored beside them."""
        return {name: getattr(self, name) for name in ARRAY_DTYPES}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, NDArray[Any]], depth: int, n_features: int) -> PackedForest:
        """The forest `to_arrays` gave, checked: exact dtypes, one length per node, every child, feature and root
        index in range, so a damaged file is a ValueError here and never a wrong prediction or IndexError later.

        Raises:
            ValueError: naming the first array or number that does not fit.
        """
        missing = [name for name in ARRAY_DTYPES if name not in arrays]
        if missing:
            raise ValueError(f"forest arrays {missing} are missing")
        for name, dtype in ARRAY_DTYPES.items():
            a = arrays[name]
            if a.dtype != np.dtype(dtype) or a.ndim != 1 or not len(a):
                raise ValueError(f"forest array {name!r} is {a.dtype} of shape {a.shape}, "
                                 f"not a non-empty 1-D {np.dtype(dtype)} array")
        n_nodes = len(arrays["left"])
        if any(len(arrays[name]) != n_nodes for name in ("right", "feature", "threshold", "value")):
            raise ValueError("forest arrays 'left', 'right', 'feature', 'threshold', 'value' differ in length")
        for number, value in (("depth", depth), ("n_features", n_features)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"forest {number} is {value!r}, not a positive integer")
        for name, bound in (("left", n_nodes), ("right", n_nodes), ("roots", n_nodes), ("feature", n_features)):
            a = arrays[name]
            if a.min() < 0 or a.max() >= bound:
                raise ValueError(f"forest array {name!r} has indices outside 0..{bound - 1}")
        return cls(left=arrays["left"], right=arrays["right"], feature=arrays["feature"],
                   threshold=arrays["threshold"], value=arrays["value"], roots=arrays["roots"], depth=depth,
                   n_features=n_features)


def pack_forest(forest: RandomForestRegressor) -> PackedForest:
    """Pack a fitted RandomForestRegressor (single output) into a PackedForest."""
    lefts, rights, feats, thrs, vals, roots = [], [], [], [], [], []
    offset, depth = 0, 0
    for est in forest.estimators_:
        t = est.tree_
        leaf = t.children_left == TREE_LEAF
        idx = np.arange(t.node_count)
        lefts.append(np.where(leaf, idx, t.children_left) + offset)
        rights.append(np.where(leaf, idx, t.children_right) + offset)
        feats.append(np.where(leaf, 0, t.feature))
        thrs.append(t.threshold)
        vals.append(t.value[:, 0, 0])
        roots.append(offset)
        offset += t.node_count
        depth = max(depth, int(t.max_depth))
    return PackedForest(np.concatenate(lefts).astype(np.int32), np.concatenate(rights).astype(np.int32),
                        np.concatenate(feats).astype(np.int32), np.concatenate(thrs).astype(np.float64),
                        np.concatenate(vals).astype(np.float64), np.asarray(roots, dtype=np.int32), depth + 1,
                        int(forest.n_features_in_))


@dataclass(frozen=True)
class FittedForest:
    """One fitted forest: its feature family, and the linear cost base its trees correct.

    With a base, the trees predict log(latency / base) where base = a*flops + b*bytes + c (a, b, c >= 0,
    fitted by relative least squares); a forest cannot extrapolate beyond the sizes it saw, the
    base does, so a ResNet-50-sized kernel is not capped at the largest zoo kernel's latency.
    """

    family: str
    forest: PackedForest
    base: tuple[float, float, float]
    floor_ms: float
    roofline: bool = False  # the trees correct the host's roofline time instead (`hase.predict.roofline`)

    def base_ms(self, X: NDArray[np.float32], fam: FeatureFamily) -> NDArray[np.float64]:
        """The linear cost of each row of X (ones where the member has no base)."""
        return linear_base_ms(X, fam, self.base, self.floor_ms)


def linear_base_ms(X: NDArray[np.float32], fam: FeatureFamily, base: tuple[float, float, float],
                   floor_ms: float) -> NDArray[np.float64]:
    """a*flops + b*bytes + c of each row of X, at least `floor_ms` (ones when a = b = c = 0: no base)."""
    cols = fam.column_names
    flops, nbytes = X[:, cols.index("flops")].astype(float), X[:, cols.index("bytes")].astype(float)
    a, b, c = base
    if a == b == c == 0.0:
        return np.ones(len(X))
    return np.maximum(a * flops + b * nbytes + c, floor_ms)


def fit_base(X: NDArray[np.float32], y: NDArray[np.float64], fam: FeatureFamily,
             weight: NDArray[np.float64] | None = None) -> tuple[float, float, float]:
    """Non-negative a, b, c minimising the (weighted) relative error of a*flops + b*bytes + c against y."""
    from scipy.optimize import nnls  # type: ignore[import-untyped]  # noqa: PLC0415 - scipy only when fitting

    cols = fam.column_names
    design = np.column_stack([X[:, cols.index("flops")], X[:, cols.index("bytes")], np.ones(len(X))]).astype(float)
    root = np.ones(len(y)) if weight is None else np.sqrt(weight)
    design = design / y[:, None] * root[:, None]
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    coef = nnls(design / scale, root)[0] / scale
    return float(coef[0]), float(coef[1]), float(coef[2])
