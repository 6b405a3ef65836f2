"""benchmarks/scale_out.py in its quick mode (a small model, a few seconds of feedback):
whole-version and delta publication both measured through real processes, the replica
loading deltas in the second."""

from benchmarks import scale_out


def test_quick_freshness_runs(capsys):
    assert scale_out.main(["--quick", "--parts", "freshness"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("{'model'")]
    assert len(rows) == 2
    assert "'delta': " in rows[1]
