"""The figures of the PQR tables: AUC, log loss and RMSE over labels -1 / +1 or ratings."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted one half); labels -1 / +1."""
    ranks = rankdata(scores)
    positive = labels > 0
    n_pos = int(np.count_nonzero(positive))
    n_neg = labels.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_loss(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of labels -1 / +1 under P(y = +1)."""
    p = np.clip(probabilities, 1e-15, 1.0 - 1e-15)
    return float(-np.mean(np.where(labels > 0, np.log(p), np.log1p(-p))))


def rmse(predictions: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sqrt(np.mean((predictions - targets) ** 2)))
