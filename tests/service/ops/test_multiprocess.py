"""``/metrics`` of ``serve --workers N``: every process's values, merged per role
(``service.ops.multiprocess``). Three processes are played in this one by giving
prometheus-client's file-backed values three process ids (live ones: the process metrics
are read from ``/proc``)."""

from __future__ import annotations

import os
import time

from prometheus_client import generate_latest, values
from prometheus_client.parser import text_string_to_metric_families

from service.ops import multiprocess
from service.ops.metrics import Metrics


def as_process(monkeypatch, root, role: str, pid: int) -> Metrics:
    """Metrics whose values (and label children made from now on) are process ``pid``'s."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(root / role))
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: pid))
    return Metrics()


def samples(text: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_every_process_reaches_the_scrape_labelled_by_role(monkeypatch, tmp_path):
    for role in multiprocess.ROLES:
        (tmp_path / role).mkdir()
    for pid, requests, version, pending in ((os.getpid(), 2, 4, 3), (os.getppid(), 3, 5, 4)):
        metrics = as_process(monkeypatch, tmp_path, "api", pid)
        for _ in range(requests):
            metrics.request_done("/v1/models/{name}/predict", "POST", 200, 0.001)
        metrics.model_version.labels("m").set(version)
        metrics.pending.set(pending)
    metrics.model_version.labels("deleted").set(9)  # a series a file keeps after removal
    metrics.snapshot_time.labels("m").set(time.time())  # an api process's first snapshot
    learner = as_process(monkeypatch, tmp_path, "learner", 1)
    learner.model_version.labels("m").set(6)
    learner.snapshot_time.labels("m").set(time.time() - 10)
    learner.snapshot_age.labels("m").set_function(lambda: -1.0)  # a function: not in files

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "api"))
    assert multiprocess.enabled()
    text = generate_latest(multiprocess.registry({"m"}, metrics.build_info)).decode()
    found = samples(text)
    predict = (("endpoint", "/v1/models/{name}/predict"), ("method", "POST"))
    assert (
        found["lorentztron_http_requests_total", (*predict, ("process", "api"), ("status", "200"))]
        == 5
    )
    assert (
        found["lorentztron_http_request_duration_seconds_count", (*predict, ("process", "api"))]
        == 5
    )
    version = "lorentztron_model_version"
    assert found[version, (("model", "m"), ("process", "api"))] == 4  # what every api serves
    assert found[version, (("model", "m"), ("process", "learner"))] == 6
    assert not [key for key in found if ("model", "deleted") in key[1]]
    assert found["lorentztron_pending_predictions", (("process", "api"),)] == 7  # summed
    age = found["lorentztron_snapshot_age_seconds", (("model", "m"), ("process", "learner"))]
    assert 10 <= age < 60
    assert not [k for k in found if k[0] == "lorentztron_snapshot_age_seconds" and
                ("process", "api") in k[1]]  # fmt: skip
    intervals = [k for k in found if k[0] == "lorentztron_snapshot_interval_seconds"]
    assert intervals == [("lorentztron_snapshot_interval_seconds", ())]  # one, as in rules.yml
    pids = {dict(k[1])["pid"] for k in found if k[0] == "process_resident_memory_bytes"}
    assert pids == {str(os.getpid()), str(os.getppid()), "1"}
    assert ("lorentztron_build_info", ()) not in found  # (it has labels: the versions)
    assert any(k[0] == "lorentztron_build_info" for k in found)


def test_per_model_series_are_bounded_and_summed_over_every_model(monkeypatch, tmp_path):
    """Under ``serve --workers N`` the per-model series live in the processes' files: a
    scrape shows those of the models ``Metrics.exported`` chose, and the counters and
    histograms summed over every model (``lorentztron_models_*``), as one process does."""
    (tmp_path / "api").mkdir()
    for pid in (os.getpid(), os.getppid()):
        metrics = as_process(monkeypatch, tmp_path, "api", pid)
        for name in ("busy", "quiet", "idle"):
            metrics.predictions.labels(name).inc(10 if name == "busy" else 1)
        metrics.freshness.labels("busy").observe(0.3)
    assert metrics.predictions.value("busy") == 10  # this process's own count
    shown = {"busy"}
    registry = multiprocess.registry(shown, metrics.build_info, metrics.aggregated())
    found = samples(generate_latest(registry).decode())
    api = ("process", "api")
    predictions = {k: v for k, v in found.items() if k[0] == "lorentztron_predictions_total"}
    assert predictions == {("lorentztron_predictions_total", (("model", "busy"), api)): 20}
    assert found["lorentztron_models_predictions_total", (api,)] == 24  # every model's
    assert found["lorentztron_models_freshness_seconds_count", (api,)] == 2
    assert "lorentztron_models_model_version" not in {k[0] for k in found}  # (a gauge)
