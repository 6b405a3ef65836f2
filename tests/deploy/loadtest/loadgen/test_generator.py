"""The loops of the load generator against a real server: every mode runs and reports a
summary of the documented shape; an existing model is driven with its own inputs and labels,
with keys; what the generator creates it deletes."""

from __future__ import annotations

import httpx
import pytest

from deploy.loadtest.loadgen.generator import run
from service.config import Settings
from service.main import create_app
from tests.deploy.loadtest.loadgen.summaries import (
    LATENCY_KEYS,
    check_summary,
    no_loadgen_models,
    small,
)
from tests.service.test_end_to_end import ServerThread


def test_predict_open_loop(server_url):
    config = small(server_url, mode="predict", rate=40.0, duration=1.0)
    summary = run(config)
    check_summary(summary, config)
    assert summary["target_rate"] == 40.0
    assert summary["requests"] == 40  # the fixed schedule: rate x duration
    assert set(summary["send_lag_ms"]) == LATENCY_KEYS
    assert set(summary["operations"]) == {"predict"}


def test_feedback_closed_loop(server_url):
    config = small(server_url, mode="feedback")
    summary = run(config)
    check_summary(summary, config)
    assert summary["send_lag_ms"] is None
    assert summary["examples_learned"] == summary["ok"]


def test_mixed_answers_predictions_by_id(server_url):
    config = small(server_url, mode="mixed", feedback_fraction=0.3)
    summary = run(config)
    check_summary(summary, config)
    assert set(summary["operations"]) == {"predict", "feedback"}
    assert summary["feedback_by_prediction_id"] > 0
    assert summary["examples_learned"] == summary["operations"]["feedback"]["ok"]
    assert no_loadgen_models(server_url)


@pytest.fixture(scope="module")
def keyed_url(tmp_path_factory):
    """A service that needs keys, with an existing three-class model of 64 inputs."""
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("keyed"),
        snapshot_interval=3600,
        write_keys=["w"],
        read_keys=["r"],
    )
    with ServerThread(create_app(settings)) as server:
        spec = {
            "name": "spam",
            "kind": "linear-pa",
            "input": {"n_features": 64},
            "classes": ["ham", "spam", "eggs"],
        }
        created = httpx.post(
            f"{server.url}/v1/models", json=spec, headers={"Authorization": "Bearer w"}
        )
        assert created.status_code == 201, created.text
        yield server.url


def test_keys_and_an_existing_model_with_its_own_classes(keyed_url):
    with pytest.raises(RuntimeError, match="unauthorized"):
        run(small(keyed_url, mode="predict", model="spam"))
    for mode in ("mixed", "bulk"):
        config = small(keyed_url, mode=mode, model="spam", key="w", duration=0.5)
        summary = run(config)
        assert summary["errors"] == 0, summary["error_kinds"]
        assert summary["model"]["name"] == "spam" and summary["model"]["kind"] == "linear-pa"
        assert summary["model"]["n_features"] == 64  # read from the service, not --n-features
    info = httpx.get(f"{keyed_url}/v1/models/spam", headers={"Authorization": "Bearer r"}).json()
    assert info["examples_learned"] > 0 and info["metrics"]["accuracy"] is not None
    predict_only = small(keyed_url, mode="predict", model="spam", key="r", duration=0.3)
    assert run(predict_only)["errors"] == 0  # a read key is enough to predict
