"""The profiling stage: where a measured run's time goes, from ONNX Runtime's profiler.

`hase.runtime.profile` reads ORT's profile JSON (the one reader);
`decompose` turns events into per-node spans and a per-run
decomposition, `findings` says what the decomposition means, `perfetto` exports a trace, and `run` runs a model
under the profiler (the library side of `hase profile`).
"""
