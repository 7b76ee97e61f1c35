"""hase.evaluate.devset and `hase evaluate --devset`: real exported models predicted vs measured, resumable."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from conftest import VENDORED, exported_model

from hase.cli import main
from hase.errors import HaseError
from hase.evaluate import devset
from hase.evaluate.report import write_report
from hase.predict.identity import open_predictor
from hase.runtime.robust import BlockPolicy
from hase.runtime.types import TimingPolicy

QUICK = BlockPolicy(warmup=1, blocks=2, block=TimingPolicy(warmup=0, min_runs=3, max_runs=5, min_time_s=0,
                                                           max_time_s=0.5))
SYMBOLIC = "semnasnet_symbolic.onnx"


def make_devset(d: Path) -> Path:
    """The vendored exported models, plus semnasnet with its batch dimension renamed to the symbol `batch`."""
    d.mkdir(parents=True, exist_ok=True)
    for name in VENDORED:
        shutil.copy(exported_model(name), d / f"{name}.onnx")
    model = onnx.load(exported_model("timm_semnasnet_050_cls10_b1"))
    for vi in list(model.graph.input) + list(model.graph.output):
        dim = vi.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = "batch"
    onnx.save(model, d / SYMBOLIC)
    return d


@pytest.fixture(scope="module")
def bundle():
    return open_predictor("cpu-1t").bundle


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, bundle) -> tuple[Path, Path, devset.DevsetEvaluation]:
    root = tmp_path_factory.mktemp("devset")
    models = make_devset(root / "models")
    csv = root / "out" / "devset.csv"
    return models, csv, devset.evaluate_devset(models, bundle, csv, policy=QUICK)


def test_rows_and_scores(evaluated, bundle):
    _, csv, dev = evaluated
    rows = dev.rows
    assert len(rows) == len(VENDORED) + len(devset.BATCHES) and (rows[devset.ERROR] == "").all()
    sym = rows[rows[devset.MODEL] == SYMBOLIC]
    assert sorted(sym[devset.BATCH]) == list(devset.BATCHES)
    assert set(sym[devset.FREE_DIMS]) == {f"batch={b}" for b in devset.BATCHES}
    assert sym.sort_values(devset.BATCH)["model_flops"].is_monotonic_increasing  # the batch reached the kernels
    assert (rows[devset.PREDICTED_MS] > 0).all() and (rows[devset.MEASURED_MS] > 0).all()
    assert (rows["model_bytes"] > 0).all()
    assert set(rows[devset.GROUP]) == {"CNN", "transformer"}
    assert set(rows["opt_level"]) == {bundle.ep_config().opt_level} and set(rows["intra_op_threads"]) == {1}
    assert rows[devset.ERROR_PCT].to_numpy() == pytest.approx(
        ((rows[devset.PREDICTED_MS] / rows[devset.MEASURED_MS] - 1) * 100).to_numpy())
    s = dev.scores.set_index([devset.GROUP, devset.METHOD])
    assert s.loc[(devset.ALL, devset.HASE), "n"] == len(rows) and s.loc[("CNN", devset.HASE),
                                                                        "n"] == 1 + len(devset.BATCHES)
    assert {"flops",
            "flops+bytes"} <= set(dev.scores[devset.METHOD]) and np.isfinite(s.loc[(devset.ALL, "flops"), "rmspe"])
    assert pd.read_csv(csv).shape[0] == len(rows)


def test_resume_after_interruption_redoes_nothing(tmp_path, evaluated, bundle):
    models, _, _ = evaluated
    csv = tmp_path / "devset.csv"

    def stop_at_third(job, i, n):
        if i == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        devset.evaluate_devset(models, bundle, csv, policy=QUICK, progress=stop_at_third)
    first = pd.read_csv(csv)
    assert len(first) == 2
    seen: list[tuple[str, int]] = []
    dev = devset.evaluate_devset(models, bundle, csv, policy=QUICK, progress=lambda job, i, n: seen.append(job.key))
    assert len(seen) == len(VENDORED) + len(devset.BATCHES) - 2
    assert not {tuple(k) for k in first[[devset.MODEL, devset.BATCH]].itertuples(index=False)} & set(seen)
    assert dev.rows[devset.MEASURED_MS].head(2).tolist() == first[devset.MEASURED_MS].tolist()  # kept, not re-measured
    assert devset.evaluate_devset(models, bundle, csv, policy=QUICK).rows.shape == dev.rows.shape


def test_resume_refuses_another_configuration(tmp_path, evaluated, bundle):
    models, csv, _ = evaluated
    level = bundle.ep_config().opt_level
    assert set(pd.read_csv(csv)["opt_level"]) == {level}  # the CSV records the predictor's level
    other = pd.read_csv(csv).assign(opt_level="extended" if level == "all" else "all")
    other.to_csv(tmp_path / "devset.csv", index=False)
    with pytest.raises(HaseError, match="measured with opt_level"):
        devset.evaluate_devset(models, bundle, tmp_path / "devset.csv", policy=QUICK)


def test_resume_takes_a_thread_count_written_as_a_float_for_the_same_configuration(tmp_path, evaluated, bundle):
    """A table rewritten by pandas after rows were dropped has intra_op_threads 1.0: the same configuration as 1."""
    models, csv, _ = evaluated
    rows = pd.read_csv(csv)
    rows.assign(intra_op_threads=rows["intra_op_threads"].astype(float)).to_csv(tmp_path / "devset.csv", index=False)
    assert "1.0" in (tmp_path / "devset.csv").read_text() or bundle.ep_config().intra_op_threads != 1
    dev = devset.evaluate_devset(models, bundle, tmp_path / "devset.csv", policy=QUICK)  # refused before
    assert len(dev.rows) == len(rows)


def test_a_model_that_fails_gets_an_error_row(tmp_path, bundle):
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    dev = devset.evaluate_devset(tmp_path, bundle, tmp_path / "out.csv", policy=QUICK)
    assert len(dev.rows) == 1 and dev.rows[devset.ERROR].iloc[0] and (dev.scores["n"] == 0).all()


def test_jobs_take_symbolic_sizes_from_models_tsv_else_the_default(tmp_path):
    model = onnx.load(exported_model("hf_bert_tiny_s64_b2"))
    for vi in model.graph.input:
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
        vi.type.tensor_type.shape.dim[1].dim_param = "seq"
    onnx.save(model, tmp_path / "bert.onnx")
    jobs = devset.jobs_for(tmp_path / "bert.onnx", {"inputs": "input_ids:int64[2x32];attention_mask:int64[2x32]"})
    assert [j.free_dims for j in jobs] == [{"seq": 32, "batch": b} for b in devset.BATCHES]
    assert devset.jobs_for(tmp_path / "bert.onnx", batches=(3,))[0].free_dims == {"seq": devset.DEFAULT_DIM, "batch": 3}
    static = devset.jobs_for(exported_model("hf_bert_tiny_s64_b2"))
    assert [(j.batch, j.free_dims) for j in static] == [(2, {})]
    assert devset.tsv_dims("pixel_values:float32[1x3x224x224]") == {"pixel_values": (1, 3, 224, 224)}


def test_models_tsv_sets_the_order_and_the_list(tmp_path):
    d = make_devset(tmp_path)
    (d / "models.tsv").write_text("file\tinputs\nhf_gpt2_tiny_s64_b1.onnx\t\ngone.onnx\t\n")
    paths, info = devset.list_models(d)
    assert [p.name for p in paths] == ["hf_gpt2_tiny_s64_b1.onnx"] and "gone.onnx" in info
    with pytest.raises(HaseError, match="does not exist"):
        devset.list_models(tmp_path / "nowhere")


def test_loo_baseline_recovers_a_line_without_the_model_itself():
    rows = pd.DataFrame({devset.MODEL: list("abcde"), "x": [1.0, 2, 3, 4, 5]})
    rows[devset.MEASURED_MS] = 2 * rows["x"] + 1
    assert devset.loo_baseline(rows, ["x"]) == pytest.approx(rows[devset.MEASURED_MS].to_numpy())


def test_loo_baseline_leaves_a_nets_other_batch_sizes_out_with_it():
    rows = pd.DataFrame({devset.MODEL: ["a.onnx", "b.onnx", "c.onnx", "d.onnx", "net_b1.onnx", "net_b8.onnx"],
                         "x": [1.0, 2, 3, 4, 5, 6]})
    rows[devset.MEASURED_MS] = 2 * rows["x"] + 1
    rows.loc[rows[devset.MODEL].str.startswith("net"), devset.MEASURED_MS] *= 3  # off the others' line
    pred = devset.loo_baseline(rows, ["x"])
    assert pred[4:] == pytest.approx([11.0, 13.0])  # from a-d alone, not from its own other batch


@pytest.mark.parametrize(("model", "sweep"), [("timm_resnet18d_224_b8.onnx", "timm_resnet18d_224"),
                                              ("hf_bert_small_v16k_s512_b2.onnx", "hf_bert_small_v16k_s512"),
                                              ("deit.dynbatch.onnx", "deit"), ("resnet10t.onnx", "resnet10t"),
                                              ("net_b12x.onnx", "net_b12x")])
def test_sweep_name_drops_only_a_trailing_batch(model, sweep):
    assert devset.sweep_name(model) == sweep


def test_report_renders_the_section(tmp_path, evaluated):
    _, _, dev = evaluated
    written = write_report(None, tmp_path / "report", dev)
    md = written["report.md"].read_text()
    assert "## Real exported models" in md and "flops+bytes" in md and SYMBOLIC in md and "measured_min_ms" in md
    assert "## Glossary" in md and written["devset.png"].stat().st_size > 0 and written["devset_scores.csv"].is_file()
    assert "Real exported models" in written["report.html"].read_text()
    stem = SYMBOLIC.removesuffix(".onnx")  # its four batch sizes make a sweep: scored per batch, one family plot
    assert "## Batch sweep, by batch size" in md and written[f"sweep_{stem}.png"].stat().st_size > 0


def test_cli_resumes_and_writes_the_report(tmp_path, evaluated, capsys):
    models, csv, _ = evaluated
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(csv, out / "devset.csv")  # every row done: the command measures nothing again
    assert main(["evaluate", "--devset", str(models), "--store", str(tmp_path / "none.sqlite"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "real exported models, hase" in text and "no store" in text and (out / "report.html").is_file()


def test_the_worst_rows_are_profiled_once_with_the_kernels_that_carry_their_error(tmp_path, evaluated, bundle):
    models, csv, dev = evaluated
    worst = dev.worst
    assert list(worst.columns) == list(devset.WORST_COLUMNS) and len(worst)
    assert len(worst[[devset.MODEL, devset.BATCH]].drop_duplicates()) == min(5,
                                                                             len(dev.rows))  # one profile per worst row
    assert worst["in_model_ms"].notna().any() and (worst["kernel_pred_ms"] > 0).all()
    kept = devset.kernels_csv(csv)
    assert kept.is_file()
    again = devset.evaluate_devset(models, bundle, csv, policy=QUICK)  # every row and its kernels done: reused
    pd.testing.assert_frame_equal(again.worst, dev.worst, check_dtype=False)
    md = write_report(None, tmp_path / "report", dev)["report.md"].read_text()
    assert md.index("## Worst real exported models") < md.index("## Real exported models")
