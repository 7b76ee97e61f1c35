"""Features of recurrent layers (LSTM, GRU, RNN): steps, batch, sizes and gates, the shape of ORT's loop.

ORT runs the input projection of all steps as one GEMM, then per step and direction a GEMM of the hidden state by
the recurrent weights and the gate arithmetic, so a layer's time is about steps x (a small GEMM + per-step cost):
the step count is a feature of its own, not only a factor of the FLOPs.
"""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import attr, inp, moved_bytes, tensor_bytes
from hase.predict.features.registry import feature_family

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
RECURRENT_COLUMNS = (
    ("steps", "sequence length (time steps)"),
    ("batch", "sequences run together"),
    ("input_size", "features per step"),
    ("hidden", "hidden units"),
    ("directions", "1 forward or reverse, 2 bidirectional"),
    ("gates", "gate blocks per unit: LSTM 4, GRU 3, RNN 1"),
    ("step_flops", "FLOPs of one step's recurrent GEMM, all directions (2 x batch x gates x hidden^2 x dirs)"),
    ("weight_bytes", "bytes of W, R and B"),
    ("flops", "2 x steps x batch x dirs x gates x hidden x (input + hidden)"),
    ("bytes", "input + output bytes"),
)


@feature_family("recurrent", tuple(GATES), RECURRENT_COLUMNS)
def recurrent_features(spec: KernelSpec) -> dict[str, float]:
    """LSTM/GRU/RNN layers: the loop's steps and the GEMMs inside it (sizes from X [seq, batch, input] or, with
    layout 1, [batch, seq, input], and W [dirs, gates x hidden, input])."""
    x, w = inp(spec, 0), inp(spec, 1)
    x_shape = tuple(x.shape) if x is not None and len(x.shape) == 3 else (1, 1, 1)
    steps, batch = (x_shape[1], x_shape[0]) if int(attr(spec, "layout", 0) or 0) == 1 else (x_shape[0], x_shape[1])
    gates = GATES.get(spec.op_type, 1)
    dirs = int(w.shape[0]) if w is not None and len(w.shape) == 3 else \
        (2 if attr(spec, "direction", "forward") == "bidirectional" else 1)
    hidden = int(attr(spec, "hidden_size", 0) or 0) or (int(w.shape[1]) // gates if w is not None and
                                                        len(w.shape) == 3 else 1)
    weights = sum(tensor_bytes(t) for t in (inp(spec, 1), inp(spec, 2), inp(spec, 3)) if t is not None)
    return {
        "steps": steps, "batch": batch, "input_size": x_shape[2], "hidden": hidden, "directions": dirs, "gates": gates,
        "step_flops": 2.0 * batch * gates * hidden * hidden * dirs, "weight_bytes": weights,
        "flops": 2.0 * steps * batch * dirs * gates * hidden * (x_shape[2] + hidden), "bytes": moved_bytes(spec),
    }
