"""docker-compose.yml, checked without a Docker engine: every service is health-checked (or
says why not), images are pinned, volumes are declared, ports stay on loopback, required
settings fail fast, the service's environment is made of real settings with valid values
(the settings class parses it), and the services start with it as real processes."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import tomllib

import httpx
import pytest
import yaml

from benchmarks.servers import RedisServer, ServiceProcess
from service.config import Settings
from service.main import warm_up
from tests.deploy.conftest import DEPLOY, ROOT
from tests.system import require_program

COMPOSE = ROOT / "docker-compose.yml"
PREFIX = "LORENTZTRON_"
#: services built from this repository's Dockerfile
BUILT = {"lorentztron", "learner", "api"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # merges the x-lorentztron anchors


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR:?message}, ${VAR:-default} and ${VAR} against ``env``."""

    def one(match: re.Match) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if operator == ":?":
            raise LookupError(f"{name}: {argument}")
        return argument if operator == ":-" else ""

    return re.sub(r"\$\{(\w+)(?:(:\?|:-)([^}]*))?\}", one, str(value))


def test_services(compose):
    services = compose["services"]
    assert set(services) == BUILT | {"redis", "prometheus", "grafana", "balancer"}
    assert services["learner"]["profiles"] == ["roles"] == services["api"]["profiles"]
    assert services["balancer"]["profiles"] == ["roles"]
    assert services["api"]["deploy"]["replicas"] == 2
    for name in ("lorentztron", "redis", "prometheus", "grafana"):
        assert "profiles" not in services[name]  # the default stack


def test_every_service_is_health_checked_and_waits_for_healthy_dependencies(compose):
    services = compose["services"]
    for name, service in services.items():
        healthcheck = service.get("healthcheck")
        assert healthcheck or service.get("x-no-healthcheck-reason"), name
        if healthcheck:
            assert healthcheck["test"][0] in {"CMD", "CMD-SHELL"}, name
            for key in ("interval", "timeout", "retries"):
                assert key in healthcheck, (name, key)
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, (name, dependency)
            assert "healthcheck" in services[dependency], dependency
    # the service's check is the image's: python against /healthz on its port
    for name in BUILT:
        command = " ".join(services[name]["healthcheck"]["test"])
        port = services[name]["environment"][PREFIX + "PORT"]
        assert f"127.0.0.1:{port}/healthz" in command and command.startswith("CMD python")


