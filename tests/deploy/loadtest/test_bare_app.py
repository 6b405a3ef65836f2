"""The service benchmarks' bare FastAPI baseline: it answers the service's requests with
same-shaped answers, validates the same bodies, and runs under the service's uvicorn settings
and process set-up."""

from __future__ import annotations

import uvicorn
from fastapi.testclient import TestClient

from deploy.loadtest import bare_app
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.workload import Workload
from service.config import Settings
from service.main import create_app
from service.ops import cli


def shape(value):
    """The keys of an answer, recursively (lists by their first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_the_bare_app_answers_the_load_in_the_services_shape(tmp_path):
    workload = Workload(LoadConfig(pool=4, n_features=1024, rank=4))
    spec = workload.model_spec("m")
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600)
    json_type = {"content-type": "application/json"}
    with TestClient(bare_app.create_app()) as bare, TestClient(create_app(settings)) as service:
        assert bare.get("/readyz").status_code == 200
        for client in (bare, service):
            assert client.post("/v1/models", json=spec).status_code == 201
        answers = {}
        for client in (bare, service):
            predict = client.post(
                "/v1/models/m/predict?variant=live",
                content=workload.predict_bodies[0],
                headers=json_type,
            )
            feedback = client.post(
                "/v1/models/m/feedback", content=workload.feedback_bodies[1], headers=json_type
            )
            assert predict.status_code == feedback.status_code == 200
            answers[client] = (predict.json(), feedback.json())
        bare_predict, bare_feedback = answers[bare]
        service_predict, service_feedback = answers[service]
        assert set(bare_predict) == set(service_predict)
        assert set(bare_predict["predictions"][0]) == set(service_predict["predictions"][0])
        assert set(service_feedback) - set(bare_feedback) <= {"logged"}  # (None: left out)
        assert shape(bare_feedback["results"]) == shape(service_feedback["results"])
        # the body is validated: what the service refuses for its shape, the bare app too
        for client in (bare, service):
            assert client.post("/v1/models/m/predict", json={"instances": "no"}).status_code == 422
            bad = {"examples": [{"indices": ["a"], "values": [1.0], "label": 1}]}
            assert client.post("/v1/models/m/feedback", json=bad).status_code == 422
            assert client.delete("/v1/models/m").status_code == 204


def test_the_bare_app_runs_under_the_services_uvicorn_settings(monkeypatch):
    runs = []
    monkeypatch.setattr(uvicorn, "run", lambda target, **options: runs.append((target, options)))
    prepared = []  # (the set-up of the server process, not of this test process)
    monkeypatch.setattr(cli, "configure_process", lambda settings: prepared.append(settings))
    cli.main(["serve", "--port", "8123"])
    bare_app.main(["--port", "8123"])
    assert len(prepared) == 2 and prepared[0] == prepared[1]
    (service_target, service_options), (bare_target, bare_options) = runs
    assert service_target == "service.main:create_app"
    assert bare_target == "deploy.loadtest.bare_app:create_app"
    assert bare_options == service_options == cli.uvicorn_options(Settings(), None, 8123)
    assert service_options["factory"] and service_options["access_log"] is False
