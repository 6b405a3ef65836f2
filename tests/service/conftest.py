"""Fixtures of the service tests: apps on temporary stores and a real redis-server."""

from __future__ import annotations

import time

import pytest
from fastapi import testclient

from benchmarks.servers import RedisServer
from service.config import Settings
from service.main import create_app


def wait_for(condition, timeout: float = 20.0, period: float = 0.05) -> None:
    """Poll ``condition`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(period)


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
