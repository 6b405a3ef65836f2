"""The members' experiments in a tiny mode (the full run: ``python -m benchmarks.experiments``):
the tables' shapes, and invariants that can fail."""

import json

import pytest

from benchmarks import experiments


@pytest.fixture(scope="module")
def a9a():
    """a9a flipped halfway through 6,000 examples, a PA-I slow to unlearn (small C)."""
    return experiments.change_experiment("a9a", 6000, lambda _: None, experiments.PA_C_SLOW)


def test_the_drift_policy_serves_a_fresh_member_after_the_flip(a9a):
    n, change, batch = a9a["examples"], a9a["change"], a9a["batch"]
    assert (n, change) == (6000, 3000)
    served = a9a["served_by"]["drift + auto promotion"]
    assert len(served) == n // batch
    assert set(served[: change // batch]) == {"original"}  # (no false alarm before it)
    assert served[-1] == "drift" and a9a["policy"]["promotions"] >= 1
    assert change < a9a["policy"]["last_detected_at_example"] <= n
    curves = a9a["recent_error"]
    assert set(curves) >= {"drift + auto promotion", "no policy", "serve: best"}
    assert all(len(curve) == n // batch for curve in curves.values())
    # the flip costs the policy less than the same model without it, and it recovers
    assert curves["drift + auto promotion"][-1] < curves["no policy"][-1]
    assert a9a["recovery_examples"]["drift + auto promotion"] is not None


def test_the_change_table_has_a_row_per_configuration(a9a):
    table = experiments.change_table(a9a).split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(a9a["recent_error"])
    assert len({line.count("|") for line in table}) == 1


def test_aa_challengers_are_not_promoted_in_a_short_run():
    result = experiments.false_alarm_experiment(3, 3000, log=lambda _: None)
    assert result["seeds"] == 3 and len(result["runs"]) == 3
    assert result["runs_with_a_promotion"] == 0
    assert result["promotions_by_member"] == {}
    low, high = result["runs_with_a_promotion_interval_95"]
    assert low == 0.0 and 0.5 < high < 1.0
    table = experiments.false_alarm_table(result).splitlines()
    assert table[0] == "| measure | value |" and len(table) == 13


def test_pages_are_written_between_their_markers(a9a, tmp_path):
    page, results = tmp_path / "experiments.md", tmp_path / "experiments.json"
    page.write_text("# title\n\nprose kept\n")
    experiments.write({"a9a": a9a}, page, results, figures=False)
    text = page.read_text()
    assert "prose kept" in text and "<!-- change-a9a:begin -->" in text
    assert "python -m benchmarks.experiments --part change" in text
    assert json.loads(results.read_text())["a9a"]["change"] == 3000
