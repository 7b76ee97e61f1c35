"""Re-create the vendored test models from the exported originals: `python tests/data/models/vendor.py [SRC]`.

SRC is the folder holding the six exported models (default: ../shared/models/exported beside the repository).
The two transformer models are copied byte for byte; the CNN is `timm_semnasnet_050_b1.onnx` with its
1000-class classifier sliced to its first 10 classes (5.1 MB of the 8.3 MB are that head). See README.md.
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
COPIED = ("hf_bert_tiny_s64_b2.onnx", "hf_gpt2_tiny_s64_b1.onnx")
CNN_SOURCE, CNN_VENDORED, CLASSES = "timm_semnasnet_050_b1.onnx", "timm_semnasnet_050_cls10_b1.onnx", 10


def slice_classifier(model: onnx.ModelProto, classes: int) -> onnx.ModelProto:
    """Keep the first `classes` rows of the final Gemm's weight and bias; the rest of the graph is untouched."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    gemm = out.graph.node[-1]
    assert gemm.op_type == "Gemm" and gemm.output[0] == out.graph.output[0].name, "last node is not the head"
    for init in out.graph.initializer:
        if init.name in gemm.input[1:]:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init)[:classes].copy(), init.name))
    out.graph.output[0].type.tensor_type.shape.dim[1].dim_value = classes
    out.metadata_props.add(key="hase_vendored_from",
                           value=f"{CNN_SOURCE}, classifier sliced to its first {classes} classes")
    onnx.checker.check_model(out)
    return out


def check_same_logits(original: Path, sliced: Path, classes: int) -> None:
    """The sliced model must give exactly the original's first `classes` logits."""
    sessions = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (original, sliced)]
    x = sessions[0].get_inputs()[0]
    feed = {x.name: np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)}
    full, small = (s.run(None, feed)[0] for s in sessions)
    np.testing.assert_allclose(small, full[:, :classes], rtol=1e-5, atol=1e-6)


def main(src: Path) -> None:
    for name in COPIED:
        shutil.copyfile(src / name, HERE / name)
    onnx.save(slice_classifier(onnx.load(src / CNN_SOURCE), CLASSES), HERE / CNN_VENDORED)
    check_same_logits(src / CNN_SOURCE, HERE / CNN_VENDORED, CLASSES)
    for name in (*COPIED, CNN_VENDORED):
        data = (HERE / name).read_bytes()
        print(f"{name}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[3] / "shared" / "models" / "exported")
