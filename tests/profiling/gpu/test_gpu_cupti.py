"""hase.profiling.gpu.cupti where cupti-python is missing (this CPU machine), and profile_model's CUPTI switch;
the recording itself is checked on a GPU (test_gpu_cupti_live.py, marker `gpu`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from hase.errors import HaseError
from hase.profiling.gpu import cupti
from hase.profiling.run import profile_model
from hase.runtime.types import EPConfig

MODEL = Path(__file__).parents[2] / "data" / "models" / "hf_bert_tiny_s64_b2.onnx"


def test_missing_cupti_python_names_the_install():
    if cupti.cupti_available():
        pytest.skip("cupti-python is installed here")
    with pytest.raises(HaseError, match=r"cupti-python is not installed.*pip install hase\[gpu\]"):
        cupti.cupti_module()
    with pytest.raises(HaseError, match="cupti-python"), cupti.CuptiRecorder():
        pass


def test_profile_model_records_cupti_only_on_cuda(tmp_path):
    with pytest.raises(HaseError, match="--ep cuda"):
        profile_model(MODEL, EPConfig(name="cpu"), runs=1, warmup=0, workdir=tmp_path, cupti=True)
    assert profile_model(MODEL, EPConfig(name="cpu"), runs=1, warmup=0, workdir=tmp_path).gpu is None
