"""deploy/grafana: the provisioning files and the overview dashboard are consistent with each
other and with docker-compose.yml, and every query of the dashboard (its variables
substituted as Grafana would) returns data from a real Prometheus scraping real services."""

from __future__ import annotations

import json
import re
import subprocess

import yaml

from service.ops.metrics import Metrics
from tests.deploy.conftest import (
    DEPLOY,
    RATE_INTERVAL,
    ROLES_JOB,
    ROOT,
    SERVICE_JOB,
    exported_metric_names,
    metric_names,
)

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "overview.json"
DATASOURCES = GRAFANA / "provisioning" / "datasources" / "prometheus.yml"
PROVIDERS = GRAFANA / "provisioning" / "dashboards" / "lorentztron.yml"
#: the parts of the dashboard the issue asks for, by the metric that carries each
REQUIRED_METRICS = {
    "lorentztron_http_requests_total",  # request and error rates
    "lorentztron_http_request_duration_seconds_bucket",  # p50 / p95 / p99
    "lorentztron_predictions_total",
    "lorentztron_feedback_examples_total",
    "lorentztron_updates_total",  # aggressive-update share
    "lorentztron_progressive_accuracy_ratio",
    "lorentztron_progressive_loss",
    "lorentztron_progressive_rmse",
    "lorentztron_parameter_norm",
    "lorentztron_pending_predictions",
    "lorentztron_prediction_ids_expired_total",
    "lorentztron_snapshot_age_seconds",
    "lorentztron_snapshot_duration_seconds_bucket",
    "lorentztron_snapshot_failures_total",
    "lorentztron_freshness_seconds_bucket",  # the roles profile
    "lorentztron_log_unsnapshotted_records",
    # a model's members and drift (issue 27)
    "lorentztron_member_progressive_accuracy_ratio",
    "lorentztron_member_progressive_loss",
    "lorentztron_member_error_difference",
    "lorentztron_member_verdict",
    "lorentztron_member_serving",
    "lorentztron_promotions_total",
    "lorentztron_drift_detections_total",
    "lorentztron_learning_paused",
    "lorentztron_learning_backlog_records",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "lorentztron_event_loop_lag_seconds_bucket",
    "lorentztron_event_loop_stalls_total",
    "lorentztron_gc_seconds_bucket",
}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict) -> list[dict]:
    found = []
    for panel in board["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # collapsed rows hold their panels
    return [panel for panel in found if panel["type"] != "row"]


def variables(board: dict) -> dict[str, dict]:
    return {variable["name"]: variable for variable in board["templating"]["list"]}


def substitute(expr: str, models: list[str]) -> str:
    """What Grafana sends for the test's selection: every job (the all-in-one service and
    the roles deployment), the test's models."""
    values = {
        "job": f"{SERVICE_JOB}|{ROLES_JOB}",
        "model": "|".join(models),
        "__rate_interval": RATE_INTERVAL,
        "__interval": "1s",
        "__range": "1m",
    }
    expr = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], expr)
    assert "$" not in expr
    return expr


def row_panels(board: dict, title: str) -> list[dict]:
    """The panels under the row of this title (rows are not collapsed: the panels that
    follow it, up to the next row)."""
    found, inside = [], False
    for panel in board["panels"]:
        if panel["type"] == "row":
            inside = panel["title"] == title
        elif inside:
            found.append(panel)
    return found


def provisioned_uid() -> str:
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    return source["uid"]


def test_dashboard_structure():
    """Every query goes to the ``datasource`` variable (the provisioned Prometheus by
    default, any other one selectable), and every panel says what it shows."""
    board = dashboard()
    assert board["title"] == "lorentztron / overview"
    source = variables(board)["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    assert source["current"]["value"] == provisioned_uid()
    uid = "${datasource}"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        assert panel["datasource"]["uid"] == uid, panel["title"]
        assert panel.get("description", "").strip(), f"{panel['title']} has no description"
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"]["uid"] == uid, panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    for name, variable in variables(board).items():
        if name != "datasource":
            assert variable["datasource"]["uid"] == uid
    assert "lorentztron-prometheus" not in DASHBOARD.read_text().replace(
        json.dumps(source["current"]["value"]), ""
    )


def test_stat_panels_have_explicit_thresholds():
    """Grafana's default (green, red from 80) fits none of them: a share of 5xx answers
    turns orange at 0.1% and red at 1% (the alert), no instance up is red."""
    stats = {p["title"]: p for p in panels(dashboard()) if p["type"] == "stat"}
    for title, panel in stats.items():
        thresholds = panel["fieldConfig"]["defaults"]["thresholds"]
        assert thresholds["mode"] == "absolute" and thresholds["steps"][0]["value"] is None, title
    steps = stats["5xx share"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["color"], s["value"]) for s in steps] == [
        ("green", None),
        ("orange", 0.001),
        ("red", 0.01),
    ]
    steps = stats["Instances up"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["color"], s["value"]) for s in steps] == [("red", None), ("green", 1)]


