"""benchmarks/dense_multiclass.py end to end on a small slice of MNIST: every figure is
measured (a real server included, one request at a time and two in flight, each learning
every row) and rendered with the verdicts; nothing is written with ``--no-write``. The
``--before`` checkout is this one, so the child process must predict what the parent does."""

import re

from benchmarks import dense_multiclass
from benchmarks.environment import ROOT


def test_small_run_measures_and_renders_every_row(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(dense_multiclass, "DOCS", tmp_path)
    dense_multiclass.main(
        ["--rows", "400", "--body", "100", "--repeats", "1", "--no-write", "--before", str(ROOT)]
    )
    text = capsys.readouterr().out
    for row in (
        "library `learn_many(progressive=True)` (pair by pair, the default here)",
        "library `learn_many(progressive=True)` by block products (the path for larger pairs)",
        "library `predict_many`, stacked product",
        "library `predict_many`, per-model path (small batches)",
        "HTTP bulk svmlight feedback (durable log), one request at a time",
        "HTTP bulk svmlight feedback (durable log), two requests in flight",
    ):
        line = next(line for line in text.splitlines() if line.startswith(f"| {row} |"))
        cpu, wall = (float(cell.replace(",", "")) for cell in line.split("|")[2:4])
        assert cpu > 0 and wall > 0, line
    assert "identical predictions on\n  100.00% of the rows" in text
    assert "two requests in flight:" in text and not list(tmp_path.iterdir())
    before = next(line for line in text.splitlines() if "(before issue 18) |" in line)
    assert all(float(cell.replace(",", "")) > 0 for cell in before.split("|")[2:4]), before
    agreement = re.search(r"the two predict the same\s+class for ([\d.]+)% of the rows", text)
    assert agreement and float(agreement.group(1)) == 100.0, text
    peak = re.search(r"float64 product on one BLAS thread:\s+(\d+) GFLOP/s", text)
    assert peak and int(peak.group(1)) > 0, text
