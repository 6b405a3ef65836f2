"""River's adapters: dict inputs of the non-zeros, per-call timings and one-pass FM."""

import numpy as np

from benchmarks.peers.river import RiverFM, RiverTimed, dicts, fm_classifier, pa_classifier
from benchmarks.streams import sparse_stream


def test_dicts_hold_the_non_zeros_once_per_stream():
    stream = sparse_stream("s", 30, 6, 100, seed=0)
    rows = dicts(stream)
    assert dicts(stream) is rows
    for i, row in enumerate(rows):
        indices, values = stream.sparse_row(i)
        assert row == dict(zip(indices.tolist(), values.tolist(), strict=True))


def test_timed_river_models_learn_and_predict():
    stream = sparse_stream("s", 30, 6, 100, seed=0)
    for learner in (RiverTimed("pa", pa_classifier(1.0)), RiverTimed("fm", fm_classifier(2), 2)):
        assert learner.unavailable() is None
        learner.prepare(stream)
        model = learner.new()
        learner.learn_one(model, 30)
        learner.predict_one(model, 30)
        assert learner.ys == [bool(v > 0) for v in stream.labels]
        learner.release()
        assert not hasattr(learner, "xs")


def test_one_pass_fm_gives_probabilities_and_a_size():
    stream = sparse_stream("s", 200, 6, 50, seed=1)
    fm = RiverFM({"n_factors": 2, "learning_rate": 0.01})
    assert fm.fit(stream) > 0.0
    p = fm.proba(stream)
    assert p.shape == (200,) and np.all((0 < p) & (p < 1))
    assert 0 < fm.size() <= 50 * 3 + 1
