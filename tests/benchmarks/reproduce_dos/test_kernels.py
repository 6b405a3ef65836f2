"""The stacked kernels' pieces: the non-zero pixels and OneVsOne's vote."""

import numpy as np

from benchmarks.reproduce_dos.family import FIRST, PAIRS, SECOND
from benchmarks.reproduce_dos.kernels import N_CLASSES, nonzero_pixels, ovo_winner
from core.linear import LinearPA
from core.one_vs_one import OneVsOne


def test_nonzero_pixels_of_a_row():
    X = np.array([[0.0, 0.5, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    indices, values = np.empty(4, dtype=np.int64), np.empty(4)
    assert nonzero_pixels(X, 0, indices, values) == 2
    assert indices[:2].tolist() == [1, 3] and values[:2].tolist() == [0.5, 2.0]
    assert nonzero_pixels(X, 1, indices, values) == 0


def test_the_vote_is_one_vs_ones_ties_included():
    rng = np.random.default_rng(0)
    reference = OneVsOne(base=LinearPA(n_features=1), classes=list(range(N_CLASSES)))
    votes, confidence = np.empty(N_CLASSES, dtype=np.int64), np.empty(N_CLASSES)
    for trial in range(200):
        # few distinct values: many ties in votes and in confidence
        scores = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=len(PAIRS))
        for p, model in enumerate(reference.models_):
            model.w_[:] = [0.0, scores[p]]  # the pair's score of any x is its bias
        expected = reference.predict_one([0.0])
        assert ovo_winner(scores, FIRST, SECOND, votes, confidence) == expected, trial
