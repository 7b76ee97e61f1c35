"""hase.predict.predictor: per-op forests, fallbacks, batched prediction, the summary the manifest keeps, and
the plain data (JSON + arrays) a fitted predictor is saved as."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from hase.errors import HaseError
from hase.kernels.types import KernelSpec, TensorSpec
from hase.predict import features
from hase.predict.manifest import PredictorSummary
from hase.predict.predictor import SOURCE_FAMILY, SOURCE_GENERIC, SOURCE_OP, KernelPredictor, params_for


def conv_spec(cin: int, cout: int, hw: int, k: int = 3, group: int = 1) -> KernelSpec:
    ins = (TensorSpec("x", (1, cin, hw, hw), "float32"), TensorSpec("w", (cout, cin // group, k, k), "float32", True))
    outs = (TensorSpec("y", (1, cout, hw, hw), "float32"),)
    attrs = (("group", group), ("kernel_shape", [k, k]), ("pads", [k // 2] * 4))
    return KernelSpec(f"c{cin}-{cout}-{hw}-{k}-{group}", "Conv", "", attrs, ins, outs)


def add_spec(n: int, op: str = "Add") -> KernelSpec:
    t = TensorSpec("a", (1, n), "float32")
    return KernelSpec(f"{op}{n}", op, "", (), (t, TensorSpec("b", (1, n), "float32")),
                      (TensorSpec("y", (1, n), "float32"),))


def odd_spec(n: int) -> KernelSpec:
    return KernelSpec(f"odd{n}", "NotARealOp", "", (), (TensorSpec("a", (n, 4), "float32"),),
                      (TensorSpec("y", (n, 4), "float32"),))


def synthetic_latency(spec: KernelSpec) -> float:
    """A deterministic cost for exercising the fitting plumbing (not a measurement): 10 µs + 1 ns per FLOP."""
    f = features.extract(spec)
    return 0.01 + 1e-6 * f["flops"] / 1e3


@pytest.fixture(scope="module")
def fitted() -> tuple[KernelPredictor, list[KernelSpec]]:
    specs = [conv_spec(c, c2, hw) for c in (4, 8, 16) for c2 in (8, 16, 32) for hw in (8, 12, 16, 24)]
    specs += [add_spec(n, op) for n in (64, 128, 256) for op in ("Add", "Mul")]  # 3 each < min_samples: the
    # elementwise family forest (6 kernels) covers them
    specs += [odd_spec(n) for n in (1, 2, 4, 8)]  # no feature family, too few for a forest: the generic one
    y = [synthetic_latency(s) for s in specs]
    params = {"default": {"n_estimators": 16, "max_depth": 12}, "fallback": {"n_estimators": 8}}
    return KernelPredictor(params, min_samples=5, random_state=1).fit(specs, y), specs


def test_sklearn_conventions(fitted):
    model, _ = fitted
    fresh = KernelPredictor({"default": {"n_estimators": 3}}, min_samples=5)
    assert fresh.min_samples == 5 and not hasattr(fresh, "forests_")  # __init__ stores params only
    assert model.fit is not None and set(model.forests_) == {"Conv"}
    assert all(name.endswith("_") for name in vars(model) if name not in vars(fresh))


def test_routes_and_fallbacks_are_reported(fitted):
    model, _ = fitted
    assert "min_samples" in model.skipped_["Add"] and "min_samples" in model.skipped_["NotARealOp"]
    assert model.route(conv_spec(8, 8, 8))[:2] == ("Conv", SOURCE_OP)
    assert model.route(add_spec(512))[:2] == ("Add", SOURCE_FAMILY)
    assert model.route(odd_spec(3))[:2] == ("NotARealOp", SOURCE_GENERIC)
    never_seen = KernelSpec("g", "GlobalAveragePool", "", (), (TensorSpec("x", (1, 8, 4, 4), "float32"),),
                            (TensorSpec("y", (1, 8, 1, 1), "float32"),))
    frame, _ = model.predict_detail([never_seen])
    assert frame["source"].iloc[0] == SOURCE_GENERIC and frame["pred_ms"].iloc[0] > 0  # never 0 ms


def test_an_op_no_family_describes_gets_its_own_forest_on_the_generic_table():
    specs = [conv_spec(c, 8, hw) for c in (4, 8, 16) for hw in (8, 12)] + [odd_spec(n) for n in (1, 2, 4, 8, 16, 32)]
    model = KernelPredictor({"default": {"n_estimators": 4}}, min_samples=5, random_state=1).fit(
        specs, [synthetic_latency(s) for s in specs])
    key, source, member = model.route(odd_spec(3))
    assert (key, source, member.family) == ("NotARealOp", SOURCE_OP, "generic")
    assert member is not model.generic_ and "NotARealOp" not in model.skipped_


def test_geometric_tree_mean_is_the_mean_log_of_the_trees(fitted):
    model, specs = fitted
    meta, arrays = model.to_arrays()
    meta["params"]["tree_mean"] = "geometric"
    geo = KernelPredictor.from_arrays(meta, arrays)
    probe = [*specs, conv_spec(64, 64, 56)]
    _, draws = geo.predict_detail(probe, n_draws=16)  # 16 trees: each draw is one tree
    assert np.allclose(geo.predict(probe), np.exp(np.log(draws).mean(axis=1)))
    assert np.all(geo.predict(probe) <= model.predict(probe) * (1 + 1e-9))  # AM-GM
    del meta["params"]["tree_mean"]  # saved before the option existed: the arithmetic mean, as then
    assert KernelPredictor.from_arrays(meta, arrays).tree_mean == "arithmetic"
    with pytest.raises(HaseError, match="tree_mean"):
        KernelPredictor(tree_mean="median")


def test_in_range_accuracy_and_extrapolation_through_the_base(fitted):
    model, specs = fitted
    conv = [s for s in specs if s.op_type == "Conv"]
    truth = np.array([synthetic_latency(s) for s in conv])
    assert np.median(np.abs(model.predict(conv) / truth - 1)) < 0.05
    big = conv_spec(64, 64, 56)  # 60x the largest training kernel's FLOPs
    assert model.predict([big])[0] / synthetic_latency(big) == pytest.approx(1.0, rel=0.3)
    no_base = KernelPredictor({"default": {"n_estimators": 16}}, min_samples=5, base=False).fit(
        conv, truth)
    assert no_base.predict([big])[0] < 0.2 * synthetic_latency(big)  # a bare forest is capped at what it saw


def test_predict_detail_is_batched_with_tree_draws(fitted):
    model, specs = fitted
    frame, draws = model.predict_detail(specs, n_draws=10)
    assert list(frame.columns) == ["key", "source", "pred_ms", "roofline_ms", "clamped"]
    assert draws.shape == (len(specs), 10) and frame["roofline_ms"].isna().all()  # no peaks: no roofline
    assert set(frame["clamped"]) == {""}
    assert np.allclose(frame["pred_ms"], model.predict(specs))
    assert np.all(draws.min(axis=1) <= frame["pred_ms"] * 1.0001)


def test_params_lookup_order_and_errors():
    params = {"Conv/dw": {"n_estimators": 1}, "Conv": {"n_estimators": 2}, "conv": {"n_estimators": 3},
              "default": {"n_estimators": 4}, "fallback": {"n_estimators": 5}}
    assert params_for(params, "Conv/dw", "conv").n_estimators == 1
    assert params_for(params, "FusedConv/dw", "conv").n_estimators == 3
    assert params_for(params, "Add", "elementwise").n_estimators == 4
    assert params_for(params, "family:conv", "conv").n_estimators == 5
    with pytest.raises(HaseError, match="unknown forest keys"):
        params_for({"default": {"trees": 3}}, "Add", "elementwise")
    with pytest.raises(HaseError, match="one feature family"):
        KernelPredictor(aliases={"Add": "Conv"}).fit([add_spec(4)], [1.0])


def test_summary_lists_forests_fallbacks_and_bases(fitted):
    model, specs = fitted
    summary = model.summary()
    assert isinstance(summary, PredictorSummary) and summary.n_kernels == len(specs)
    assert set(summary.forests) == {"Conv"} and summary.forests["Conv"] == sum(s.op_type == "Conv" for s in specs)
    assert set(summary.skipped) == {"Add", "Mul", "NotARealOp"} and summary.skipped_n["Add"] == 3
    assert summary.family_forests == ("conv", "elementwise") and len(summary.bases["Conv"]) == 3
    assert summary.to_dict()["bases"]["Conv"] == list(model.forests_["Conv"].base)


def test_to_arrays_is_plain_data_that_predicts_bit_for_bit(fitted):
    model, specs = fitted
    meta, arrays = model.to_arrays()
    meta = json.loads(json.dumps(meta, allow_nan=False))  # JSON-able as it is, no special values
    assert all(isinstance(a, np.ndarray) and a.dtype != object for a in arrays.values())
    back = KernelPredictor.from_arrays(meta, arrays)
    probe = [*specs, conv_spec(64, 64, 56), add_spec(9999), odd_spec(33)]
    frame, draws = back.predict_detail(probe)
    frame0, draws0 = model.predict_detail(probe)
    assert frame.equals(frame0) and np.array_equal(draws, draws0)
    assert {k: v for k, v in vars(back).items() if not k.endswith("_")} == \
        {k: v for k, v in vars(model).items() if not k.endswith("_")}
    assert back.summary() == model.summary()
    # the conv family has one key: its family forest is the Conv forest, stored once and shared again on load
    assert meta["forests"]["Conv"] == meta["family_forests"]["conv"] and len(meta["members"]) == 3
    assert back.family_forests_["conv"] is back.forests_["Conv"]


def broken(edit):  # type: ignore[no-untyped-def]
    def apply(meta, arrays):  # type: ignore[no-untyped-def]
        meta, arrays = copy.deepcopy(meta), dict(arrays)
        edit(meta, arrays)
        return meta, arrays
    return apply


@pytest.mark.parametrize(("edit", "error", "match"), [
    (broken(lambda m, a: m.pop("n_kernels")), ValueError, "n_kernels is missing"),
    (broken(lambda m, a: m["params"].update(log_target="yes")), ValueError, "params.log_target is a str, not bool"),
    (broken(lambda m, a: m["params"].update(min_samples=True)), ValueError, "params.min_samples is a bool"),
    (broken(lambda m, a: m.update(members={})), ValueError, "members is a dict, not list"),
    (broken(lambda m, a: m["members"].__setitem__(0, 7)), ValueError, r"members\[0\] is a int, not an object"),
    (broken(lambda m, a: m["forests"].update(Conv=5)), ValueError, "forests.Conv refers to member 5"),
    (broken(lambda m, a: m["family_forests"].update(conv="0")), ValueError, "refers to member '0'"),
    (broken(lambda m, a: m["members"][0].update(base=[1, 2])), ValueError, r"base is \[1, 2\], not three numbers"),
    (broken(lambda m, a: m["members"][0].update(n_features=3)), ValueError, "n_features is 3"),
    (broken(lambda m, a: m["skipped"].update(Add=3)), ValueError, "skipped has values that are not str"),
    (broken(lambda m, a: m["n_samples"].pop("Conv")), ValueError, r"\['Conv'\] have no training size"),
    (broken(lambda m, a: a.pop("m1.value")), ValueError, r"\['value'\] are missing"),
    (broken(lambda m, a: a.update({"m9.left": a["m0.left"]})), ValueError, r"\['m9\.left'\] do not match"),
    (broken(lambda m, a: m["members"][0].update(family="nope")), HaseError, "unknown feature family 'nope'"),
    (broken(lambda m, a: m["members"][0]["columns"].reverse()), HaseError, "trained on columns .* retrain"),
])
def test_from_arrays_refuses_what_does_not_fit(fitted, edit, error, match):
    meta, arrays = fitted[0].to_arrays()
    meta, arrays = edit(json.loads(json.dumps(meta)), arrays)  # as it comes back from the file
    with pytest.raises(error, match=match):
        KernelPredictor.from_arrays(meta, arrays)


def _movement(op: str, n: int) -> KernelSpec:
    x, y = TensorSpec("x", (1, 8, n, n), "float32"), TensorSpec("y", (1, 8, n, n), "float32")
    attrs: tuple[tuple[str, object], ...] = {"Resize": (("mode", "cubic"),), "Transpose": (("perm", [0, 1, 3, 2]),),
                                             "Slice": ()}[op]
    return KernelSpec(f"{op}{n}", op, "", attrs, (x,), (y,))


def test_family_forests_leave_out_the_excluded_keys():
    """A Slice (too few kernels for a forest of its own) falls back to the movement family's forest; with Resize
    in it, whose cubic interpolation costs far more per element, that forest predicts the Slice like a Resize."""
    sizes = (8, 12, 16, 24, 32, 48, 64, 96)
    specs = [_movement("Resize", n) for n in sizes] + [_movement("Transpose", n) for n in sizes]
    specs += [_movement("Slice", n) for n in (16, 32, 64)]
    per_elem = {"Resize": 2e-4, "Transpose": 2e-6, "Slice": 2e-6}  # ms per element: synthetic, plumbing only
    y = [0.005 + per_elem[s.op_type] * 8 * int(s.kernel_id[len(s.op_type):]) ** 2 for s in specs]
    params = {"default": {"n_estimators": 16, "max_depth": 12}}
    probe = _movement("Slice", 48)
    truth = 0.005 + 2e-6 * 8 * 48**2
    mixed = KernelPredictor(params, min_samples=5, random_state=1).fit(specs, y)
    apart = KernelPredictor(params, min_samples=5, random_state=1, family_exclude=("Resize",)).fit(specs, y)
    assert mixed.route(probe)[:2] == apart.route(probe)[:2] == ("Slice", SOURCE_FAMILY)
    assert "Resize" in apart.forests_  # it keeps its own forest
    assert abs(apart.predict([probe])[0] / truth - 1) < abs(mixed.predict([probe])[0] / truth - 1)
    assert apart.predict([probe])[0] < 3 * truth
