"""Fixtures of the service tests: apps on temporary stores and a real redis-server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis
from fastapi import testclient

from service.config import Settings
from service.main import create_app


def wait_for(condition, timeout: float = 20.0, period: float = 0.05) -> None:
    """Poll ``condition`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(period)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A real redis-server on a free loopback port, in its own directory."""

    def __init__(self, directory: Path, appendfsync: str | None = None):
        self.directory = directory
        self.port = free_port()
        self.appendfsync = appendfsync
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (make test installs it with apt-get)")
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            "",
        ]
        if self.appendfsync:
            args += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        """SIGKILL: Redis keeps only what its append-only file has on disk."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


class TestClient(testclient.TestClient):
    """FastAPI's test client, entered once the app's first restore was tried (the app
    restores its models in the background: ``service.ops.startup``)."""

    def __enter__(self):
        client = super().__enter__()
        self.portal.call(self.app.state.startup.tried.wait)
        return client


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def create(client, name="m", kind="dos", n_features=3, **extra):
    body = {"name": name, "kind": kind, "input": {"n_features": n_features}, **extra}
    body.setdefault("params", {"rank": 2} if kind == "dos" else {})
    response = client.post("/v1/models", json=body)
    assert response.status_code == 201, response.text
    return response.json()
