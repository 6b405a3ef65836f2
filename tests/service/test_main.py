import json
import os
import signal
import subprocess
import sys
import time

import httpx

from benchmarks.servers import free_port
from service.main import create_app
from tests.service.conftest import TestClient, wait_for


def test_health_readiness_and_openapi(settings):
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=120)
        ready = client.get("/readyz")
        assert ready.json()["checks"] == {
            "kernels_compiled": True,
            "models_restored": True,
            "snapshot_store": True,
        }
        assert ready.json()["pending"] == []
        spec = client.get("/openapi.json").json()
        assert spec["info"]["title"] == "lorentztron"
        feedback = spec["paths"]["/v1/models/{name}/feedback"]["post"]
        assert set(feedback["requestBody"]["content"]) == {
            "application/json",
            "application/x-ndjson",
            "text/x-svmlight",
        }
        assert "/v1/models/{name}/predict" in spec["paths"]
        response = client.get("/healthz", headers={"X-Request-ID": "abc"})
        assert response.headers["x-request-id"] == "abc"
        assert len(client.get("/healthz").headers["x-request-id"]) == 32


def test_cli_serves_over_real_http(tmp_path):
    """`lorentztron serve` (what `make serve` runs) answers through uvicorn."""
    port = free_port()
    env = dict(
        os.environ,
        LORENTZTRON_PORT=str(port),
        LORENTZTRON_HOST="127.0.0.1",
        LORENTZTRON_SNAPSHOT_DIR=str(tmp_path / "snapshots"),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "service.ops.cli", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, "server did not become ready"
            time.sleep(0.2)
        answer = httpx.get(
            f"http://127.0.0.1:{port}/healthz",
            headers={"X-Request-ID": "probe-1", "Authorization": "Bearer s3cret-token"},
        )
        assert answer.json() == {"status": "ok"}
        missing = httpx.get(f"http://127.0.0.1:{port}/nowhere")
        assert missing.status_code == 404
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    output = process.stdout.read().decode()
    # structured logs: one JSON object per line, an access line per request with its id
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "lorentztron.access"]
    probe = next(line for line in access if line["request_id"] == "probe-1")
    assert probe["path"] == "/healthz" and probe["endpoint"] == "/healthz"
    assert probe["method"] == "GET" and probe["status"] == 200 and probe["ms"] >= 0
    assert probe["level"] == "info" and probe["ts"].endswith("Z")
    unmatched = next(line for line in access if line["path"] == "/nowhere")
    assert unmatched["status"] == 404 and unmatched["endpoint"] == "unmatched"
    assert unmatched["request_id"] == missing.headers["x-request-id"]
    assert "s3cret-token" not in output


def test_metrics_have_no_created_series(client):
    client.get("/healthz")
    text = client.get("/metrics").text
    assert "lorentztron_http_requests_total{" in text
    assert "_created" not in text