def test_images_are_pinned(compose):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name, service in compose["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest" and "@" not in tag, (name, image)
        assert re.search(r"\d+\.\d+", tag), (name, image)  # a version, not a moving name
        if name in BUILT:
            assert service["build"] == "." and image == f"lorentztron:{version}"


def test_volumes_are_declared_and_bind_mounts_exist(compose):
    declared = set(compose["volumes"])
    used = set()
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert target.startswith("/"), (name, volume)
            if source.startswith("."):
                assert (ROOT / source).exists(), (name, source)
                assert volume.endswith(":ro"), (name, volume)  # configuration is read-only
            else:
                assert source in declared, (name, source)
                used.add(source)
    assert used == declared
    redis = compose["services"]["redis"]
    assert "redis-data:/data" in redis["volumes"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"


def test_ports_are_published_on_loopback_only(compose):
    published = []
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)
            published.append(port)
    assert "127.0.0.1:8000:8000" in published and "127.0.0.1:3000:3000" in published


def test_environment_is_made_of_real_settings(compose, monkeypatch):
    fields = set(Settings.model_fields)
    secrets = {"LORENTZTRON_WRITE_KEYS": "k1,k2", "GRAFANA_ADMIN_PASSWORD": "p"}
    for name in BUILT:
        environment = compose["services"][name]["environment"]
        variables = {k for k in environment if k.startswith(PREFIX)}
        assert variables == set(environment), name  # nothing else reaches the service
        unknown = {v for v in variables if v.removeprefix(PREFIX).lower() not in fields}
        assert not unknown, f"{name}: not settings of service/config.py: {unknown}"
        for variable in list(variables):
            monkeypatch.setenv(variable, interpolate(environment[variable], secrets))
        settings = Settings()  # raises on a value the service would refuse
        assert settings.host == "0.0.0.0" and settings.port == 8000
        assert settings.redis_url == "redis://redis:6379/0"
        assert settings.write_keys == ["k1", "k2"] and settings.read_keys == []
        assert settings.role == {"lorentztron": "all"}.get(name, name)
        assert settings.workers == 1  # the all-in-one: LORENTZTRON_WORKERS when set
        for variable in variables:
            monkeypatch.delenv(variable)
    services = compose["services"]
    roles_prefix = services["learner"]["environment"][PREFIX + "REDIS_PREFIX"]
    assert services["api"]["environment"][PREFIX + "REDIS_PREFIX"] == roles_prefix
    assert roles_prefix != Settings.model_fields["redis_prefix"].default  # apart from `all`


def test_the_roles_profile_is_one_port_behind_the_balancer(compose):
    """The api replicas publish nothing; HAProxy (deploy/haproxy, a configuration Debian's
    haproxy accepts) publishes one port and spreads requests over every replica of ``api``
    that Docker's DNS names, up to more slots than the profile has replicas."""
    services = compose["services"]
    balancer = services["balancer"]
    assert "ports" not in services["api"] and "ports" not in services["learner"]
    assert balancer["ports"] == ["127.0.0.1:8001:8000"]
    assert "./deploy/haproxy:/usr/local/etc/haproxy:ro" in balancer["volumes"]
    assert balancer["depends_on"] == {"api": {"condition": "service_healthy"}}
    config = DEPLOY / "haproxy" / "haproxy.cfg"
    text = config.read_text()
    port = services["api"]["environment"][PREFIX + "PORT"]
    slots = re.search(rf"server-template api (\d+) api:{port} check", text)
    assert slots and int(slots.group(1)) > services["api"]["deploy"]["replicas"]
    assert "bind :8000" in text and "option httpchk GET /readyz" in text
    assert "retry-on conn-failure" in text  # never a request the service may have read
    haproxy = require_program("haproxy", "haproxy")
    checked = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_required_settings_fail_fast(compose):
    environment = compose["services"]["lorentztron"]["environment"]
    with pytest.raises(LookupError, match="LORENTZTRON_WRITE_KEYS"):
        interpolate(environment[PREFIX + "WRITE_KEYS"], {})
    grafana = compose["services"]["grafana"]["environment"]
    with pytest.raises(LookupError, match="GRAFANA_ADMIN_PASSWORD"):
        interpolate(grafana["GF_SECURITY_ADMIN_PASSWORD"], {})
    text = COMPOSE.read_text()
    assert not re.search(r"(?i)(password|keys?|secret|token)\s*:\s*[\"']?\w{6,}", text)


def test_prometheus_finds_the_services_and_alerts_at_three_snapshot_intervals(compose):
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    port = compose["services"]["lorentztron"]["environment"][PREFIX + "PORT"]
    assert jobs["lorentztron"]["static_configs"][0]["targets"] == [f"lorentztron:{port}"]
    (dns,) = jobs["lorentztron-roles"]["dns_sd_configs"]
    assert set(dns["names"]) == {"learner", "api"} and dns["port"] == int(port)
    assert compose["services"]["lorentztron"]["environment"][PREFIX + "SNAPSHOT_INTERVAL"]
    # the interval each instance runs with, as it exports it: 3 of them, at least a minute
    rules = " ".join((DEPLOY / "prometheus" / "rules.yml").read_text().split())
    assert (
        'lorentztron_snapshot_age_seconds{role!="api"} > on (job, instance) group_left '
        "clamp_min(3 * lorentztron_snapshot_interval_seconds, 60)"
    ) in rules


def test_the_services_run_as_processes_with_the_compose_environment(compose, tmp_path):
    """Each service of the image, with its compose environment (only Redis' address and the
    bind address changed for loopback), against a redis-server run with compose's options:
    all start and become ready, writes need the key, the roles deployment learns through its
    learner and replicas, and the two deployments never see each other's models."""
    services = compose["services"]
    command = services["redis"]["command"]
    assert command[:3] == ["redis-server", "--appendonly", "yes"]
    redis_server = RedisServer(tmp_path, appendfsync=command[command.index("--appendfsync") + 1])
    redis_server.start()
    key = "deploy-test-key"
    processes = {}
    for name in ("lorentztron", "learner", "api"):
        environment = {
            variable: interpolate(value, {"LORENTZTRON_WRITE_KEYS": key})
            for variable, value in services[name]["environment"].items()
        }
        environment |= {
            "LORENTZTRON_REDIS_URL": redis_server.url,
            "LORENTZTRON_HOST": "127.0.0.1",
            "LORENTZTRON_LOG_LEVEL": "warning",
        }
        replicas = services[name].get("deploy", {}).get("replicas", 1)
        for i in range(replicas):
            processes[f"{name}-{i}"] = ServiceProcess(environment, tmp_path / f"{name}-{i}.log")
    warm_up()  # compiled once into the numba cache, which the processes then load
    try:
        starting = [threading.Thread(target=p.start) for p in processes.values()]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        for name, process in processes.items():
            assert httpx.get(f"{process.url}/readyz").status_code == 200, name
        auth = {"Authorization": f"Bearer {key}"}
        single, learner = processes["lorentztron-0"].url, processes["learner-0"].url
        api = [processes["api-0"].url, processes["api-1"].url]
        spec = {"kind": "linear-pa", "input": {"n_features": 2}}
        assert httpx.post(f"{single}/v1/models", json={"name": "solo", **spec}).status_code == 401
        for url, name in ((single, "solo"), (api[0], "shared")):
            response = httpx.post(f"{url}/v1/models", json={"name": name, **spec}, headers=auth)
            assert response.status_code == 201, response.text

        def names(url: str) -> set[str]:
            return {m["name"] for m in httpx.get(f"{url}/v1/models").json()["models"]}

        def versions() -> list[int | None]:
            answers = [httpx.get(f"{url}/v1/models/shared") for url in api]
            return [a.json()["version"] if a.status_code == 200 else None for a in answers]

        def wait_for(expected: list[int]) -> None:
            deadline = time.monotonic() + 30
            while versions() != expected:
                assert time.monotonic() < deadline, versions()
                time.sleep(0.1)

        wait_for([0, 0])  # created on one replica, published to the other
        body = {"examples": [{"x": [1.0, 0.5], "label": 1}, {"x": [-1.0, 0.2], "label": -1}]}
        response = httpx.post(f"{api[1]}/v1/models/shared/feedback", json=body, headers=auth)
        assert response.status_code == 200 and response.json()["logged"] == 2, response.text
        wait_for([1, 1])  # learned by the learner, published, loaded by both
        assert names(single) == {"solo"}
        assert names(learner) == names(api[0]) == names(api[1]) == {"shared"}
    finally:
        for process in processes.values():
            process.stop()
        redis_server.stop()
