"""The members' experiments in a tiny mode (the full run: ``python -m benchmarks.experiments``):
the tables' shapes, and invariants that can fail."""

import json

import pytest

from benchmarks import experiments

quiet = lambda _: None  # noqa: E731


@pytest.fixture(scope="module")
def a9a():
    """a9a flipped halfway through 6,000 examples, a PA-I slow to unlearn (small C), two
    seeds (the file's order and a permutation)."""
    return experiments.change_seeds("a9a", 6000, quiet, experiments.PA_C_SLOW, (0, 1))


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


def test_recoveries_are_summarised_over_the_seeds(a9a):
    assert a9a["seeds"] == [0, 1] and [r["seed"] for r in a9a["per_seed"]] == [0, 1]
    for label, spread in a9a["recovery_over_seeds"].items():
        values = [r["recovery_examples"][label] for r in a9a["per_seed"]]
        assert spread["values"] == values
        if None not in values:
            assert spread["min"] == min(values) <= spread["median"] <= spread["max"] == max(values)
    assert experiments._spread([None, 500, 1000]) == {
        "median": 1000, "min": 500, "max": None, "values": [None, 500, 1000]
    }  # fmt: skip


def test_the_change_table_has_a_row_per_configuration_and_one_per_seed(a9a):
    errors, _, seeds, _ = experiments.change_table(a9a).split("\n\n")
    errors, seeds = errors.splitlines(), seeds.splitlines()
    assert len(errors) == 2 + len(a9a["recent_error"])
    assert len({line.count("|") for line in errors}) == 1
    assert len(seeds) == 2 + 2 and len({line.count("|") for line in seeds}) == 1


def test_aa_challengers_are_not_promoted_in_a_short_run():
    result = experiments.false_alarm_experiment(3, 3000, log=quiet)
    assert result["seeds"] == 3 and len(result["runs"]) == 3
    assert result["runs_with_a_promotion"] == 0
    assert result["promotions_by_member"] == {}
    low, high = result["runs_with_a_promotion_interval_95"]
    assert low == 0.0 and 0.5 < high < 1.0
    table = experiments.false_alarm_table(result).splitlines()
    assert table[0] == "| measure | value |" and len(table) == 13


def test_many_short_stationary_streams_in_process():
    runs = {str(c): experiments.short_false_alarms(20, 2000, c, log=quiet) for c in (0.99, 0.95)}
    for confidence, result in runs.items():
        assert result["confidence"] == float(confidence) and result["seeds"] == 20
        assert result["runs_with_a_promotion"] == 0 and result["promoted"] == []
        assert sum(result["aa_final_verdicts"].values()) == 20
        assert result["runs_with_a_promotion_interval_95"][1] == pytest.approx(0.1684, abs=1e-3)
    table = experiments.short_false_alarm_table(runs).splitlines()
    assert "confidence 0.99" in table[0] and "confidence 0.95" in table[0]
    assert len({line.count("|") for line in table}) == 1


def test_the_in_process_cost_measures_each_configuration():
    result = experiments.precise_cost(repeats=1, singles=10, bulk_requests=2, log=quiet)
    medians = result["median_us_per_example"]
    keys = {f"{k} {s} {c}" for k in ("dos", "linear-pa") for s in ("single", "bulk")
            for c in (0, 1, 3, "member")}  # fmt: skip
    assert set(medians) == keys and all(v > 0 for v in medians.values())
    table = experiments.precise_cost_table(result).split("\n\n")[0].splitlines()
    assert len(table) == 2 + 4 and len({line.count("|") for line in table}) == 1


def test_pages_are_written_between_their_markers(a9a, tmp_path):
    page, results = tmp_path / "experiments.md", tmp_path / "experiments.json"
    page.write_text("# title\n\nprose kept\n")
    experiments.write({"a9a": a9a}, page, results, figures=False)
    text = page.read_text()
    assert "prose kept" in text and "<!-- change-a9a:begin -->" in text
    # the command a user runs from the repository root
    assert ".venv/bin/python -m benchmarks.experiments --part change" in text
    assert "cd " not in text
    assert json.loads(results.read_text())["a9a"]["change"] == 3000
