"""The middleware over real HTTP: a client that goes away mid-body is a 499, not a 500; a
client whose body does not arrive in time gets a 408 and its connection closed."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import httpx
import pytest

from benchmarks.servers import ServiceProcess
from service.config import Settings
from service.main import create_app
from tests.service.conftest import wait_for
from tests.service.test_end_to_end import ServerThread


def send_half_a_body(url: str, path: str) -> None:
    """Headers announcing a large body, a few bytes of it, then the connection closed."""
    address = urlparse(url)
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            "content-length: 100000\r\n\r\n".encode()
            + b'{"examples": [{"x": [1, 2'
        )
        time.sleep(0.2)


@pytest.mark.parametrize("fast_path", ["true", "false"])
def test_a_client_gone_mid_body_is_a_499_logged_at_info(tmp_path, fast_path):
    log_path = tmp_path / "service.log"
    service = ServiceProcess(
        {
            "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
            "LORENTZTRON_FAST_PATH": fast_path,
        },
        log_path=log_path,
    ).start()
    try:
        spec = {"name": "m", "kind": "dos", "input": {"n_features": 3}}
        assert httpx.post(f"{service.url}/v1/models", json=spec).status_code == 201
        for _ in range(3):
            for action in ("feedback", "predict"):
                send_half_a_body(service.url, f"/v1/models/m/{action}")

        def counted() -> str:
            return httpx.get(f"{service.url}/metrics").text

        for action in ("feedback", "predict"):
            line = (
                f'lorentztron_http_requests_total{{endpoint="/v1/models/{{name}}/{action}",'
                'method="POST",status="499"} 3.0'
            )
            wait_for(lambda line=line: line in counted(), timeout=10)
        assert 'status="500"' not in counted()
    finally:
        service.stop()
    text = log_path.read_text()
    assert "unexpected error" not in text and "Traceback" not in text
    assert '"status": 499' in text  # the access log line, at info


def half_a_body_then_wait(port: int, method: str, path: str, media: str) -> bytes:
    """Headers announcing a body, part of it, and nothing more: everything the server sends
    until it closes the connection (a socket timeout fails the test)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {media}\r\n"
            "content-length: 100000\r\n\r\n".encode()
            + b'{"examples": [{"x": [1, 2'
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast_path", "fastapi_routes"])
def test_a_body_that_does_not_arrive_in_time_is_a_408_and_the_connection_closed(
    tmp_path, fast_path
):
    """Slow clients against a real server with ``body_timeout`` 0.5 s: each gets 408
    ``request_timeout`` (in the protocol's form under /v2) and its connection is closed."""
    settings = Settings(
        snapshot_dir=tmp_path, snapshot_interval=3600, body_timeout=0.5, fast_path=fast_path
    )
    requests = [
        ("POST", "/v1/models/m/feedback", "application/json", False),
        ("POST", "/v1/models/m/predict", "application/json", False),
        ("POST", "/v1/models", "application/json", False),
        ("PUT", "/v1/models/copy", "application/octet-stream", False),
        ("POST", "/v2/models/m/infer", "application/json", True),
    ]
    with ServerThread(create_app(settings)) as server:
        spec = {"name": "m", "kind": "linear-pa", "input": {"n_features": 3}}
        assert httpx.post(f"{server.url}/v1/models", json=spec).status_code == 201
        with ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(lambda r: half_a_body_then_wait(server.port, *r[:3]), requests))
        for (_, path, _, protocol), answer in zip(requests, answers, strict=True):
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408 "), (path, answer[:300])
            assert b"connection: close" in head.lower(), (path, head)
            error = json.loads(body)
            code = error["code"] if protocol else error["error"]["code"]
            assert code == "request_timeout", (path, error)
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'status="408"' in metrics and 'status="500"' not in metrics


def test_documentation_assets_are_counted_under_their_mounts_template(client):
    """Swagger UI's scripts and styles (a mounted app, not a route) are one endpoint,
    ``/docs/assets/{path}``, not ``unmatched``; a path nothing serves still is."""
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png", "missing.js"):
        client.get(f"/docs/assets/{asset}")
    client.get("/nowhere")
    text = client.get("/metrics").text
    for status in (200, 404):
        assert (
            'lorentztron_http_requests_total{endpoint="/docs/assets/{path}",method="GET",'
            f'status="{status}"}}'
        ) in text
    assert 'status="200"' not in "".join(
        line for line in text.splitlines() if 'endpoint="unmatched"' in line
    )
    unmatched = 'endpoint="unmatched",method="GET",status="404"} 1.0'
    assert f"lorentztron_http_requests_total{{{unmatched}" in text
