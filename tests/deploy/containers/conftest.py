"""Fixtures of the container tests (``make test-deploy``; ``make test`` deselects them by their
``container`` marker): the engine, the images, and a container's helpers."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import httpx
import pytest
import yaml

from tests.deploy.containers.engine import ROOT, Engine
from tests.deploy.containers.images import (
    BorrowedNames,
    base_image,
    service_image,
    standin_image,
)

#: services of the compose file run by the stand-in of the same name
STANDIN_SERVICES = ("redis", "prometheus", "balancer")


@dataclass
class Images:
    base: str
    service: str
    #: compose service name -> our image for it (the service's build or a stand-in)
    by_service: dict[str, str]


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    engine = Engine(tmp_path_factory.mktemp("engine")).start()
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def compose_file() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="session")
def images(engine, tmp_path_factory) -> Images:
    base = base_image(engine, tmp_path_factory.mktemp("base"))
    service = service_image(engine, base)
    standins = {name: standin_image(engine, name, base) for name in STANDIN_SERVICES}
    return Images(base, service, {"lorentztron": service, **standins})


@pytest.fixture(scope="session")
def compose_names(engine, images, compose_file):
    """The compose file's image names on our images while the session runs."""
    services = compose_file["services"]
    builds = {services["lorentztron"]["image"]: images.service}
    standins = {services[name]["image"]: images.by_service[name] for name in STANDIN_SERVICES}
    with BorrowedNames(engine, builds, standins) as names:
        yield names


def wait_until(condition, timeout: float, what: str, period: float = 0.2):
    """Poll ``condition`` until it returns a true value, which is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(period)


def answers(url: str, path: str = "/readyz") -> bool:
    try:
        return httpx.get(url + path, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def scores(url: str, model: str, rows: list[list[float]]) -> list[float]:
    """The model's scores of ``rows`` (dense), through the predict route."""
    body = {"instances": [{"x": row} for row in rows]}
    response = httpx.post(f"{url}/v1/models/{model}/predict", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return [prediction["score"] for prediction in response.json()["predictions"]]


def health(engine: Engine, container: str) -> str | None:
    state = engine.inspect("container", container)["State"]
    return (state.get("Health") or {}).get("Status")


def crash(engine: Engine, container: str) -> None:
    """SIGKILL to the container's process from the host: a crash, not a ``docker stop``, so
    the restart policy applies; returns once the engine has seen the process die."""
    before = engine.inspect("container", container)
    pid = before["State"]["Pid"]
    assert before["State"]["Running"] and pid > 0, before["State"]
    os.kill(pid, signal.SIGKILL)

    def gone():
        state = engine.inspect("container", container)
        return state["State"]["Pid"] != pid or state["RestartCount"] > before["RestartCount"]

    wait_until(gone, 30, f"{container} to die")
