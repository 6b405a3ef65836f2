"""The middleware over real HTTP: a client that goes away mid-body is a 499, not a 500."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlparse

import httpx
import pytest

from benchmarks.servers import ServiceProcess
from tests.service.conftest import wait_for


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
