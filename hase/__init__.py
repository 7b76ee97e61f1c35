"""Hase: predict ONNX model latency from kernel measurements, and explain measured runs."""
__version__ = "0.1.0"
