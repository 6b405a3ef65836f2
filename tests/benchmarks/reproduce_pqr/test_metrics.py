"""The PQR tables' metrics against their definitions."""

import math

import numpy as np
import pytest

from benchmarks.reproduce_pqr.metrics import auc, log_loss, rmse


def test_auc_and_log_loss():
    labels = np.array([1, -1, 1, -1, 1, -1])
    assert auc(np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3]), labels) == 1.0
    assert auc(np.zeros(6), labels) == 0.5  # ties count one half
    assert auc(np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7]), labels) == 0.0
    rng = np.random.default_rng(0)
    scores, labels = rng.integers(0, 5, 300).astype(float), rng.choice([-1, 1], 300)
    ranks = scores[labels > 0][:, None] - scores[labels < 0][None, :]
    assert auc(scores, labels) == pytest.approx(np.mean((ranks > 0) + 0.5 * (ranks == 0)))
    assert log_loss(np.full(4, 0.5), np.array([1, -1, 1, -1])) == pytest.approx(math.log(2))
    assert np.isfinite(log_loss(np.array([0.0, 1.0]), np.array([1, -1])))
    assert rmse(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 1.0
