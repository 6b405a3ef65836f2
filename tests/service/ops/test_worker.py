"""The worker against a real Redis that goes away and comes back."""

import numpy as np
import pytest

from service.config import Settings
from service.durability.redis_store import RedisStore
from service.durability.store import decode
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for


@pytest.mark.parametrize("feedback_log", [False, True])
def test_redis_outage_keeps_serving_and_snapshots_resume(redis_server, tmp_path, feedback_log):
    """Without the feedback log, feedback goes on during a Redis outage (only snapshots
    wait); with it (Redis holds the log), feedback is refused with 503 and nothing is
    learned, because it could not be made durable. Predictions go on in both cases."""
    settings = Settings(
        redis_url=redis_server.url,
        snapshot_interval=0.5,
        redis_prefix="t",
        feedback_log=feedback_log,
    )
    example = {"examples": [{"x": [1.0, 0.5, -1.0], "label": 1}]}
    instance = {"instances": [{"x": [1.0, 0.5, -1.0]}]}
    with TestClient(create_app(settings)) as client:
        create(client)
        assert client.post("/v1/models/m/feedback", json=example).status_code == 200
        store = RedisStore(redis_server.url, prefix="t")
        wait_for(lambda: [m.version for m in store.versions("m")] == [0, 1])
        store.close()

        redis_server.stop()
        prediction = client.post("/v1/models/m/predict", json=instance)
        assert prediction.status_code == 200
        by_id = {
            "examples": [{"prediction_id": prediction.json()["predictions"][0]["prediction_id"]}]
        }
        by_id["examples"][0]["label"] = 1
        if feedback_log:
            # the first append of the outage fails; a Redis append whose reply is lost may
            # have landed (and would be learned from the log), so its id stays consumed
            assert client.post("/v1/models/m/feedback", json=by_id).status_code == 503
        response = client.post("/v1/models/m/feedback", json=example)
        if feedback_log:
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "log_unavailable"
            assert client.get("/v1/models/m").json()["version"] == 1  # nothing learned
        else:
            assert response.status_code == 200 and response.json()["version"] == 2
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["snapshot_store"] is False
        assert client.post("/v1/models/m/snapshots").status_code == 503
        wait_for(
            lambda: 'lorentztron_snapshot_failures_total{model="m"}' in client.get("/metrics").text
        )
        metrics = client.get("/metrics").text
        assert "lorentztron_snapshot_store_up 0.0" in metrics
        if feedback_log:
            assert 'lorentztron_log_append_failures_total{model="m"} 2.0' in metrics

        redis_server.start()  # same port, empty database
        if feedback_log:
            wait_for(lambda: client.get("/readyz").status_code == 200)
            response = client.post("/v1/models/m/feedback", json=example)
            assert response.status_code == 200 and response.json()["version"] == 2
            again = client.post("/v1/models/m/feedback", json=by_id)
            assert again.json()["error"]["code"] == "unknown_prediction_id"
        store = RedisStore(redis_server.url, prefix="t")
        wait_for(lambda: [m.version for m in store.versions("m")][-1:] == [2])
        header, state = decode(store.load("m"))
        live = client.app.state.components.models.get("m").estimator.get_state()
        assert all(np.array_equal(state["arrays"][k], live["arrays"][k]) for k in live["arrays"])
        wait_for(lambda: client.get("/readyz").status_code == 200)
        store.close()


def test_readiness_checks_the_feedback_log_too(tmp_path):
    """A log directory that cannot be written makes /readyz fail, as a store would."""
    (tmp_path / "blocked").write_text("a file where the log directory should be")
    settings = Settings(snapshot_dir=tmp_path / "snapshots", log_dir=tmp_path / "blocked")
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["snapshot_store"] is False
        assert "blocked" in ready.json()["store_error"]


def test_an_early_snapshot_waits_for_records_and_for_a_models_worth_of_log(tmp_path):
    """``log_full``: a model's log since its last snapshot must pass
    ``log_snapshot_records`` records and ``log_snapshot_ratio`` times the model's size in
    bytes; a snapshot counts both down by what it covered."""
    settings = Settings(
        snapshot_dir=tmp_path,
        snapshot_interval=3600,
        log_snapshot_records=3,
        log_snapshot_ratio=1.0,
    )
    with TestClient(create_app(settings)) as client:
        create(client, n_features=40, params={"rank": 2})  # 2 x 40 x 2 floats, ~1.3 KB
        components = client.app.state.components
        worker, live = components.worker, components.models.get("m")
        size = 8 * live.plan.floats
        example = {"examples": [{"x": [1.0] * 40, "label": 1}]}
        for _ in range(3):
            assert client.post("/v1/models/m/feedback", json=example).status_code == 200
        record = live.record.log_bytes_since_snapshot / 3
        assert live.record.records_since_snapshot == 3 and record > 40 * 16  # (indices and values)
        assert live.record.log_bytes_since_snapshot < size and not worker.log_full()
        while live.record.log_bytes_since_snapshot < size:
            assert not worker.log_full()
            assert client.post("/v1/models/m/feedback", json=example).status_code == 200
        assert worker.log_full()
        worker.snapshot_due()
        assert live.record.records_since_snapshot == live.record.log_bytes_since_snapshot == 0
        assert not worker.log_full()
        worker.settings = settings.model_copy(update={"log_snapshot_ratio": 0.0})
        for _ in range(3):
            assert client.post("/v1/models/m/feedback", json=example).status_code == 200
        assert worker.log_full()  # records alone
