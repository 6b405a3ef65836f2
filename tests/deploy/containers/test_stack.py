"""The compose deployment brought up for real, under a project name of the test's own (its
own network and volumes, all removed at the end) and talked to through the ports it
publishes on 127.0.0.1 only: it refuses to start without its secrets and comes up healthy
with them; writes need the key; acknowledged feedback survives SIGKILLs of the service's
container and of Redis's (the process-level durability check of
tests/service/durability/test_durability.py, through the containers); ``down`` and ``up`` with the
volumes kept restore the models; Prometheus scrapes every instance and loads the alert
rules; the ``roles`` profile converges to one version behind its one port (HAProxy).

Grafana is left out, by name (``NOT_RUN``). Redis and Prometheus run the stand-ins of
tests/deploy/containers/images.py unless the engine has the real images.
"""

from __future__ import annotations

import base64
import secrets
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml

from service.durability.store import decode
from tests.deploy.containers.conftest import answers, crash, scores, wait_until
from tests.deploy.containers.engine import ROOT, Compose, Engine
from tests.service.durability.test_durability import Clients, check_recovery, run_with_kills

pytestmark = pytest.mark.container

NOT_RUN = {
    "grafana": "no reachable registry has its image and Debian has no package; "
    "tests/deploy/grafana checks its provisioning and dashboard"
}
REDIS_DUMP = Path(__file__).with_name("redis_dump.py")


def published_ports(service: dict) -> list[int]:
    """The host ports of ``127.0.0.1:PORT[-PORT]:TARGET`` entries."""
    ports = []
    for entry in service.get("ports", []):
        first, _, last = entry.split(":")[1].partition("-")
        ports += range(int(first), int(last or first) + 1)
    return ports


def in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Stack:
    engine: Engine
    compose: Compose
    #: the services of the default stack that run (all but NOT_RUN)
    services: list[str]
    url: str
    #: the roles profile's one port (its balancer)
    roles_url: str
    prometheus_url: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.compose.variables['LORENTZTRON_WRITE_KEYS']}"}

    def container(self, service: str) -> str:
        return self.compose.container(service)["Id"]

    def models(self, url: str) -> dict[str, int]:
        listing = httpx.get(f"{url}/v1/models", timeout=10).json()["models"]
        return {model["name"]: model["version"] for model in listing}


@pytest.fixture(scope="module")
def stack(engine, compose_names, compose_file):
    services = compose_file["services"]
    default = [n for n, s in services.items() if "profiles" not in s and n not in NOT_RUN]
    ports = [p for n in [*default, "balancer"] for p in published_ports(services[n])]
    busy = [port for port in ports if in_use(port)]
    if busy:
        pytest.fail(f"the compose file publishes 127.0.0.1 ports {busy}: in use on this machine")
    variables = {
        "LORENTZTRON_WRITE_KEYS": secrets.token_hex(16),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(12),
    }
    compose = Compose(engine, f"lorentztron-test-{uuid.uuid4().hex[:8]}", variables)
    (port,) = published_ports(services["lorentztron"])
    (prometheus,) = published_ports(services["prometheus"])
    try:
        yield Stack(
            engine,
            compose,
            default,
            f"http://127.0.0.1:{port}",
            *[f"http://127.0.0.1:{p}" for p in published_ports(services["balancer"])],
            f"http://127.0.0.1:{prometheus}",
        )
    finally:
        compose.down(volumes=True)
        left = compose.leftovers()
        assert not any(left.values()), f"left behind: {left}"


@pytest.fixture(scope="module")
def running(stack) -> Stack:
    stack.compose.up(*stack.services)
    return stack


@pytest.mark.parametrize("missing", ["LORENTZTRON_WRITE_KEYS", "GRAFANA_ADMIN_PASSWORD"])
def test_refuses_to_start_without_its_secrets(stack, missing):
    variables = {k: v for k, v in stack.compose.variables.items() if k != missing}
    compose = Compose(stack.engine, stack.compose.project, variables)
    result = compose.run("up", "--detach", "--no-build", *stack.services, check=False)
    assert result.returncode != 0
    assert f"required variable {missing} is missing a value" in result.stderr.decode()
    assert not any(compose.leftovers().values())


def test_comes_up_healthy_on_loopback_ports(running, compose_names):
    assert "grafana" not in running.services  # NOT_RUN: no image to run
    for service in running.services:
        container = running.compose.container(service)
        assert container["State"]["Health"]["Status"] == "healthy", service
        ours = compose_names.used[container["Config"]["Image"]]  # or the real image
        assert container["Image"] == running.engine.inspect("image", ours)["Id"], service
        for bindings in container["NetworkSettings"]["Ports"].values():
            assert all(b["HostIp"] == "127.0.0.1" for b in bindings or []), service
    assert answers(running.url) and answers(running.prometheus_url, "/-/ready")


