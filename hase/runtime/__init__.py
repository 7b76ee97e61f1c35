"""ONNX Runtime itself, the layer every stage stands on: device configurations and the metadata every figure
carries (`types`), sessions, IOBinding runners and timing loops (`sessions`), robust latency over blocks of
runs (`robust`) and the one reader of ORT's profile JSON (`profile`)."""
