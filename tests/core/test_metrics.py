"""core.metrics against plain-numpy references (tests/naive.py) and scikit-learn."""

import numpy as np
import pytest

from core.metrics import ProgressiveAccuracy, ProgressiveRMSE, accuracy, ndcg_at_k, rmse
from tests import naive


def test_rmse_and_accuracy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    assert rmse(a, b) == pytest.approx(naive.metrics_rmse(a, b))
    assert accuracy(["a", "b", "c"], ["a", "c", "c"]) == pytest.approx(2 / 3)
    for bad in (([1, 2], [1]), ([1.0, np.nan], [1.0, 2.0]), ([[1.0]], [[1.0]])):
        with pytest.raises(ValueError):
            rmse(*bad)
    assert np.isnan(rmse([], []))


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_ndcg_matches_the_reference_per_query(gain):
    rng = np.random.default_rng(1)
    relevance = rng.integers(0, 5, size=200).astype(float)
    scores = np.round(rng.standard_normal(200), 1)  # with ties
    groups = rng.integers(0, 15, size=200)
    for k in (1, 3, 5, 50):
        expected = np.mean(
            [
                naive.metrics_ndcg_at_k(relevance[groups == g], scores[groups == g], k, gain)
                for g in np.unique(groups)
            ]
        )
        assert ndcg_at_k(relevance, scores, k, groups, gain) == pytest.approx(expected)


def test_ndcg_matches_scikit_learn_without_ties():
    from sklearn import metrics  # scikit-learn is in the test extra

    rng = np.random.default_rng(2)
    relevance = rng.integers(0, 5, size=(8, 12)).astype(float)
    scores = rng.standard_normal((8, 12))
    groups = np.repeat(np.arange(8), 12)
    ours = ndcg_at_k(relevance.ravel(), scores.ravel(), 5, groups, gain="linear")
    assert ours == pytest.approx(metrics.ndcg_score(relevance, scores, k=5))


def test_ndcg_edge_cases():
    assert ndcg_at_k([0, 0, 0], [1, 2, 3], k=2) == 1.0  # nothing relevant: every order ideal
    assert ndcg_at_k([1, 0], [2.0, 1.0], k=1) == 1.0
    assert ndcg_at_k([1, 0], [1.0, 2.0], k=1) == 0.0
    with pytest.raises(ValueError):
        ndcg_at_k([1, 0], [1.0, 2.0], k=0)
    with pytest.raises(ValueError):
        ndcg_at_k([1, 0], [1.0, 2.0], k=1, groups=[0])


def test_progressive_metrics():
    accuracy_metric = ProgressiveAccuracy(window=2)
    for truth, guess in [(1, 1), (2, 1), (3, 3)]:
        accuracy_metric.update(truth, guess)
    assert accuracy_metric.value == pytest.approx(2 / 3) and accuracy_metric.recent == 0.5
    accuracy_metric.update_many([1, 1], [1, 1])
    assert accuracy_metric.n == 5 and accuracy_metric.recent == 1.0
    error = ProgressiveRMSE()
    error.update_many([1.0, 2.0], [1.0, 4.0])
    error.update(0.0, 2.0)
    assert error.value == pytest.approx(np.sqrt(8 / 3))
    assert np.isnan(error.recent) and np.isnan(ProgressiveRMSE().value)
    with pytest.raises(ValueError):
        ProgressiveRMSE(window=0)
