"""The measure stage: timed units of work (kernel, model), the canary, resumable collect and the store.

Sessions, IOBinding and robust timing are ONNX Runtime's layer, `hase.runtime`."""
