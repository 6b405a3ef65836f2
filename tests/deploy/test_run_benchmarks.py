"""The service benchmarks' bare FastAPI baseline (deploy/loadtest/bare_app.py) and the
report of run_benchmarks.py: the baseline answers the service's requests with same-shaped
answers under the same uvicorn settings, and every closed-loop single-request figure carries
its ratio to it (no timing assertions: speed is measured, not asserted)."""

from __future__ import annotations

import argparse
import json

import pytest
import uvicorn
from fastapi.testclient import TestClient

from service.config import Settings
from service.main import create_app
from service.ops import cli
from tests.deploy.loadtest import LOADTEST, load

loadgen = load("loadgen")
bare_app = load("bare_app")
run_benchmarks = load("run_benchmarks")


def shape(value):
    """The keys of an answer, recursively (lists by their first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_the_bare_app_answers_the_load_in_the_services_shape(tmp_path):
    workload = loadgen.Workload(loadgen.LoadConfig(pool=4, n_features=1024, rank=4))
    spec = workload.model_spec("m")
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600)
    json_type = {"content-type": "application/json"}
    with TestClient(bare_app.create_app()) as bare, TestClient(create_app(settings)) as service:
        assert bare.get("/readyz").status_code == 200
        for client in (bare, service):
            assert client.post("/v1/models", json=spec).status_code == 201
        answers = {}
        for client in (bare, service):
            predict = client.post(
                "/v1/models/m/predict?variant=live",
                content=workload.predict_bodies[0],
                headers=json_type,
            )
            feedback = client.post(
                "/v1/models/m/feedback", content=workload.feedback_bodies[1], headers=json_type
            )
            assert predict.status_code == feedback.status_code == 200
            answers[client] = (predict.json(), feedback.json())
        bare_predict, bare_feedback = answers[bare]
        service_predict, service_feedback = answers[service]
        assert set(bare_predict) == set(service_predict)
        assert set(bare_predict["predictions"][0]) == set(service_predict["predictions"][0])
        assert set(service_feedback) - set(bare_feedback) <= {"logged"}  # (None: left out)
        assert shape(bare_feedback["results"]) == shape(service_feedback["results"])
        # the body is validated: what the service refuses for its shape, the bare app too
        for client in (bare, service):
            assert client.post("/v1/models/m/predict", json={"instances": "no"}).status_code == 422
            bad = {"examples": [{"indices": ["a"], "values": [1.0], "label": 1}]}
            assert client.post("/v1/models/m/feedback", json=bad).status_code == 422
            assert client.delete("/v1/models/m").status_code == 204


def test_the_bare_app_runs_under_the_services_uvicorn_settings(monkeypatch):
    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda target, **options: runs.append((target, options)))
    prepared = []  # (the set-up of the server process, not of this test process)
    monkeypatch.setattr(cli, "configure_process", lambda settings: prepared.append(settings))
    cli.main(["serve", "--port", "8123"])
    bare_app.main(["--port", "8123"])
    assert len(prepared) == 2 and prepared[0] == prepared[1]
    (service_target, service_options), (bare_target, bare_options) = runs
    assert service_target == "service.main:create_app" and bare_target == "bare_app:create_app"
    assert bare_options.pop("app_dir") == str(LOADTEST)
    assert bare_options == service_options == cli.uvicorn_options(Settings(), None, 8123)
    assert service_options["factory"] and service_options["access_log"] is False


def run(**values) -> dict:
    """One run's summary as loadgen reports it (the fields the report reads)."""
    summary = {
        "mode": "predict",
        "throughput_rps": 100.0,
        "examples_per_s": 0.0,
        "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
        "errors": 0,
        "requests": 1000,
        "server_cpu_us_per_request": 300.0,
        "server_cpu_share": 0.5,
        "client_cpu_share": 0.1,
        "other_cpu_share": 0.0,
        "loadavg_before": [1.0, 1.0, 1.0],
        "send_lag_ms": None,
        "operations": {"predict": {}},
    }
    return summary | values


def test_the_ratio_to_the_bare_app_is_the_median_of_the_repeats_ratios():
    args = argparse.Namespace(predict_rate=500.0, baseline=True)
    service = [run(throughput_rps=r) for r in (800.0, 300.0, 900.0)]
    bare = [run(throughput_rps=r, server_cpu_us_per_request=200.0) for r in (1000.0, 1000.0, 0.0)]
    row = run_benchmarks.aggregate(
        "predict_closed", service, run_benchmarks.targets_of("predict_closed", args), bare
    )
    assert row["ratios_per_repeat"] == [0.8, 0.3]  # (a repeat whose baseline served nothing)
    assert row["ratio_to_bare"] == pytest.approx(0.55)
    assert row["ratio_of_medians"] == pytest.approx(0.8)
    assert row["bare"]["throughput_rps"] == 1000.0 and row["bare"]["errors"] == 0
    [target] = row["targets"]
    assert target["metric"] == "ratio_to_bare" and target["value"] == 0.8 and not target["met"]
    feedback = run_benchmarks.targets_of("feedback_closed", args)
    assert [t["metric"] for t in feedback] == ["throughput_rps", "ratio_to_bare"]
    assert feedback[1]["value"] == 0.65
    args.baseline = False
    assert run_benchmarks.targets_of("predict_closed", args) == []


def test_a_short_run_measures_the_service_and_the_bare_app_back_to_back(tmp_path, capsys):
    markdown, results = tmp_path / "bench.md", tmp_path / "bench.json"
    markdown.write_text("# Benchmarks\n\nkept\n")
    argv = ["--scenarios", "predict_closed,feedback_closed", "--repeats", "2"]
    argv += ["--duration", "0.5", "--warmup", "0.2", "--concurrency", "2", "--nnz", "5"]
    argv += ["--n-features", "4096", "--rank", "2", "--md", str(markdown), "--json", str(results)]
    assert run_benchmarks.main(argv) == 0
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
