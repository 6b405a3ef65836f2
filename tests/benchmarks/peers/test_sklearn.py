"""scikit-learn's adapters: per-call timings and the batch baselines."""

import warnings

import numpy as np

from benchmarks.peers.sklearn import (
    SklearnTimed,
    logistic_regression,
    passive_aggressive,
    quadratic_svc,
    sgd_pa1,
)
from benchmarks.streams import mnist_stream, sparse_stream


def test_timed_models_learn_predict_and_batch_on_sparse_and_dense_rows():
    for stream in (sparse_stream("s", 40, 6, 100, seed=0), mnist_stream(40)):
        for make in (sgd_pa1(1.0), passive_aggressive(1.0)):
            learner = SklearnTimed("peer", make)
            assert learner.unavailable() is None
            learner.prepare(stream)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = learner.new()
                learner.learn_one(model, 40)
                learner.predict_one(model, 40)
                learner.batch(learner.new())
            assert learner.xs[0].shape == (1, stream.n_features)


def test_quadratic_svc_separates_a_disc_and_logistic_regression_fits():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (300, 2))
    y = np.where((X**2).sum(axis=1) < 1.5, 1, -1)  # a disc: quadratic, not linear
    assert np.mean(quadratic_svc(X, y, C=10.0).predict(X) == y) > 0.95
    linear = logistic_regression(X, y, C=1.0)
    assert np.mean(linear.predict(X) == y) < 0.9  # a line cannot separate a disc
    assert quadratic_svc(X, y, gamma="scale").n_support_.sum() > 0
