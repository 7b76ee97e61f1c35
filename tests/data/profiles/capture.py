"""Re-capture the real ORT CPU profiles kept here: `python tests/data/profiles/capture.py` (see README.md)."""
import os, shutil, tempfile
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper

OUT = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(OUT, "..", "models", "hf_bert_tiny_s64_b2.onnx")  # vendored (tests/data/models/README.md)

def tiny_cnn():
    rng = np.random.default_rng(0)
    w = lambda name, *shape: helper.make_tensor(name, TensorProto.FLOAT, shape, rng.standard_normal(shape).astype(np.float32).ravel())
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                     [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 16, 8, 3, 3), w("b2", 16), w("w3", 10, 16), w("b3", 10)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

def if_model():
    shape = [4, 8]
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t1"], name="then_relu"),
                           helper.make_node("Neg", ["t1"], ["y"], name="then_neg")], "then", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    else_g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"], name="else_sigmoid")], "else", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["s"], name="reduce", keepdims=0),
                      helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
                      helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
                      helper.make_node("Relu", ["y"], ["z"], name="relu_out")], "if_model",
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info("z", TensorProto.FLOAT, shape)],
                     [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

def capture(model, name, runs, opt=ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED):
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), name)
    so.intra_op_num_threads = 1
    so.graph_optimization_level = opt
    src = model if isinstance(model, str) else model.SerializeToString()
    s = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in s.get_inputs():
        if i.type == "tensor(int64)":
            feeds[i.name] = np.ones(i.shape, np.int64)
        else:
            feeds[i.name] = np.random.default_rng(0).uniform(0.1, 1, i.shape).astype(np.float32)
    for _ in range(runs):
        s.run(None, feeds)
    path = s.end_profiling()
    dst = os.path.join(OUT, f"ort{ort.__version__.replace('.', '')[:3]}_cpu_{name}.json")
    shutil.copy(path, dst)
    print(dst, os.path.getsize(dst))

if __name__ == "__main__":
    capture(tiny_cnn(), "tiny_cnn", 4)
    capture(if_model(), "if_subgraph", 2, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    capture(BERT, "bert_tiny", 2)
