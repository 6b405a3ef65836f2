"""service/ops/metrics.py: what the alert rules read that is not a measurement."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from service.config import Settings
from service.main import create_app
from service.ops.metrics import Metrics
from tests.service.conftest import TestClient, create


def test_the_configured_snapshot_interval_is_exported(tmp_path):
    """``LorentztronSnapshotStale`` compares a snapshot's age with 3 of the process's own
    intervals: the app exports the interval it was configured with; a bare Metrics, the
    setting's default."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=7.5)
    registry = create_app(settings).state.metrics.registry
    assert registry.get_sample_value("lorentztron_snapshot_interval_seconds") == 7.5
    default = Settings.model_fields["snapshot_interval"].default
    assert Metrics().registry.get_sample_value("lorentztron_snapshot_interval_seconds") == default


def shown_models(text: str) -> dict[str, set[str]]:
    """The models each per-model family of a scrape shows."""
    shown = {}
    for family in text_string_to_metric_families(text):
        models = {sample.labels["model"] for sample in family.samples if "model" in sample.labels}
        if models:
            shown[family.name] = models
    return shown


def value(text: str, name: str) -> float:
    [sample] = [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]
    return sample.value


def test_a_scrape_shows_the_named_and_busiest_models_and_aggregates_every_model(tmp_path):
    """Per-model series for ``metrics_models`` and the ``metrics_top_n`` busiest only, in
    every family; the ``lorentztron_models_*`` aggregates count every model, and a deleted
    model's counts stay in them (a counter never decreases)."""
    settings = Settings(
        snapshot_dir=tmp_path / "snapshots",
        snapshot_interval=3600,
        metrics_top_n=2,
        metrics_models=["m03"],
    )
    with TestClient(create_app(settings)) as client:
        learned = 0
        for i in range(12):
            create(client, f"m{i:02d}", kind="linear-pa", n_features=3, params={})
            examples = [{"x": [1.0, float(k), -1.0], "label": 1} for k in range(i + 1)]
            response = client.post(f"/v1/models/m{i:02d}/feedback", json={"examples": examples})
            assert response.status_code == 200
            learned += i + 1
        client.post("/v1/models/m01/predict", json={"instances": [{"x": [1.0, 0.0, 0.0]}] * 20})
        text = client.get("/metrics").text
        shown = shown_models(text)
        assert shown["lorentztron_model_version"] == {"m03", "m01", "m11"}
        assert all(models <= {"m03", "m01", "m11"} for models in shown.values()), shown
        assert len(shown) > 20  # (every per-model family is bounded, not just one)
        assert value(text, "lorentztron_metrics_exported_models") == 3
        assert value(text, "lorentztron_models_feedback_examples_total") == learned
        assert value(text, "lorentztron_models_predictions_total") == 20
        assert value(text, "lorentztron_models_log_unsnapshotted_records") == 12
        assert value(text, "lorentztron_models_snapshot_duration_seconds_count") == 12
        assert client.delete("/v1/models/m11").status_code == 204
        text = client.get("/metrics").text
        assert shown_models(text)["lorentztron_model_version"] == {"m03", "m01", "m10"}
        assert value(text, "lorentztron_models_feedback_examples_total") == learned
        assert value(text, "lorentztron_models") == 11


def test_the_models_shown_are_the_named_the_stale_then_the_busiest():
    metrics = Metrics(top_n=2, models=frozenset({"named"}))
    for name, n in (("a", 5), ("b", 9), ("c", 1)):
        metrics.learned(name, n, 0)
    names = ["named", "a", "b", "c", "idle"]
    assert metrics.choose(names) == {"named", "b", "a"}
    assert metrics.choose(names, stale=frozenset({"idle"})) == {"named", "idle", "b"}
    assert metrics.choose(["a", "b"]) == {"a", "b"}  # (at most top_n: every model)
