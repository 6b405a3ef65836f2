"""A live monitoring stack for the deploy tests: two real services (uvicorn on loopback) and a
real Prometheus with the project's scrape config and rules, its targets rewritten to the
test ports, after realistic traffic.

Instance ``healthy`` snapshots every second. Instance ``troubled`` cannot write the
snapshots of model ``spam`` once it is created (a file then stands where its folder goes),
so its snapshot requests fail with 503; its models are then fed flipped labels over a
short metrics window (an accuracy drop). A third target never answers. So some alerts
really fire, and every series the dashboard plots exists.
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

from service.config import Settings
from service.history import History
from service.main import create_app
from service.metrics import Metrics
from tests.service import traffic
from tests.service.conftest import free_port
from tests.service.test_end_to_end import ServerThread
from tests.system import require_program

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCRAPE_INTERVAL = "1s"
#: what Grafana's $__rate_interval stands for here: many scrape intervals, and the whole
#: traffic even when the machine is slow
RATE_INTERVAL = "1m"
SERVICE_JOB = "lorentztron"


@pytest.fixture(scope="session")
def promtool() -> str:
    require_program("prometheus", "prometheus")
    return require_program("promtool", "prometheus")


def rewrite_config(config: dict, targets: dict[str, list[str]], rule_file: Path) -> dict:
    """The project's config for a test: fast scrapes, absolute rule paths, and every static
    target replaced by the test addresses of the same name; jobs discovered by DNS (the
    roles profile) are left out, since their names only exist in Docker's network."""
    config = dict(config)
    config["global"] = {
        **config.get("global", {}),
        "scrape_interval": SCRAPE_INTERVAL,
        "scrape_timeout": SCRAPE_INTERVAL,
        "evaluation_interval": SCRAPE_INTERVAL,
    }
    config["rule_files"] = [str(rule_file)]
    jobs = []
    for job in config["scrape_configs"]:
        if "static_configs" not in job:
            continue
        job = dict(job)
        job["static_configs"] = [
            {**group, "targets": [t for target in group["targets"] for t in targets[target]]}
            for group in job["static_configs"]
        ]
        jobs.append(job)
    config["scrape_configs"] = jobs
    return config


@dataclass
class LiveStack:
    prometheus: httpx.Client
    models: list[str]
    instances: dict[str, str]
    dead: str
    #: queries are evaluated at this moment, right after the traffic
    time: float

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


@pytest.fixture(scope="session")
def live_stack(tmp_path_factory, promtool):
    prometheus_binary = require_program("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("stack")
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
    with ServerThread(healthy) as a, ServerThread(troubled) as b:
        prometheus_port = free_port()
        dead = f"127.0.0.1:{free_port()}"  # nothing listens there
        instances = {"healthy": f"127.0.0.1:{a.port}", "troubled": f"127.0.0.1:{b.port}"}
        original = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
        config = rewrite_config(
            original,
            {
                "lorentztron:8000": [instances["healthy"], instances["troubled"], dead],
                "localhost:9090": [f"127.0.0.1:{prometheus_port}"],
            },
            DEPLOY / "prometheus" / "rules.yml",
        )
        config_file = tmp / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        check = subprocess.run(
            [promtool, "check", "config", str(config_file)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
        log = (tmp / "prometheus.log").open("w")
        process = subprocess.Popen(
            [
                prometheus_binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        prometheus = httpx.Client(base_url=f"http://127.0.0.1:{prometheus_port}", timeout=10)
        try:

            def ready():
                try:
                    return prometheus.get("/-/ready").status_code == 200
                except httpx.HTTPError:
                    assert process.poll() is None, (tmp / "prometheus.log").read_text()
                    return False

            _wait(ready, 30, "Prometheus to start")

            def scraping():  # targets are picked up a few seconds after start
                targets = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
                up = {t["labels"]["instance"] for t in targets if t["health"] == "up"}
                return set(instances.values()) <= up

            _wait(scraping, 30, "the first scrapes")
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
                # the healthy instance takes most of the traffic; the troubled one is asked
                # for a snapshot every round (503s) and then learns flipped labels
                background = threading.Thread(
                    target=traffic.drive, args=(http_a, 8.0), kwargs={"pause": 0.05}
                )
                background.start()
                traffic.drive(http_b, 4.0, seed=1, snapshot_every=1, pause=0.1)
                # about one metrics window of the flipped concept, then silence: the
                # recent accuracy stays down
                traffic.drive(http_b, 1.5, seed=1, snapshot_every=1, pause=0.1, flip=True)
                background.join()
            stack = LiveStack(prometheus, models, instances, dead, time.time())

            # the rules have been evaluated on the new data, and the last scrape is in
            def alerting():
                stack.time = time.time()
                return stack.has_data('ALERTS{alertname="LorentztronAccuracyDrop"}')

            _wait(alerting, 20, "the accuracy-drop alert")
            yield stack
        finally:
            prometheus.close()
            process.terminate()
            process.wait(timeout=30)
            log.close()


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
    """Every series name the service's /metrics can show (service/metrics.py), plus the
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
