"""Ours in the PQR tables: H is the top-k features of the training stream."""

import numpy as np

from benchmarks.reproduce_pqr.learners import OurPQR, feature_counts, top_k_of
from benchmarks.streams import sparse_stream
from core.pqr import PQR


def test_feature_counts_and_the_precalculated_separation():
    stream = sparse_stream("s", 300, 5, 40, seed=2)
    counts = feature_counts(stream.csr)
    assert counts.sum() == stream.csr.nnz
    chosen = top_k_of(6)(stream)
    assert len(chosen) == 6 and np.min(counts[chosen]) >= np.sort(counts)[-6]


def test_one_pass_is_learn_many_with_that_separation():
    stream = sparse_stream("s", 300, 5, 40, seed=2)
    params = {"alpha": 0.1, "beta": 1.0, "l1": 0.0, "l2": 0.0}
    ours = OurPQR(6, params, top_k_of(6))
    assert ours.name == "PQR (k=6)" and OurPQR(0, params, []).name == "LR"
    assert ours.fit(stream) > 0.0
    reference = PQR(n_features=40, k=6, separation=top_k_of(6)(stream), **params)
    reference.learn_many(stream.csr, stream.labels)
    np.testing.assert_array_equal(ours.proba(stream), reference.predict_proba_many(stream.csr))
    assert ours.size() == reference.model_size()
    assert OurPQR(6, params, "topk", 100, "warm-up").name == "PQR (k=6, warm-up 100)"
