"""The load generator of deploy/loadtest against a real server: every mode runs and reports
a summary of the documented shape (no timing assertions: speed is measured by
deploy/loadtest/run_benchmarks.py, not asserted)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
import uvicorn

from service.config import Settings
from service.main import create_app
from tests.deploy.loadtest import load
from tests.service.test_end_to_end import ServerThread

loadgen = load("loadgen")

LATENCY_KEYS = {"count", "mean", "p50", "p90", "p99", "max"}
SUMMARY_KEYS = {
    "mode",
    "loop",
    "target_rate",
    "concurrency",
    "duration_s",
    "url",
    "client",
    "model",
    "batch",
    "requests",
    "ok",
    "errors",
    "error_kinds",
    "elapsed_s",
    "throughput_rps",
    "examples_learned",
    "examples_per_s",
    "latency_ms",
    "operations",
    "feedback_by_prediction_id",
    "send_lag_ms",
    "client_cpu_s",
    "client_cpu_share",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    """The service under uvicorn on a loopback port, in a background thread."""
    settings = Settings(snapshot_dir=tmp_path_factory.mktemp("snapshots"), snapshot_interval=3600)
    with ServerThread(create_app(settings)) as server:
        yield server.url


def small(url: str, **options) -> loadgen.LoadConfig:
    base = dict(
        url=url,
        duration=0.8,
        warmup=0.1,
        concurrency=2,
        rank=4,
        n_features=1024,
        nnz=10,
        pool=64,
        batch=200,
    )
    return loadgen.LoadConfig(**(base | options))


def check_summary(summary: dict, config: loadgen.LoadConfig) -> None:
    assert set(summary) == SUMMARY_KEYS
    assert summary["mode"] == config.mode
    assert summary["loop"] == ("open" if config.rate else "closed")
    assert summary["errors"] == 0, summary["error_kinds"]
    assert summary["ok"] > 0 and summary["ok"] == summary["requests"]
    assert set(summary["latency_ms"]) == LATENCY_KEYS
    assert summary["latency_ms"]["count"] == summary["ok"]
    lat = summary["latency_ms"]
    assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    for values in summary["operations"].values():
        assert {"requests", "ok", "throughput_rps", "latency_ms"} <= set(values)
    assert summary["throughput_rps"] > 0
    assert summary["model"]["n_features"] == config.n_features
    json.dumps(summary)  # the --json output
    assert loadgen.format_summary(summary)


def test_predict_open_loop(server_url):
    config = small(server_url, mode="predict", rate=40.0, duration=1.0)
    summary = loadgen.run(config)
    check_summary(summary, config)
    assert summary["target_rate"] == 40.0
    assert summary["requests"] == 40  # the fixed schedule: rate x duration
    assert set(summary["send_lag_ms"]) == LATENCY_KEYS
    assert set(summary["operations"]) == {"predict"}


def test_feedback_closed_loop(server_url):
    config = small(server_url, mode="feedback")
    summary = loadgen.run(config)
    check_summary(summary, config)
    assert summary["send_lag_ms"] is None
    assert summary["examples_learned"] == summary["ok"]


def test_mixed_answers_predictions_by_id(server_url):
    config = small(server_url, mode="mixed", feedback_fraction=0.3)
    summary = loadgen.run(config)
    check_summary(summary, config)
    assert set(summary["operations"]) == {"predict", "feedback"}
    assert summary["feedback_by_prediction_id"] > 0
    assert summary["examples_learned"] == summary["operations"]["feedback"]["ok"]


@pytest.mark.parametrize("mode", ["predict", "mixed", "bulk"])
def test_raw_client(server_url, mode):
    config = small(server_url, mode=mode, client="raw", duration=0.4, warmup=0.0)
    summary = loadgen.run(config)
    check_summary(summary, config)
    assert summary["client"] == "raw"


def test_raw_client_survives_the_server_closing_idle_connections():
    """uvicorn closes keep-alive connections after an idle timeout; a request that meets a
    just-closed connection is sent again on a new one."""

    async def echo(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    port = free_port()
    config = uvicorn.Config(
        echo, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=0.2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.02)

    async def exchange():
        client = loadgen.RawClient(f"http://127.0.0.1:{port}", max_connections=1, timeout=5)
        client.max_idle = 60.0  # keep the connection past the server's keep-alive timeout
        answers = [await client.post("/", b"one", b"text/plain")]
        await asyncio.sleep(0.6)
        answers.append(await client.post("/", b"two", b"text/plain"))
        await client.aclose()
        return answers

    try:
        assert asyncio.run(exchange()) == [(200, b"one"), (200, b"two")]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_bulk_command_line_writes_json(server_url, tmp_path, capsys):
    out = tmp_path / "bulk.json"
    status = loadgen.main(
        ["--url", server_url, "--mode", "bulk", "--duration", "0.8", "--warmup", "0", "--rank",
         "4", "--n-features", "1024", "--nnz", "10", "--batch", "200", "--pool", "16",
         "--concurrency", "1", "--json", str(out)]
    )  # fmt: skip
    assert status == 0
    summary = json.loads(out.read_text())
    assert set(summary) == SUMMARY_KEYS
    assert summary["mode"] == "bulk" and summary["batch"] == 200
    assert summary["errors"] == 0
    assert summary["examples_learned"] == 200 * summary["ok"]
    assert "bulk (closed loop, 1 clients)" in capsys.readouterr().out


def test_the_created_models_are_deleted(server_url):
    import httpx

    names = [m["name"] for m in httpx.get(f"{server_url}/v1/models").json()["models"]]
    assert not [name for name in names if name.startswith("loadgen-")]


def test_refuses_remote_urls_and_bad_options():
    with pytest.raises(ValueError, match="loopback"):
        loadgen.LoadConfig(url="http://example.com:8000").check()
    with pytest.raises(ValueError, match="mode"):
        loadgen.LoadConfig(mode="stream").check()
    assert loadgen.main(["--url", "http://10.1.2.3:8000"]) == 2


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert loadgen.percentile(values, 50) == 50.0
    assert loadgen.percentile(values, 99) == 99.0
    assert loadgen.percentile(values, 100) == 100.0
    assert loadgen.latency_summary([]) == {"count": 0} | dict.fromkeys(LATENCY_KEYS - {"count"})


@pytest.fixture(scope="module")
def keyed_url(tmp_path_factory):
    """A service that needs keys, with an existing three-class model of 64 inputs."""
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("keyed"),
        snapshot_interval=3600,
        write_keys=["w"],
        read_keys=["r"],
    )
    with ServerThread(create_app(settings)) as server:
        yield from _with_spam_model(server.url)


def _with_spam_model(url: str):
    import httpx

    spec = {
        "name": "spam",
        "kind": "linear-pa",
        "input": {"n_features": 64},
        "classes": ["ham", "spam", "eggs"],
    }
    created = httpx.post(f"{url}/v1/models", json=spec, headers={"Authorization": "Bearer w"})
    assert created.status_code == 201, created.text
    yield url


def test_keys_and_an_existing_model_with_its_own_classes(keyed_url):
    with pytest.raises(RuntimeError, match="unauthorized"):
        loadgen.run(small(keyed_url, mode="predict", model="spam"))
    for mode in ("mixed", "bulk"):
        config = small(keyed_url, mode=mode, model="spam", key="w", duration=0.5)
        summary = loadgen.run(config)
        assert summary["errors"] == 0, summary["error_kinds"]
        assert summary["model"]["name"] == "spam" and summary["model"]["kind"] == "linear-pa"
        assert summary["model"]["n_features"] == 64  # read from the service, not --n-features
    info = (
        __import__("httpx")
        .get(f"{keyed_url}/v1/models/spam", headers={"Authorization": "Bearer r"})
        .json()
    )
    assert info["examples_learned"] > 0 and info["metrics"]["accuracy"] is not None
    predict_only = small(keyed_url, mode="predict", model="spam", key="r", duration=0.3)
    assert loadgen.run(predict_only)["errors"] == 0  # a read key is enough to predict


def test_sweep_reports_the_highest_rate_within_the_bound(server_url, tmp_path, capsys):
    config = small(server_url, mode="predict", rate=20.0, duration=0.4, warmup=0.0)
    result = loadgen.sweep(config, factor=2.0, max_rate=80.0, p99_max_ms=60_000.0)
    assert [step["rate"] for step in result["steps"]] == [20.0, 40.0, 80.0]
    assert result["knee_rate"] == 80.0 and all(step["within"] for step in result["steps"])
    impossible = loadgen.sweep(config, factor=2.0, max_rate=80.0, p99_max_ms=0.0)
    assert impossible["knee_rate"] is None and len(impossible["steps"]) == 1
    out = tmp_path / "sweep.json"
    status = loadgen.main(
        ["--url", server_url, "--mode", "predict", "--rate", "20", "--duration", "0.3",
         "--warmup", "0", "--rank", "4", "--n-features", "1024", "--nnz", "10",
         "--sweep", "--sweep-max", "40", "--p99-max", "60000", "--json", str(out)]
    )  # fmt: skip
    assert status == 0 and json.loads(out.read_text())["knee_rate"] == 40.0
    assert "highest rate with p99 <= 60000 ms" in capsys.readouterr().out
    test_the_created_models_are_deleted(server_url)
