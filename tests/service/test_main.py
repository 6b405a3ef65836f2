import os
import signal
import socket
import subprocess
import sys
import time

import httpx
from fastapi.testclient import TestClient

from service.main import create_app


def test_health_and_readiness_with_lifespan():
    with TestClient(create_app()) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        assert client.get("/openapi.json").json()["info"]["title"] == "lorentztron"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cli_serves_over_real_http():
    """`lorentztron serve` (what `make serve` runs) answers /healthz through uvicorn."""
    port = free_port()
    env = dict(os.environ, LORENTZTRON_PORT=str(port), LORENTZTRON_HOST="127.0.0.1")
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if response.json() == {"status": "ready"}:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, "server did not become ready"
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
