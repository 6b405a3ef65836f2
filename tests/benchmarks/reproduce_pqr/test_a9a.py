"""Tuning and evaluation of the a9a table: the lowest validation log loss wins, the test
figures are those of the refitted learner."""

import numpy as np
import pytest

from benchmarks.learners import OnePass
from benchmarks.reproduce_pqr.a9a import evaluate, grid_points, tune
from benchmarks.reproduce_pqr.metrics import log_loss
from benchmarks.streams import sparse_stream


class Constant(OnePass):
    """Predicts P(y = +1) = p everywhere."""

    closed = 0

    def __init__(self, params):
        self.name, self.p = "constant", params["p"]

    def fit(self, stream):
        return 0.0

    def proba(self, stream):
        return np.full(stream.n_rows, self.p)

    def size(self):
        return 1

    def close(self):
        Constant.closed += 1


def test_grid_points_are_the_cartesian_product():
    assert grid_points({"a": [1, 2], "b": [0]}) == [{"a": 1, "b": 0}, {"a": 2, "b": 0}]


def test_tune_picks_the_lowest_validation_log_loss():
    stream = sparse_stream("s", 200, 3, 16, seed=0)
    share = float(np.mean(stream.labels > 0))
    grid = {"p": [0.1, round(share, 2), 0.9]}
    assert tune(Constant, grid, stream, stream) == {"p": round(share, 2)}
    result = evaluate(Constant({"p": 0.5}), stream, stream)
    assert result["auc"] == 0.5 and result["log_loss"] == pytest.approx(np.log(2))
    assert result["log_loss"] == log_loss(np.full(200, 0.5), stream.labels)
    assert Constant.closed == 4  # every learner is closed, the tuned ones and the evaluated one
