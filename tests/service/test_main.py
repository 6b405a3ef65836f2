import os
import signal
import subprocess
import sys
import time

import httpx
from fastapi.testclient import TestClient

from service.main import create_app
from tests.service.conftest import free_port


def test_health_readiness_and_openapi(settings):
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {
            "kernels_compiled": True,
            "models_restored": True,
            "snapshot_store": True,
        }
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
        [sys.executable, "-m", "service.cli", "serve"],
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
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
