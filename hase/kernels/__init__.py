"""The kernels stage: ORT's optimized kernel graph of a model, split into one single-kernel model per unique kernel."""