def test_latency_panel_leaves_out_probes_and_scrapes():
    (panel,) = [p for p in panels(dashboard()) if p["title"].startswith("Latency")]
    for target in panel["targets"]:
        assert 'endpoint!~"/metrics|/healthz|/readyz"' in target["expr"]


def test_quantile_panels_plot_the_quantiles_they_name():
    """A panel whose title names quantiles (``p50 and p99``, ``p50 / p95 / p99``) plots
    exactly those, each by histogram_quantile and labelled by its quantile (the snapshot
    duration panel once plotted p95 and the mean under "p50 and p99")."""
    titled = {p["title"]: p for p in panels(dashboard()) if re.search(r"\bp\d+\b", p["title"])}
    assert "Snapshot duration (p50 and p99)" in titled
    for title, panel in titled.items():
        named = sorted(int(q) for q in re.findall(r"\bp(\d+)\b", title))
        plotted = []
        for target in panel["targets"]:
            (q,) = re.findall(r"histogram_quantile\((0\.\d+),", target["expr"])
            assert target["legendFormat"].startswith(f"p{q[2:]:0<2} "), (title, target)
            plotted.append(round(float(q) * 100))
        assert sorted(plotted) == named, title


def test_per_second_panels_have_a_rate_unit():
    """Examples and predictions per second are rates: Grafana's records/sec (``recps``, shown
    as rec/s: an example or a scored instance is a record), not the bare ``short``."""
    rates = {
        p["title"]: p["fieldConfig"]["defaults"]["unit"]
        for p in panels(dashboard())
        if any(
            name in t["expr"]
            for t in p["targets"]
            for name in ("lorentztron_feedback_examples_total", "lorentztron_predictions_total")
        )
    }
    assert rates == {
        "Feedback examples / s": "recps",
        "Predictions per second": "recps",
        "Feedback examples per second": "recps",
    }


def test_model_variable_lists_a_per_model_metric():
    model = variables(dashboard())["model"]
    assert model["type"] == "query" and model["multi"] and model["includeAll"]
    metric = re.fullmatch(r"label_values\((\w+)(\{[^}]*\})?, model\)", model["query"])
    assert metric, model["query"]
    per_model = {family.name for family in Metrics().model_families}
    assert metric.group(1) in per_model
    # every per-model panel follows the selection
    for panel in panels(dashboard()):
        for target in panel["targets"]:
            if "lorentztron_model_version" in target["expr"] or "model=~" in target["expr"]:
                assert 'model=~"$model"' in target["expr"], panel["title"]


def test_dashboard_covers_the_service_and_reads_only_what_it_exports():
    used = set()
    for panel in panels(dashboard()):
        for target in panel["targets"]:
            used |= metric_names(target["expr"])
    assert used <= exported_metric_names(), used - exported_metric_names()
    assert REQUIRED_METRICS <= used, REQUIRED_METRICS - used


MEMBERS_ROW = "Members and drift ($model)"


