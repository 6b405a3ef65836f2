"""The timed-learner protocol's defaults: the model's own calls, and availability."""

import pytest

from benchmarks.learners import Timed
from benchmarks.streams import sparse_stream
from core.linear import LinearPA


class Linear(Timed):
    def prepare(self, stream):
        super().prepare(stream)
        self.xs, self.ys = stream.rows(), stream.int_labels()

    def new(self):
        return LinearPA(n_features=self.stream.n_features)


def test_the_default_loops_call_the_model():
    stream = sparse_stream("s", 20, 4, 32, seed=0)
    learner = Linear("linear")
    assert learner.unavailable() is None
    learner.prepare(stream)
    model = learner.new()
    learner.learn_one(model, 15)
    assert model.n_seen_ == 15
    learner.predict_one(model, 20)
    learner.release()
    assert not hasattr(learner, "xs") and not hasattr(learner, "stream")
    with pytest.raises(NotImplementedError):
        learner.batch(model)


def test_unavailable_says_why():
    class Missing(Linear):
        requires = "no_such_peer_library"

    class Broken(Linear):
        def probe(self):
            raise RuntimeError("renamed estimator")

    assert "cannot import no_such_peer_library" in Missing("m").unavailable()
    assert Broken("b").unavailable() == "RuntimeError: renamed estimator"
