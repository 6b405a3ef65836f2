"""A live monitoring stack for the deploy tests: real services on loopback and a real
Prometheus with the project's scrape config and rules, its targets rewritten to the test
ports, after realistic traffic.

Job ``lorentztron`` (the all-in-one service) has two instances. ``healthy`` snapshots every
second. ``troubled`` cannot write the snapshots of model ``spam`` once it is created (a file
then stands where its folder goes), so its snapshot requests fail with 503; its models are
then fed flipped labels over a short metrics window (an accuracy drop). A third target never
answers. Job ``lorentztron-roles`` (the compose ``roles`` profile) is a learner and an api
replica, as processes, on a real redis-server; feedback goes through the replica. So some
alerts really fire, and every series the dashboard plots exists.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from benchmarks.servers import RedisServer, ServiceProcess, free_port, start_all, stop_all
from service.config import Settings
from service.main import create_app, warm_up
from service.ops.history import History
from service.ops.metrics import Metrics
from tests.service import traffic
from tests.service.test_end_to_end import ServerThread
from tests.system import require_program

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCRAPE_INTERVAL = "1s"
#: what Grafana's $__rate_interval stands for here: many scrape intervals, and the whole
#: traffic even when the machine is slow
RATE_INTERVAL = "1m"
SERVICE_JOB = "lorentztron"
ROLES_JOB = "lorentztron-roles"


@pytest.fixture(scope="session")
def promtool() -> str:
    require_program("prometheus", "prometheus")
    return require_program("promtool", "prometheus")


def rewrite_config(
    config: dict, targets: dict[str, list[str]], discovered: dict[str, list[str]], rules: Path
) -> dict:
    """The project's config for a test: fast scrapes, absolute rule paths, every static
    target replaced by the test addresses of the same name, and every name found by DNS
    (Docker's, in the compose network) replaced by static targets labelled as the DNS
    relabelling would (``role`` = the name)."""
    config = dict(config)
    config["global"] = {
        **config.get("global", {}),
        "scrape_interval": SCRAPE_INTERVAL,
        "scrape_timeout": SCRAPE_INTERVAL,
        "evaluation_interval": SCRAPE_INTERVAL,
    }
    config["rule_files"] = [str(rules)]
    jobs = []
    for job in config["scrape_configs"]:
        job = dict(job)
        if "static_configs" in job:
            job["static_configs"] = [
                {**group, "targets": [t for target in group["targets"] for t in targets[target]]}
                for group in job["static_configs"]
            ]
        for dns in job.pop("dns_sd_configs", []):
            relabels = job.pop("relabel_configs")
            assert relabels == [{"source_labels": ["__meta_dns_name"], "target_label": "role"}]
            job["static_configs"] = [
                {"targets": discovered[name], "labels": {"role": name}} for name in dns["names"]
            ]
        jobs.append(job)
    config["scrape_configs"] = jobs
    return config


@dataclass
class LiveStack:
    prometheus: httpx.Client
    models: list[str]
    #: instance address by name: healthy, troubled, dead, learner, api
    instances: dict[str, str]
    #: queries are evaluated at this moment, right after the traffic
    time: float = 0.0

    def query(self, expr: str) -> list[dict]:
        response = self.prometheus.get("/api/v1/query", params={"query": expr, "time": self.time})
        body = response.json()
        assert response.status_code == 200 and body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def has_data(self, expr: str) -> bool:
        """The expression returns at least one series with a number (not NaN)."""
        result = self.query(expr)
        return any(not math.isnan(float(item["value"][1])) for item in result)


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _address(url: str) -> str:
    return url.removeprefix("http://")


def _in_threads(*calls) -> None:
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _drive_roles(api_url: str) -> None:
    """Feedback through the api replica (logged, learned by the learner, published)."""
    with httpx.Client(base_url=api_url, timeout=30) as http:
        traffic.create_models(http)
        _wait(lambda: http.get("/v1/models/spam").status_code == 200, 30, "the replica")
        traffic.drive(http, 8.0, seed=2, pause=0.1)


class Prometheus:
    def __init__(self, binary: str, promtool: str, config: dict, directory: Path, port: int):
        self.config_file = directory / "prometheus.yml"
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        check = subprocess.run(
            [promtool, "check", "config", str(self.config_file)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
        self.log_path = directory / "prometheus.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.config_file}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def wait_scraping(self, addresses: set[str]) -> None:
        def ready():
            try:
                return self.client.get("/-/ready").status_code == 200
            except httpx.HTTPError:
                assert self.process.poll() is None, self.log_path.read_text()
                return False

        def scraping():  # targets are picked up a few seconds after start
            targets = self.client.get("/api/v1/targets").json()["data"]["activeTargets"]
            return addresses <= {t["labels"]["instance"] for t in targets if t["health"] == "up"}

        _wait(ready, 30, "Prometheus to start")
        _wait(scraping, 30, "the first scrapes")

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="session")
def live_stack(tmp_path_factory, promtool):
    prometheus_binary = require_program("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("stack")
    # compile the kernels once, here, into the numba cache: the four services below then
    # load them instead of compiling them four times at once on a cold cache
    warm_up()
    healthy = create_app(
        Settings(
            snapshot_dir=tmp / "a" / "snapshots", log_dir=tmp / "a" / "log", snapshot_interval=1
        )
    )
    troubled = create_app(
        Settings(
            snapshot_dir=tmp / "b" / "snapshots",
            log_dir=tmp / "b" / "log",
            snapshot_interval=1,
            metrics_window=40,
        )
    )
    for app in (healthy, troubled):
        app.state.history = History(app.state.metrics, interval=1.0)
    redis_server = RedisServer(tmp)
    redis_server.start()
    roles = {"LORENTZTRON_REDIS_URL": redis_server.url, "LORENTZTRON_LOG_LEVEL": "warning"}
    learner = ServiceProcess({**roles, "LORENTZTRON_ROLE": "learner"}, tmp / "learner.log")
    api = ServiceProcess({**roles, "LORENTZTRON_ROLE": "api"}, tmp / "api.log")
    prometheus = None
    try:
        start_all((learner, api))
        with ServerThread(healthy) as a, ServerThread(troubled) as b:
            instances = {
                "healthy": _address(a.url),
                "troubled": _address(b.url),
                "dead": f"127.0.0.1:{free_port()}",  # nothing listens there
                "learner": _address(learner.url),
                "api": _address(api.url),
            }
            prometheus_port = free_port()
            config = rewrite_config(
                yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text()),
                {
                    "lorentztron:8000": [instances[k] for k in ("healthy", "troubled", "dead")],
                    "localhost:9090": [f"127.0.0.1:{prometheus_port}"],
                },
                {"learner": [instances["learner"]], "api": [instances["api"]]},
                DEPLOY / "prometheus" / "rules.yml",
            )
            prometheus = Prometheus(prometheus_binary, promtool, config, tmp, prometheus_port)
            live = {instances[k] for k in ("healthy", "troubled", "learner", "api")}
            prometheus.wait_scraping(live)
            with (
                httpx.Client(base_url=a.url, timeout=30) as http_a,
                httpx.Client(base_url=b.url, timeout=30) as http_b,
            ):
                models = traffic.create_models(http_a)
                traffic.create_models(http_b)
                # from now on the troubled instance cannot write spam's snapshots
                blocked = tmp / "b" / "snapshots" / "spam"
                shutil.rmtree(blocked, ignore_errors=True)
                blocked.write_text("a file where the model's folder goes")

                def troubles():
                    # a snapshot request every round (503s), then flipped labels for about
                    # one metrics window, then silence: the recent accuracy stays down
                    traffic.drive(http_b, 4.0, seed=1, snapshot_every=1, pause=0.1)
                    traffic.drive(http_b, 1.5, seed=1, snapshot_every=1, pause=0.1, flip=True)

                _in_threads(
                    lambda: traffic.drive(http_a, 8.0, pause=0.05),
                    troubles,
                    lambda: _drive_roles(api.url),
                )
            stack = LiveStack(prometheus.client, models, instances)

            # the rules have been evaluated on the new data, and the last scrape is in
            def alerting():
                stack.time = time.time()
                return stack.has_data('ALERTS{alertname="LorentztronAccuracyDrop"}')

            _wait(alerting, 20, "the accuracy-drop alert")
            yield stack
    finally:
        if prometheus is not None:
            prometheus.stop()
        stop_all((api, learner))
        redis_server.stop()


# -- PromQL helpers ------------------------------------------------------------------------
KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "on",
    "ignoring",
    "without",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not functions, labels or keywords)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|on|ignoring|without|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", expr):
        if match.group(1).lower() not in KEYWORDS:
            names.add(match.group(1))
    return names


def exported_metric_names() -> set[str]:
    """Every series name the service's /metrics can show (service/ops/metrics.py), plus the
    ``up`` series Prometheus adds to each target."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    names = {"up"}
    for family in Metrics().registry.collect():
        names.update(family.name + suffix for suffix in suffixes[family.type])
    return names
