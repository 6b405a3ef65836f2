"""Vowpal Wabbit's adapters: its text lines, and the adapters on a real workspace when the
bench extra's vowpalwabbit is installed (otherwise they say why they cannot run)."""

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks.peers import available
from benchmarks.peers.vw import VowpalWabbit, VWTimed, text_lines
from benchmarks.streams import Stream, sparse_stream


def test_text_lines_in_both_formats():
    stream = Stream(
        "t", sp.csr_matrix(np.array([[0.0, 0.5, 0.0], [2.0, 0.0, 1 / 3]])), np.array([1.0, -1.0])
    )
    assert text_lines(stream) == ["1 |f 1:0.5", "-1 |f 0:2 2:0.333333"]
    assert text_lines(stream, labelled=False) == ["|f 1:0.5", "|f 0:2 2:0.333333"]
    assert text_lines(stream, False, **VowpalWabbit.FORMAT)[1] == ("|a f0:2 f2:0.33333333333333331")


def test_adapters_run_or_say_why_not(tmp_path: Path):
    stream = sparse_stream("s", 300, 6, 64, seed=0)
    timed = VWTimed("vw", "--loss_function hinge")
    if not available("vowpalwabbit"):
        assert "vowpalwabbit" in timed.unavailable()
        return
    assert timed.unavailable() is None
    timed.prepare(stream)
    model = timed.new()
    timed.learn_one(model, 300)
    timed.predict_one(model, 300)
    timed.close(model)
    one_pass = VowpalWabbit("ftrl", {"ftrl_alpha": 0.1, "ftrl_beta": 1.0, "l1": 0.0}, tmp_path)
    assert one_pass.fit(stream) > 0.0 and (tmp_path / "s.vw").exists()
    p = one_pass.proba(stream)
    assert p.shape == (300,) and np.all((0 <= p) & (p <= 1)) and one_pass.size() > 0
    one_pass.close()
