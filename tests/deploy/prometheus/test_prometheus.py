"""deploy/prometheus: the config and rules pass promtool, every alert passes its unit tests,
and against a real Prometheus scraping real services every rule evaluates, the recording
rules return data and the problems staged by the live stack raise their alerts."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import yaml

from tests.deploy.conftest import (
    DEPLOY,
    ROLES_JOB,
    ROOT,
    SERVICE_JOB,
    exported_metric_names,
    metric_names,
)

CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES = DEPLOY / "prometheus" / "rules.yml"
UNIT_TESTS = Path(__file__).with_name("rules_test.yml")


def rules(kind: str) -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if kind in rule]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_promtool_checks_config_and_rules(promtool):
    config = run(promtool, "check", "config", str(CONFIG))
    assert config.returncode == 0, config.stdout + config.stderr
    checked = run(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules('record')) + len(rules('alert'))} rules found" in checked.stdout


def test_alert_unit_tests(promtool):
    result = run(promtool, "test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_unit_tested_firing():
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    assert fired == {rule["alert"] for rule in rules("alert")}


def test_rules_read_only_metrics_the_service_exports():
    known = exported_metric_names() | {rule["record"] for rule in rules("record")}
    for rule in rules("record") + rules("alert"):
        unknown = metric_names(rule["expr"]) - known
        assert not unknown, f"{rule.get('alert') or rule['record']}: {unknown}"
    for rule in rules("alert"):
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]


def test_every_alert_says_what_to_do_in_a_runbook_section():
    """Each alert has a description and a ``runbook`` annotation naming its own section of
    docs/runbook.md (a heading whose GitHub anchor is the alert's name in lower case)."""
    runbook = ROOT / "docs" / "runbook.md"
    anchors = {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in runbook.read_text().splitlines()
        if line.startswith("## ")
    }
    for rule in rules("alert"):
        annotations = rule["annotations"]
        assert annotations.get("description", "").strip(), rule["alert"]
        assert annotations["runbook"] == f"docs/runbook.md#{rule['alert'].lower()}"
        assert rule["alert"].lower() in anchors, rule["alert"]


def test_recording_rules_return_data(live_stack):
    for rule in rules("record"):
        assert live_stack.has_data(rule["expr"]), rule["record"]
        assert live_stack.has_data(rule["record"]), rule["record"]  # recorded by Prometheus


def test_every_rule_evaluates_without_error(live_stack):
    for rule in rules("alert"):
        live_stack.query(rule["expr"])  # parses and evaluates (data only while it fires)
    groups = live_stack.prometheus.get("/api/v1/rules").json()["data"]["groups"]
    evaluated = {r.get("name"): r for group in groups for r in group["rules"]}
    names = {rule.get("alert") or rule["record"] for rule in rules("alert") + rules("record")}
    assert set(evaluated) == names
    for name, rule in evaluated.items():
        assert rule["health"] == "ok", (name, rule.get("lastError"))


def test_staged_problems_raise_their_alerts(live_stack):
    active = live_stack.prometheus.get("/api/v1/alerts").json()["data"]["alerts"]
    by_name: dict[str, list[dict]] = {}
    for alert in active:
        by_name.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    troubled = live_stack.instances["troubled"]
    # a target that does not answer
    assert live_stack.instances["dead"] in {a["instance"] for a in by_name["LorentztronDown"]}
    # the troubled instance cannot snapshot `spam`; the healthy one snapshots everything
    failing = {(a["instance"], a["model"]) for a in by_name["LorentztronSnapshotFailures"]}
    assert failing == {(troubled, "spam")}
    # its 503s on snapshot requests are more than 1% of the job's answers
    assert [a["job"] for a in by_name["LorentztronHighErrorRate"]] == [SERVICE_JOB]
    # it learned flipped labels: its accuracy fell, the healthy instance's did not
    dropped = {(a["instance"], a["model"]) for a in by_name["LorentztronAccuracyDrop"]}
    assert (troubled, "spam") in dropped
    assert all(instance == troubled for instance, _ in dropped)
    # it cannot snapshot `spam` while spam learns: stale once 3 of its (short) snapshot
    # intervals have passed for a minute, which a slow start of the stack may not reach
    stale = {(a["instance"], a["model"]) for a in by_name.get("LorentztronSnapshotStale", [])}
    assert stale <= {(troubled, "spam")}
    # nothing else is wrong (latency depends on how busy the machine is)
    optional = {"LorentztronHighPredictLatency", "LorentztronSnapshotStale"}
    assert set(by_name) - optional == {
        "LorentztronDown",
        "LorentztronSnapshotFailures",
        "LorentztronHighErrorRate",
        "LorentztronAccuracyDrop",
    }


def test_roles_deployment_is_scraped_by_role_and_compared_across_processes(live_stack):
    up = live_stack.query(f'up{{job="{ROLES_JOB}"}}')
    assert {(u["metric"]["role"], u["value"][1]) for u in up} == {("learner", "1"), ("api", "1")}
    behind = live_stack.query(f'lorentztron:model_version:behind_newest{{job="{ROLES_JOB}"}}')
    compared = {(b["metric"]["role"], b["metric"]["model"]) for b in behind}
    assert compared == {(role, m) for role in ("learner", "api") for m in live_stack.models}
    # the replica measured how fresh what it serves is (speed is not asserted here)
    p99 = live_stack.query(
        f"histogram_quantile(0.99, sum by (le) (rate(lorentztron_freshness_seconds_bucket"
        f'{{job="{ROLES_JOB}"}}[1m])))'
    )
    assert p99 and math.isfinite(float(p99[0]["value"][1]))
