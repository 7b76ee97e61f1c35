"""Predict: measurements -> features -> per-op forests -> calibrated model latency, and how good that is.

    dataset      the store's measurements of one device as tables (kernels, nodes, models)
    features/    per-family feature tables computed from a kernel's signature alone
    forest       scikit-learn forests packed into numpy arrays (prediction never imports scikit-learn)
    predictor    KernelPredictor: one forest per op key, family and generic fallbacks
    calibration  kernel sum -> model latency (alpha * sum + gamma * n_kernels + beta) and its fits
    metrics      RMSPE, ±x % accuracy, Scores
    busy         which rows training trusts: measured on a busy host or noisy -> dropped or down-weighted
    crossval     leave-family-out folds (used by train, reported by evaluate)
    baselines    linear FLOPs / bytes baselines, scored the same way
    manifest     manifest.json as typed records; bundle: saving and verified loading of a predictor directory
    train        cross-validate, choose target and calibration, fit, save
    estimate     a model file's predicted latency with its interval

Evaluation and reporting of a trained predictor are their own stage, `hase.evaluate`, above this one.
"""
