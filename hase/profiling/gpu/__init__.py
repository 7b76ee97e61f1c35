"""The CUDA execution provider's side of a profile: CUPTI activity records (`records`, `cupti`), their
attribution to ORT nodes (`attribute`), and the nodes ORT places on the CPU on purpose (`placement`)."""
