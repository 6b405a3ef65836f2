"""The service image built from the Dockerfile as written (only the base image's name passed
in) and run by a real engine, alone, through a published loopback port: it runs as uid
10001 and can write only its data and cache directories (and the world-writable sticky
scratch directories every Debian image has), its HEALTHCHECK turns healthy, writes need the
key, and ``docker restart`` (SIGTERM, the last snapshot) keeps its models in its data
directory."""

from __future__ import annotations

import posixpath
import secrets
import uuid

import httpx
import pytest

from benchmarks.servers import free_port
from tests.deploy.containers.conftest import answers, health, scores, wait_until

pytestmark = pytest.mark.container

DATA, CACHE = "/var/lib/lorentztron", "/var/cache/lorentztron"
ROWS = [[0.3, -0.2], [-2.0, 1.0]]


@pytest.fixture(scope="module")
def container(engine, images):
    """One container of the image with a write key, on a free loopback port."""
    port, key = free_port(), secrets.token_hex(16)
    name = f"lorentztron-test-{uuid.uuid4().hex[:8]}"
    engine.docker("run", "--detach", "--name", name, "--publish", f"127.0.0.1:{port}:8000",
                  "--env", f"LORENTZTRON_WRITE_KEYS={key}", images.service)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url), 120, "the container to answer /readyz")
        yield name, url, key
    finally:
        engine.docker("rm", "--force", "--volumes", name)


def find(engine, container: str, *tests: str) -> list[str]:
    """``find / -xdev TESTS`` run by the container's user; the folders it may not enter
    (root's own, mode 0700) are reported and left out: nothing in them is reachable."""
    result = engine.docker("exec", container, "find", "/", "-xdev", *tests, check=False)
    errors = result.stderr.decode().splitlines()
    assert all(e.endswith("Permission denied") for e in errors), errors
    assert result.returncode in (0, 1) and (result.returncode == 0) == (not errors)
    return result.stdout.decode().splitlines()


def test_the_image_is_the_dockerfiles(engine, images):
    image = engine.inspect("image", images.service)
    config = image["Config"]
    assert config["User"] == "10001:10001"
    assert config["Cmd"] == ["lorentztron", "serve"] and "8000/tcp" in config["ExposedPorts"]
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
    assert config["Labels"]["org.opencontainers.image.title"] == "lorentztron"
    assert not [v for v in config["Env"] if v.startswith(("LORENTZTRON_WRITE", "LORENTZTRON_READ"))]
    # the runtime stage starts from the base given to the build: its layers come first
    base = engine.inspect("image", images.base)
    assert image["RootFS"]["Layers"][: len(base["RootFS"]["Layers"])] == base["RootFS"]["Layers"]


def test_runs_as_uid_10001_and_writes_only_its_data_and_cache(engine, container):
    name, _, _ = container
    status = engine.text("exec", name, "cat", "/proc/1/status")
    (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    assert uids == ["10001"] * 4  # the server itself, real to saved ids
    # every path of the image's file system (mounts left out) the server's user may write
    listing = find(engine, name, "-writable", "-printf", r"%m %y %p -> %l\n")
    scratch, links = set(), {}
    for line in listing:
        mode, kind, rest = line.split(" ", 2)
        path, target = rest.split(" -> ")
        if path in (DATA, CACHE) or path.startswith((DATA + "/", CACHE + "/")):
            continue
        if kind == "l":
            links[path] = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        else:  # world-writable with the sticky bit: no one removes another user's files
            assert mode == "1777" and kind == "d", (mode, kind, path)
            scratch.add(path)
    assert scratch <= {"/tmp", "/var/tmp", "/run/lock"} and set(links.values()) <= scratch
    owned = find(engine, name, "-user", "10001")
    assert all(p.startswith((DATA, CACHE)) for p in owned), owned
    denied = engine.docker("exec", name, "touch", "/opt/venv/lib/planted", check=False)
    assert denied.returncode != 0 and b"Permission denied" in denied.stderr
    engine.docker("exec", name, "touch", f"{DATA}/snapshots/probe", f"{CACHE}/numba/probe")
    engine.docker("exec", name, "rm", f"{DATA}/snapshots/probe", f"{CACHE}/numba/probe")


def test_healthcheck_turns_healthy(engine, container):
    name, _, _ = container
    wait_until(lambda: health(engine, name) == "healthy", 120, "the HEALTHCHECK")
    log = engine.inspect("container", name)["State"]["Health"]["Log"]
    assert log and log[-1]["ExitCode"] == 0


def test_writes_need_the_key_and_docker_restart_keeps_the_models(engine, container):
    name, url, key = container
    auth = {"Authorization": f"Bearer {key}"}
    spec = {"name": "alone", "kind": "linear-pa", "input": {"n_features": 2}}
    assert httpx.post(f"{url}/v1/models", json=spec).status_code == 401
    assert httpx.post(f"{url}/v1/models", json=spec, headers=auth).status_code == 201
    body = {"examples": [{"x": [1.0, 0.5], "label": 1}, {"x": [-1.0, 0.2], "label": -1}]}
    assert httpx.post(f"{url}/v1/models/alone/feedback", json=body).status_code == 401
    response = httpx.post(f"{url}/v1/models/alone/feedback", json=body, headers=auth)
    assert response.status_code == 200, response.text
    before = scores(url, "alone", ROWS)
    version = httpx.get(f"{url}/v1/models/alone").json()["version"]
    assert version == response.json()["version"] == 1 and before[0] != before[1]
    engine.docker("stop", name)  # SIGTERM: the shutdown writes the last snapshot
    assert engine.inspect("container", name)["State"]["ExitCode"] == 0
    engine.docker("start", name)
    wait_until(lambda: answers(url), 120, "the restarted container")
    assert httpx.get(f"{url}/v1/models/alone").json()["version"] == version
    assert scores(url, "alone", ROWS) == before