def test_redis_runs_with_the_compose_files_options(running, compose_file):
    command = compose_file["services"]["redis"]["command"]
    assert command[0] == "redis-server"
    options = dict(zip(command[1::2], command[2::2], strict=True))
    for option, value in options.items():
        answer = running.engine.text(
            "exec", running.container("redis"), "redis-cli", "config", "get", option.lstrip("-")
        )
        assert answer.split() == [option.lstrip("-"), value], answer
    # the AOF goes to the volume
    mounts = running.compose.container("redis")["Mounts"]
    assert [m["Destination"] for m in mounts if m["Type"] == "volume"] == ["/data"]


def test_writes_need_the_key(running):
    url = running.url
    spec = {"name": "demo", "kind": "dos", "params": {"rank": 2}, "input": {"n_features": 3}}
    assert httpx.post(f"{url}/v1/models", json=spec).status_code == 401
    response = httpx.post(f"{url}/v1/models", json=spec, headers=running.auth)
    assert response.status_code == 201, response.text
    body = {"examples": [{"x": [1.0, 0.5, 0.0], "label": 1}, {"x": [-1.0, 0.2, 1.0], "label": -1}]}
    assert httpx.post(f"{url}/v1/models/demo/feedback", json=body).status_code == 401
    response = httpx.post(f"{url}/v1/models/demo/feedback", json=body, headers=running.auth)
    assert response.status_code == 200 and response.json()["learned"] == 2, response.text
    assert len(scores(url, "demo", [[0.5, 0.5, 0.5], [1.0, -1.0, 0.0]])) == 2
    assert running.models(url)["demo"] == response.json()["version"]


