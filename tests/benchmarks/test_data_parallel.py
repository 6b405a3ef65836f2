"""benchmarks/data_parallel.py in its quick mode: the worker processes give what
core.parallel.DataParallel gives, bit for bit, and the table renders."""

from benchmarks import data_parallel


def test_quick_mode_runs_and_matches_the_reference(capsys):
    assert data_parallel.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| 400 | 2 |" in out and "speed-up" in out
