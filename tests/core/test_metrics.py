"""core.metrics against plain-numpy references (tests/naive.py) and scikit-learn."""

import numpy as np
import pytest

from core.metrics import (
    ProgressiveAccuracy,
    ProgressiveRMSE,
    ProgressiveValidation,
    accuracy,
    ndcg_at_k,
    rmse,
)
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


def test_progressive_metrics_windows():
    progressive = ProgressiveValidation(window=3, loss="hinge")
    progressive.update(np.array([True, False, True, True]), np.array([0.0, 2.0, 0.0, 1.0]))
    summary = progressive.summary()
    assert summary["examples"] == 4 and summary["accuracy"] == 0.75
    assert summary["loss"] == 0.75 and summary["rmse"] is None
    assert summary["recent_examples"] == 3
    assert summary["recent_accuracy"] == pytest.approx(2 / 3)
    assert summary["recent_loss"] == pytest.approx(1.0)
    progressive.update(np.zeros(0, bool), np.zeros(0))
    assert progressive.summary()["examples"] == 4
    big = ProgressiveValidation(window=2, loss="hinge")
    big.update(np.array([False, False, True, True, True]), np.zeros(5))
    assert big.summary()["recent_accuracy"] == 1.0


def test_progressive_single_examples_equal_one_batch():
    """The one-example path (plain Python) keeps what a batch update of the same examples
    keeps, window wrap-around included."""
    rng = np.random.default_rng(0)
    correct, losses, squared = rng.random(7) < 0.5, rng.random(7), rng.random(7)
    for sq in (None, squared):
        one_by_one = ProgressiveValidation(window=3, loss="squared", regression=sq is not None)
        batched = ProgressiveValidation(window=3, loss="squared", regression=sq is not None)
        for i in range(7):
            one_by_one.update(
                correct[i : i + 1], losses[i : i + 1], None if sq is None else sq[i : i + 1]
            )
        batched.update(correct, losses, sq)
        assert one_by_one.summary() == pytest.approx(batched.summary())
        assert np.array_equal(one_by_one.recent_, batched.recent_)


def test_progressive_validation_state_round_trip_and_other_windows():
    rng = np.random.default_rng(1)
    metrics = ProgressiveValidation(window=4, loss="squared", regression=True)
    metrics.update(rng.random(7) < 0.5, rng.random(7), rng.random(7))
    same = ProgressiveValidation(window=4, loss="squared", regression=True)
    same.set_state(metrics.get_state())
    assert same.summary() == metrics.summary()
    same.update([True], [0.5], [0.25]), metrics.update([True], [0.5], [0.25])
    assert same.summary() == metrics.summary()
    # a state saved with another window keeps its newest examples that fit
    for window in (2, 9):
        other = ProgressiveValidation(window=window, loss="squared", regression=True)
        other.set_state(metrics.get_state())
        reference = ProgressiveValidation(window=window, loss="squared", regression=True)
        reference.update(np.ones(8, bool), np.zeros(8), np.zeros(8))
        kept = min(window, 4)
        chronological = np.roll(metrics.recent_, -(metrics.n % 4), axis=1)[:, 4 - kept :]
        assert other.n == metrics.n and other.summary()["recent_examples"] == kept
        assert other.summary()["recent_loss"] == pytest.approx(chronological[1].mean())


