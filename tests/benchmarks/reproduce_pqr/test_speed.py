"""The PQR speed rounds: interleaved, each learner timed its number of rounds, ratios to LR
taken round by round."""

import numpy as np
import pytest

from benchmarks.learners import OnePass
from benchmarks.reproduce_pqr.speed import timing_rounds
from benchmarks.streams import sparse_stream


class Fake(OnePass):
    def __init__(self, name, seconds, calls):
        self.name, self.seconds, self.calls = name, seconds, calls

    def fit(self, stream):
        self.calls.append(self.name)
        return self.seconds.pop(0)


def test_rounds_interleave_and_ratios_are_per_round():
    stream = sparse_stream("s", 10, 3, 16, seed=0)
    calls = []
    lr_seconds, slow_seconds, once_seconds = [1.0, 2.0, 4.0], [3.0, 2.0, 8.0], [50.0]
    learners = {
        "LR": (lambda: Fake("LR", lr_seconds, calls), stream, 3),
        "slow": (lambda: Fake("slow", slow_seconds, calls), stream, 3),
        "once": (lambda: Fake("once", once_seconds, calls), stream.prefix(5), 1),
    }
    timings, last = timing_rounds(learners, 3)
    assert calls == ["LR", "slow", "once", "LR", "slow", "LR", "slow"]
    assert timings["slow"]["vs_lr"] == pytest.approx(2.0)  # median of 3, 1, 2
    assert timings["LR"]["examples_per_second"] == pytest.approx(10 / 2.0)
    assert timings["once"]["rounds"] == 1 and timings["once"]["rows"] == 5
    assert timings["once"]["vs_lr"] == pytest.approx((50.0 / 5) / (1.0 / 10)) and isinstance(
        last["once"], Fake
    )
    assert np.isfinite(timings["LR"]["vs_lr"])