def test_members_row_plots_every_member_and_variant_in_its_unit():
    """The row of issue 27: each member variant's recent accuracy (a ratio) and its paired
    error difference with what serves, the verdicts and what serves, promotions and drift
    detections, the pause and its backlog; every per-member series is told apart by member
    and variant."""
    board = dashboard()
    row = {panel["title"]: panel for panel in row_panels(board, MEMBERS_ROW)}
    assert len(row) == 8, list(row)

    def the(metric: str) -> dict:
        (panel,) = [p for p in row.values() if any(metric in t["expr"] for t in p["targets"])]
        return panel

    def unit(panel: dict) -> str:
        return panel["fieldConfig"]["defaults"]["unit"]

    accuracy = the("lorentztron_member_progressive_accuracy_ratio")
    assert unit(accuracy) == "percentunit" and "recent window" in accuracy["title"]
    assert all('window="recent"' in t["expr"] for t in accuracy["targets"])
    assert unit(the("lorentztron_member_progressive_loss")) == "short"
    difference = the("lorentztron_member_error_difference")
    assert unit(difference) == "short"  # error rates, or squared errors of a regression
    steps = difference["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 0]  # the zero line
    for metric in (
        "lorentztron_member_progressive_accuracy_ratio",
        "lorentztron_member_progressive_loss",
        "lorentztron_member_error_difference",
        "lorentztron_member_verdict",
        "lorentztron_member_serving",
    ):
        for target in the(metric)["targets"]:
            assert "{{member}}/{{variant}}" in target["legendFormat"], metric
            assert "{{model}}" in target["legendFormat"], metric
    for metric in ("lorentztron_learning_paused", "lorentztron_learning_backlog_records"):
        assert unit(the(metric)) == "short"
        assert "{{model}}" in the(metric)["targets"][0]["legendFormat"]
    counts = the("lorentztron_promotions_total")
    assert counts is the("lorentztron_drift_detections_total") and counts["type"] == "stat"
    for target in counts["targets"]:  # one number over the dashboard's range
        assert "[$__range]" in target["expr"] and target["instant"], target["expr"]
    assert unit(counts) == "short" and counts["fieldConfig"]["defaults"]["decimals"] == 0


def value_mapping(panel: dict) -> dict[int, str]:
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    assert mapping["type"] == "value"
    return {int(value): shown["text"] for value, shown in mapping["options"].items()}


def test_state_panels_name_the_values_the_service_exports():
    """The verdict gauge is 1 better, -1 worse, 0 undecided (service/ops/metrics.py), the
    serving and paused gauges 1 or 0: the state timelines show those words."""
    board = dashboard()
    timelines = {
        metric: panel
        for panel in row_panels(board, MEMBERS_ROW)
        if panel["type"] == "state-timeline"
        for metric in metric_names(panel["targets"][0]["expr"])
    }
    assert value_mapping(timelines["lorentztron_member_verdict"]) == {
        1: "better",
        0: "undecided",
        -1: "worse",
    }
    assert "1 better, -1 worse, 0 undecided" in Metrics().member_verdict.documentation
    # only what serves is plotted (== 1), one bar per member and variant while it serves
    assert timelines["lorentztron_member_serving"]["targets"][0]["expr"].endswith("== 1")
    assert value_mapping(timelines["lorentztron_member_serving"]) == {1: "serves"}
    assert value_mapping(timelines["lorentztron_learning_paused"]) == {
        0: "learning",
        1: "paused",
    }


def test_counts_over_the_range_include_a_counters_first_increment(promtool, tmp_path):
    """A model's promotion and drift-detection counters are created by their first
    increment, which increase() does not see: the stat counts such a counter whole, counts
    only the range's increase of an older one, and shows 0 for a model without any (the
    queries evaluated by promtool on synthetic series, as Grafana sends them for a 30-min
    range)."""
    (counts,) = [
        p
        for p in row_panels(dashboard(), MEMBERS_ROW)
        if any("lorentztron_promotions_total" in t["expr"] for t in p["targets"])
    ]
    rules = tmp_path / "none.yml"
    rules.write_text("groups: []\n")
    cases = []
    for target in counts["targets"]:
        (counter,) = metric_names(target["expr"]) & {
            "lorentztron_promotions_total",
            "lorentztron_drift_detections_total",
        }
        expr = substitute(target["expr"], ["new", "old", "none"]).replace("[1m]", "[30m]")
        expr = expr.replace("offset 1m", "offset 30m")
        series = {
            # created by its first two increments 40 minutes in, once more at 50
            f'{counter}{{job="lorentztron", instance="a:8000", model="new"}}': "_x40 2x9 3x10",
            # 5 before the range, 2 more within it
            f'{counter}{{job="lorentztron", instance="a:8000", model="old"}}': "5x40 6x9 7x10",
        }
        series |= {
            f'lorentztron_promotion_auto{{job="lorentztron", instance="a:8000", model="{m}"}}': (
                "0x60"
            )
            for m in ("new", "old", "none")
        }
        cases.append(
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": f"round({expr})",
                        "eval_time": "60m",
                        "exp_samples": [
                            {"labels": f'{{job="lorentztron", model="{model}"}}', "value": n}
                            for model, n in (("new", 3), ("old", 2), ("none", 0))
                        ],
                    }
                ],
            }
        )
    tests = tmp_path / "counts_test.yml"
    tests.write_text(yaml.safe_dump({"rule_files": [str(rules)], "tests": cases}))
    result = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioning_matches_the_compose_stack():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    grafana, prometheus = compose["grafana"], compose["prometheus"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/" + DASHBOARD.name
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    published = prometheus["ports"][0].rsplit(":", 1)[1]
    assert source["url"] == f"http://prometheus:{published}"
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())["global"]
    assert source["jsonData"]["timeInterval"] == scrape["scrape_interval"]


def test_every_query_returns_data(live_stack):
    board = dashboard()
    for panel in panels(board):
        for target in panel["targets"]:
            expr = substitute(target["expr"], live_stack.models)
            assert live_stack.has_data(expr), f"{panel['title']}: no data for {expr}"


def test_variables_list_the_test_models(live_stack):
    board = dashboard()
    jobs = {SERVICE_JOB, ROLES_JOB}
    for name, expected in (("job", jobs), ("model", set(live_stack.models))):
        query = substitute(variables(board)[name]["query"], live_stack.models)
        metric, label = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
        response = live_stack.prometheus.get(
            f"/api/v1/label/{label}/values", params={"match[]": metric}
        )
        assert set(response.json()["data"]) == expected