def test_progressive_validation_refuses_a_bad_state_and_keeps_its_own():
    """Everything is checked before anything is loaded: counts that are integers in
    [0, 2**63) and consistent (``filled`` within n and the saved window, ``correct <= n``),
    sums never NaN or -inf, ``recent_`` a float64 (3, window) array without them."""
    metrics = ProgressiveValidation(window=4, loss="hinge")
    metrics.update([True, False, True], [0.0, 1.5, 0.25])
    good = metrics.get_state()
    before = (metrics.get_state(), metrics.summary())

    def with_scalar(name, value):
        return {"arrays": good["arrays"], "scalars": {**good["scalars"], name: value}}

    def with_window(recent):
        return {"arrays": {"recent_": recent}, "scalars": good["scalars"]}

    window = good["arrays"]["recent_"]
    without_n = {k: v for k, v in good["scalars"].items() if k != "n"}
    bad_states = [
        with_scalar("n", 10**40),
        with_scalar("n", True),
        with_scalar("n", -1),
        with_scalar("correct", 4),  # more correct than examples
        with_scalar("filled", 5),  # more than the window of 4 (and than n)
        with_scalar("loss_sum", float("nan")),
        with_scalar("squared_sum", -float("inf")),
        with_window(window.astype(np.uint8)),  # safetensors' U8
        with_window(window.astype(object)),
        with_window(np.full((3, 4), np.nan)),
        with_window(np.zeros((2, 4))),
        {"arrays": {}, "scalars": good["scalars"]},
        {"arrays": good["arrays"], "scalars": without_n},
    ]
    for state in bad_states:
        with pytest.raises(ValueError):
            metrics.set_state(state)
        after = metrics.get_state()
        assert after["scalars"] == before[0]["scalars"] and metrics.summary() == before[1]
        assert np.array_equal(after["arrays"]["recent_"], before[0]["arrays"]["recent_"])


def test_progressive_validation_states_it_reaches_load():
    """A running sum that overflowed to +inf, and a loss that rounded below zero, are states
    the object reaches by ``update``: they round-trip."""
    metrics = ProgressiveValidation(window=2, loss="squared", regression=True)
    with np.errstate(over="ignore"):  # the sums overflow to +inf
        metrics.update([False, False], [1e308, 1e308], [1e308, 1e308])
    metrics.update([True], [-1e-17], [0.0])  # (a loss computed as a difference)
    state = metrics.get_state()
    assert state["scalars"]["loss_sum"] == np.inf
    other = ProgressiveValidation(window=2, loss="squared", regression=True)
    other.set_state(state)
    assert other.get_state()["scalars"] == state["scalars"]
    assert np.array_equal(other.recent_, metrics.recent_)


def test_progressive_window_grows_with_the_examples_it_saw():
    """A metric holds and saves columns for the examples it saw (up to the window), not the
    whole window from the start (a process holds thousands of models that learned little);
    its summaries and its state are those of a full ring buffer (a plain list here)."""
    rng = np.random.default_rng(3)
    window = 50
    metrics = ProgressiveValidation(window=window, loss="squared", regression=True)
    assert metrics.recent_.nbytes == 0
    seen = []  # (correct, loss, squared error) of every example, in order
    for size in (1, 1, 3, 1, 7, 2, 30, 1, 1, 60, 5):
        correct, losses, squared = rng.random(size) < 0.5, rng.random(size), rng.random(size)
        metrics.update(correct, losses, squared)
        seen.extend(zip(correct.astype(float), losses, squared, strict=True))
        n = len(seen)
        assert min(n, window) <= metrics.recent_.shape[1] <= window
        ring = np.zeros((3, window))
        for position, terms in enumerate(seen):
            ring[:, position % window] = terms
        state = metrics.get_state()
        width = window if n >= window else n  # (the columns filled: a young model saves few)
        assert np.array_equal(state["arrays"]["recent_"], ring[:, :width])
        kept = min(n, window)  # (the means as a full buffer gives them, bit for bit)
        recent = ring[:, (n - kept + np.arange(kept)) % window].mean(axis=1)
        summary = metrics.summary()
        assert summary["recent_loss"] == recent[1]
        assert summary["recent_rmse"] == np.sqrt(recent[2])
        restored = ProgressiveValidation(window=window, loss="squared", regression=True)
        restored.set_state(state)
        assert restored.summary() == summary
        assert restored.recent_.shape[1] == width
        assert np.array_equal(restored.get_state()["arrays"]["recent_"], ring[:, :width])
    assert metrics.recent_.shape == (3, window)
