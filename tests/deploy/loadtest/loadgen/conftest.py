"""The service the load generator's tests drive: under uvicorn on a loopback port, in a
background thread, one per test process (starting one costs seconds)."""

from __future__ import annotations

import pytest

from service.config import Settings
from service.main import create_app
from tests.service.test_end_to_end import ServerThread


@pytest.fixture(scope="session")
def server_url(tmp_path_factory):
    settings = Settings(snapshot_dir=tmp_path_factory.mktemp("snapshots"), snapshot_interval=3600)
    with ServerThread(create_app(settings)) as server:
        yield server.url