class ServiceContainer:
    """The compose service's container in the place of ServiceProcess for run_with_kills:
    ``kill`` is a SIGKILL of its process from the host (a crash: the compose file's restart
    policy brings it back), ``start`` waits until it answers again."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.url = stack.url

    def start(self) -> None:
        wait_until(lambda: answers(self.url), 180, "the service's container to answer again")

    def kill(self) -> None:
        crash(self.stack.engine, self.stack.container("lorentztron"))


def redis_dump(stack: Stack, what: str, model: str) -> list[bytes]:
    result = stack.engine.docker(
        "exec", "--interactive", stack.container("lorentztron"), "python", "-", what, model,
        stdin=REDIS_DUMP.read_bytes(),
    )  # fmt: skip
    return [base64.b64decode(line) for line in result.stdout.split()]


def test_acknowledged_feedback_survives_sigkills_of_the_service_and_of_redis(running):
    service = ServiceContainer(running)
    redis = running.container("redis")
    restarts = {
        name: running.compose.container(name)["RestartCount"] for name in ("lorentztron", "redis")
    }

    def redis_answers() -> bool:
        ping = running.engine.docker("exec", redis, "redis-cli", "ping", check=False)
        return ping.stdout.strip() == b"PONG"

    def restart_redis(round_: int) -> None:
        if round_ % 2 == 0:  # Redis dies under load and comes back from its AOF
            crash(running.engine, redis)
            wait_until(redis_answers, 60, "Redis to come back")
            time.sleep(0.3)

    # a fresh process: the run ends before its first periodic snapshot (30 s), so the log
    # still holds every record when it is read
    service.kill()
    service.start()
    clients = Clients(4, seed=30, headers=running.auth)
    run_with_kills(service, clients, np.random.default_rng(3), kills=4, between=restart_redis)
    url = running.url
    version = httpx.get(f"{url}/v1/models/m").json()["version"]
    taken = httpx.get(f"{url}/v1/models/m/snapshots").json()["snapshots"]
    assert [s["version"] for s in taken] == [0], "a snapshot trimmed the log during the run"
    records = redis_dump(running, "log", "m")
    response = httpx.post(f"{url}/v1/models/m/snapshots", headers=running.auth)
    assert response.status_code == 201, response.text
    (blob,) = redis_dump(running, "snapshot", "m")
    _, state = decode(blob)
    assert clients.refused > 0, "Redis was never down while clients were sending"
    # OpenBLAS picks its CPU kernels in the container, while this machine's environment may
    # pin them (OPENBLAS_CORETYPE): the averaged arrays then differ in the last bits
    check_recovery(records, clients, state, version, averaged_atol=1e-12)
    # the restart policy brought both back each time, the same containers
    after = {name: running.compose.container(name)["RestartCount"] for name in restarts}
    assert after == {"lorentztron": restarts["lorentztron"] + 5, "redis": restarts["redis"] + 2}


def rows_for(n_features: int) -> list[list[float]]:
    return np.random.default_rng(n_features).standard_normal((4, n_features)).tolist()


def test_down_and_up_with_the_volumes_kept_restores_the_models(running):
    url = running.url
    listing = httpx.get(f"{url}/v1/models").json()["models"]
    features = {model["name"]: model["input"]["n_features"] for model in listing}
    assert {"demo", "m"} <= set(features)
    versions = running.models(url)
    before = {name: scores(url, name, rows_for(n)) for name, n in features.items()}
    running.compose.down()
    assert not running.compose.containers()
    volumes = running.compose.leftovers()["volumes"]
    assert any(v.endswith("_redis-data") for v in volumes), volumes
    running.compose.up(*running.services)
    assert running.models(url) == versions
    assert {name: scores(url, name, rows_for(n)) for name, n in features.items()} == before


def test_roles_profile_converges_to_one_version_behind_one_port(running):
    running.compose.up("learner", "api", "balancer", profiles=["roles"])
    assert len(running.compose.containers("api")) == 2
    assert len(running.compose.containers("learner")) == 1
    url = running.roles_url  # the balancer: requests spread over both replicas
    assert running.compose.container("balancer")["State"]["Health"]["Status"] == "healthy"
    spec = {"name": "shared", "kind": "linear-pa", "input": {"n_features": 3}}
    response = httpx.post(f"{url}/v1/models", json=spec, headers=running.auth)
    assert response.status_code == 201, response.text

    def versions() -> set[int | None]:  # as many answers as replicas, and more
        answers = [httpx.get(f"{url}/v1/models/shared", timeout=10) for _ in range(6)]
        return {a.json()["version"] if a.status_code == 200 else None for a in answers}

    assert versions() == {0}  # created through one replica, at once through the other
    rng = np.random.default_rng(5)
    for _ in range(10):  # feedback through the port: logged, learned by the learner
        X = rng.standard_normal((3, 3))
        body = {"examples": [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]}
        response = httpx.post(f"{url}/v1/models/shared/feedback", json=body, headers=running.auth)
        assert response.status_code == 200 and response.json()["logged"] == 3, response.text
    wait_until(lambda: versions() == {10}, 60, "every replica at version 10")
    rows = rows_for(3)
    assert len({tuple(scores(url, "shared", rows)) for _ in range(6)}) == 1
    # the two deployments never see each other's models
    assert "shared" not in running.models(running.url)
    assert not {"demo", "m"} & set(running.models(url))


def test_prometheus_scrapes_every_instance_and_loads_the_alert_rules(running):
    prometheus = httpx.Client(base_url=running.prometheus_url, timeout=10)
    rules = yaml.safe_load((ROOT / "deploy/prometheus/rules.yml").read_text())
    expected = {
        group["name"]: [rule.get("alert") or rule["record"] for rule in group["rules"]]
        for group in rules["groups"]
    }
    loaded = prometheus.get("/api/v1/rules").json()["data"]["groups"]
    assert {g["name"]: [r["name"] for r in g["rules"]] for g in loaded} == expected
    assert all(rule["health"] == "ok" for group in loaded for rule in group["rules"])

    def targets() -> dict[str, list[str]]:
        active = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
        found: dict[str, list[str]] = {}
        for target in active:
            if target["health"] == "up":
                found.setdefault(target["labels"]["job"], []).append(
                    target["labels"].get("role", "")
                )
        return {job: sorted(roles) for job, roles in found.items()}

    # the roles are found by Docker's DNS (refreshed every 15 s), then scraped (every 15 s)
    want = {"lorentztron": ["all"], "lorentztron-roles": ["api", "api", "learner"]}
    wait_until(lambda: {k: v for k, v in targets().items() if k in want} == want, 120, "targets")
    version = running.models(running.url)["m"]

    def scraped() -> bool:
        query = 'lorentztron_model_version{model=~"m|shared"}'
        result = prometheus.get("/api/v1/query", params={"query": query}).json()["data"]
        series = [(s["metric"], float(s["value"][1])) for s in result["result"]]
        single = [v for m, v in series if m["job"] == "lorentztron" and m["model"] == "m"]
        roles = [v for m, v in series if m["job"] == "lorentztron-roles"]
        return single == [version] and roles == [10.0] * 3

    wait_until(scraped, 120, "the model versions in Prometheus")
    prometheus.close()
