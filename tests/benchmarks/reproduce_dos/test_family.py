"""A stacked family is core.one_vs_one.OneVsOne over the library's binary models, bit for
bit, and averaging identical snapshots keeps its classifier."""

import numpy as np
import pytest

from benchmarks.reproduce_dos.family import PAIRS, Family
from core.datasets import DeformationStream
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.registry import state_digest
from tests.benchmarks.reproduce_dos.digits import strokes


@pytest.mark.parametrize("rank", [None, 2])
def test_stacked_kernel_is_one_vs_one(rank):
    """The benchmark's kernel makes the predictions and updates of core.one_vs_one.OneVsOne
    over the library's binary models, bit for bit."""
    images, labels = strokes()
    X, y = DeformationStream(images, labels, seed=0).take(250)
    family = Family(rank, seed=3)
    predictions = np.concatenate([family.learn(X[:100], y[:100]), family.learn(X[100:], y[100:])])

    base = (
        LinearPA(n_features=784)
        if rank is None
        else DoSClassifier(n_features=784, rank=rank, seed=3)
    )
    reference = OneVsOne(base=base, classes=list(range(10)))
    expected = []
    for x, label in zip(X, y, strict=True):
        nonzero = np.flatnonzero(x)
        expected.append(reference.learn_one((nonzero, x[nonzero]), int(label)).predicted)
    np.testing.assert_array_equal(predictions, expected)
    for p in range(len(PAIRS)):
        assert state_digest(family.pair_state(p)) == state_digest(reference.models_[p].get_state())
    np.testing.assert_array_equal(family.predict(X[:40]), reference.predict_many(X[:40]))


def test_averaging_identical_snapshots_keeps_the_classifier():
    images, labels = strokes()
    X, y = DeformationStream(images, labels, seed=1).take(200)
    family = Family(2, seed=0)
    family.learn(X, y)
    family.fold_snapshot()
    family.fold_snapshot()
    assert family.n_averaged == 2
    np.testing.assert_array_equal(family.predict(X, averaged=True), family.predict(X))
