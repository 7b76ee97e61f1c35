"""hase.evaluate.sweep: symbolic-batch copies of static exports, kept only where ONNX Runtime runs them at any
batch (`hase evaluate --devset DIR --batch-sweep`)."""
from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from conftest import exported_model

from hase.cli import main
from hase.errors import HaseError
from hase.evaluate.devset import BATCHES, jobs_for, list_models
from hase.evaluate.sweep import (
    BATCH_DIM,
    LATENCY_COLUMN,
    SEQUENCE_DIM,
    SUFFIX,
    make_sweep_models,
    sequence_of,
    symbolic_copy,
)
from hase.kernels.inputs import declared_dims

CNN, BERT = "timm_semnasnet_050_cls10_b1", "hf_bert_tiny_s64_b2"


@pytest.fixture(scope="module")
def devset(tmp_path_factory) -> Path:
    """A CNN with a batch that can be freed, a BERT export whose Reshapes fix its batch, and a models.tsv that
    lists a third model as too slow for the sweep."""
    d = tmp_path_factory.mktemp("dev")
    for name in (CNN, BERT):
        shutil.copy(exported_model(name), d / f"{name}.onnx")
    shutil.copy(exported_model(CNN), d / "slow.onnx")
    (d / "models.tsv").write_text(
        f"file\tinputs\t{LATENCY_COLUMN}\n{CNN}.onnx\tx:float32[1x3x224x224]\t3.0\n"
        f"{BERT}.onnx\tinput_ids:int64[2x64];attention_mask:int64[2x64]\t2.0\nslow.onnx\t\t500\n")
    return d


def test_symbolic_copy_names_batch_and_sequence():
    bert = symbolic_copy(onnx.load(exported_model(BERT)))
    inits = {i.name for i in bert.graph.initializer}
    dims = [declared_dims(vi) for vi in bert.graph.input if vi.name not in inits]
    assert dims and all(d == [BATCH_DIM, SEQUENCE_DIM] for d in dims)
    assert all(declared_dims(vi)[0] == BATCH_DIM for vi in bert.graph.output)
    assert not bert.graph.value_info
    assert sequence_of(onnx.load(exported_model(BERT))) == 64 and sequence_of(bert) == 0


def test_sweep_keeps_what_runs_at_any_batch(devset, tmp_path):
    paths, info = list_models(devset)
    sweep = make_sweep_models(devset, tmp_path / "dyn", info, paths)
    assert sweep.made == (f"{CNN}{SUFFIX}",)
    assert "at batch" in sweep.left_out[f"{BERT}.onnx"]  # its export fixed the batch at 2
    assert "500.0 ms > 15 ms" in sweep.left_out["slow.onnx"]
    jobs = jobs_for(sweep.folder / sweep.made[0])
    assert [j.batch for j in jobs] == list(BATCHES) and jobs[-1].free_dims == {BATCH_DIM: 8}
    assert sorted(p.name for p in sweep.folder.iterdir()) == ["models.tsv", *sweep.made]  # no temporary left
    again = make_sweep_models(devset, tmp_path / "dyn", info, paths)  # resumed: the copy is reused
    assert again.made == sweep.made


def test_nothing_to_sweep_is_one_error(devset, tmp_path):
    paths, info = list_models(devset)
    with pytest.raises(HaseError, match="raise --sweep-max-ms"):
        make_sweep_models(devset, tmp_path / "dyn", info, paths, max_ms=1.0)


def test_batch_sweep_needs_devset(capsys):
    assert main(["evaluate", "--batch-sweep", "--out", "/tmp/hase-sweep-none"]) != 0
    assert "--batch-sweep needs --devset" in capsys.readouterr().err


def test_a_missing_sweep_folder_is_one_line_and_writes_nothing(devset, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", "--devset", str(devset), "--batch-sweep", "--sweep-also", str(tmp_path / "none"),
                 "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert "models folder" in err and "does not exist" in err and len(err.splitlines()) == 1
    assert not out.exists()
