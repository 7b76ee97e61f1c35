"""Tests of hase.sampler.ranges: kernel sizes counted from real exported models split at `all`, the CSV round trip."""
from __future__ import annotations

from pathlib import Path

import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.sampler.ranges import DIMS, KernelRanges, extract_ranges, ranges_csv, read_ranges

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture
def vendored_ranges(exported_dir: Path) -> KernelRanges:
    return extract_ranges(sorted(exported_dir.glob("*.onnx")), sources="tests/data/models")


def test_ranges_of_the_vendored_models(vendored_ranges):
    r = vendored_ranges
    assert r.provenance["n_models"] == "3" and r.provenance["opt_level"] == "all"
    assert r.provenance["onnxruntime"] and r.provenance["date"]
    # a CNN (semnasnet) and two transformers (BERT, GPT-2): convolutions, weight and attention MatMuls, norms
    assert {"conv", "matmul", "batched_matmul", "norm", "softmax"} <= set(r.families())
    c_in, counts = r.numeric("conv", "c_in")
    assert 3 in c_in and all(n > 0 for n in counts)  # the stem convolution sees the RGB image
    groups, _ = r.values("conv", "groups")
    assert "depthwise" in groups and "dense" in groups  # semnasnet has depthwise and 1x1 convolutions
    n, _ = r.numeric("matmul", "n")
    assert 10 in n  # the classifier head of the 10-class semnasnet
    m, _ = r.numeric("batched_matmul", "m")
    assert 64 in m  # sequence length 64 of the attention scores
    for family, dims in DIMS.items():
        for dim in dims:
            if (family, dim) in r.counts:
                assert family in r.families()


def test_csv_round_trip(vendored_ranges, tmp_path):
    path = tmp_path / "ranges.csv"
    path.write_text(ranges_csv(vendored_ranges))
    back = read_ranges(path)
    assert back.counts == vendored_ranges.counts
    assert back.provenance == vendored_ranges.provenance


def test_shipped_ranges_say_where_they_come_from():
    r = read_ranges(CONFIGS / "kernel_ranges.csv")
    assert int(r.provenance["n_models"]) >= 40 and r.provenance["opt_level"] == "all"
    assert "devset" in r.provenance["sources"]
    assert set(r.families()) >= {"conv", "matmul", "batched_matmul", "norm", "pool", "eltwise", "movement"}
    k, _ = r.numeric("matmul", "k")
    assert max(k) >= 768  # BERT-base-size MatMuls are in range


def test_bad_tables_are_one_line_errors(tmp_path):
    with pytest.raises(HaseError, match="cannot read the kernel ranges"):
        read_ranges(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("family,dim,value,count\nconv,c_in,3,many\n")
    with pytest.raises(HaseError, match="not a kernel ranges table"):
        read_ranges(bad)
    with pytest.raises(HaseError, match=r"no conv\.c_out values"):
        KernelRanges().values("conv", "c_out")


def test_cli_writes_the_table(exported_dir, tmp_path, capsys):
    out = tmp_path / "ranges.csv"
    assert main(["zoo", "--ranges", str(exported_dir), "--ranges-out", str(out)]) == 0
    assert read_ranges(out).provenance["n_models"] == "3"
    assert main(["zoo", "--ranges", str(tmp_path / "nowhere"), "--ranges-out", str(out)]) == 2
    assert "not a folder" in capsys.readouterr().err
