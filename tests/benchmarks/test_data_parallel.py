"""benchmarks/data_parallel.py: its worker processes give what core.parallel.DataParallel
gives, bit for bit, with either merge; the quick mode runs and renders the table."""

import numpy as np
import pytest

from benchmarks import data_parallel
from core.dos import DoSClassifier
from core.one_vs_one import OneVsOne
from core.parallel import DataParallel


@pytest.mark.parametrize("n_workers", [4, 5])
def test_the_tree_of_processes_is_the_in_process_parallel_merge_bit_for_bit(n_workers):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((130, 6)), rng.integers(0, 3, 130)
    model = OneVsOne(base=DoSClassifier(n_features=6, rank=2), classes=[0, 1, 2])
    mine, _, merging, _, _ = data_parallel.run_processes(model, X, y, n_workers, 40, "parallel")
    reference = DataParallel(model, n_workers, 40, merge="parallel")
    reference.learn_many(X, y)
    assert reference.n_merges_ == 3 and merging > 0
    for (name, a), (_, b) in zip(mine.arrays(), reference.model_.arrays(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert mine.get_state()["scalars"] == reference.model_.get_state()["scalars"]


def test_quick_mode_runs_and_matches_the_reference(capsys):
    assert data_parallel.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| 400 | 2 | serial |" in out and "| 400 | 3 | parallel |" in out
    assert "Targets (issue 30)" in out and "speed-up" in out
