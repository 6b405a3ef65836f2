"""A short run of the service benchmarks: the service and the bare app measured back to
back as subprocesses, the report written into the section it owns (no timing assertions:
speed is measured, not asserted)."""

from __future__ import annotations

import json

from deploy.loadtest.run_benchmarks.cli import main


def test_a_short_run_measures_the_service_and_the_bare_app_back_to_back(tmp_path, capsys):
    markdown, results = tmp_path / "bench.md", tmp_path / "bench.json"
    markdown.write_text("# Benchmarks\n\nkept\n")
    argv = ["--scenarios", "predict_closed,feedback_closed", "--repeats", "2"]
    argv += ["--duration", "0.5", "--warmup", "0.2", "--concurrency", "2", "--nnz", "5"]
    argv += ["--n-features", "4096", "--rank", "2", "--md", str(markdown), "--json", str(results)]
    assert main(argv) == 0
    result = json.loads(results.read_text())
    for name in ("predict_closed", "feedback_closed"):
        ours, bare = result["runs"][name], result["runs"][f"{name} (bare)"]
        assert [r["server"] for r in ours] == ["service"] * 2
        assert [r["server"] for r in bare] == ["bare"] * 2
        assert all(r["errors"] == 0 and r["ok"] > 0 for r in ours + bare)
    rows = {row["scenario"]: row for row in result["scenarios"]}
    for name in ("predict_closed", "feedback_closed"):
        row = rows[name]
        assert len(row["ratios_per_repeat"]) == 2 and row["ratio_to_bare"] > 0
        assert row["targets"][-1]["metric"] == "ratio_to_bare"
    text = markdown.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n")
    assert "| bare FastAPI req/s | ratio to bare |" in text
    assert "ratio to bare >= 0.80" in text and "ratio to bare >= 0.65" in text
    assert "deploy/loadtest/bare_app.py" in text
    assert "[predict_closed 2/2, bare]" in capsys.readouterr().out
