"""A short run of the service benchmarks: the service and the bare app measured back to
back as subprocesses, the report written into the section it owns (no timing assertions:
speed is measured, not asserted)."""

from __future__ import annotations

import json

import httpx
import pytest

from deploy.loadtest.run_benchmarks.cli import main
from service.config import Settings
from service.main import create_app
from tests.service.test_end_to_end import ServerThread


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


def test_url_measures_a_running_service_and_starts_none(tmp_path, capsys):
    """``--url``: the scenarios run against a service started elsewhere (here, in this
    process), with no server started, no bare-app baseline and no server CPU figures; the
    service keeps running and keeps no model of the runs."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    results = tmp_path / "bench.json"
    with ServerThread(create_app(settings)) as server:
        argv = ["--url", server.url, "--scenarios", "predict_closed,feedback_closed"]
        argv += ["--repeats", "1", "--duration", "0.4", "--warmup", "0.1", "--concurrency", "2"]
        argv += ["--nnz", "5", "--n-features", "4096", "--rank", "2", "--json", str(results)]
        assert main(argv) == 0
        assert httpx.get(f"{server.url}/v1/models").json()["models"] == []
    out = capsys.readouterr().out
    assert f"measuring the service running at {server.url}" in out and "starting" not in out
    result = json.loads(results.read_text())
    assert set(result["runs"]) == {"predict_closed", "feedback_closed"}  # no "(bare)" runs
    for name in ("predict_closed", "feedback_closed"):
        (run,) = result["runs"][name]
        assert run["url"] == server.url and run["errors"] == 0 and run["ok"] > 0
        assert run["server_cpu_s"] is None and run["server_cpu_us_per_request"] is None
    rows = {row["scenario"]: row for row in result["scenarios"]}
    assert all(t["metric"] != "ratio_to_bare" for t in rows["feedback_closed"]["targets"])
    assert f"the service already running at {server.url}" in out


def test_url_and_pin_do_not_go_together(capsys):
    with pytest.raises(SystemExit):
        main(["--url", "http://127.0.0.1:1", "--pin"])
    assert "--pin" in capsys.readouterr().err
