"""PQR models through the service: probabilities and log loss, regression and RMSE."""

import numpy as np
import pytest

from core.pqr import PQR
from core.registry import state_digest
from service.main import create_app
from tests.service.conftest import TestClient


def test_binary_pqr_has_probabilities_and_log_loss(client):
    spec = {
        "name": "ctr",
        "kind": "pqr",
        "input": {"n_features": 5},
        "params": {"k": 2, "separation": [0, 1], "alpha": 0.5},
        "classes": ["no", "yes"],
    }
    assert client.post("/v1/models", json=spec).status_code == 201
    rng = np.random.default_rng(0)
    X = (rng.random((30, 5)) < 0.4).astype(float)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    examples = [
        {"x": x.tolist(), "label": "yes" if t > 0 else "no"} for x, t in zip(X, y, strict=True)
    ]
    response = client.post("/v1/models/ctr/feedback", json={"examples": examples})
    assert response.status_code == 200, response.text
    reference = PQR(n_features=5, k=2, separation=[0, 1], alpha=0.5)
    steps = reference.learn_many(X, y)
    served = client.app.state.components.models.get("ctr").estimator
    assert state_digest(served.get_state()) == state_digest(reference.get_state())
    info = client.get("/v1/models/ctr").json()
    assert info["averaging"] is None and info["metrics"]["loss_kind"] == "log"
    assert info["metrics"]["loss"] == pytest.approx(np.mean(steps.losses))
    predicted = client.post("/v1/models/ctr/predict", json={"instances": [{"x": X[0].tolist()}]})
    prediction = predicted.json()["predictions"][0]
    assert prediction["probability"] == pytest.approx(reference.predict_proba_one(X[0]))
    assert prediction["label"] == ("yes" if prediction["probability"] > 0.5 else "no")
    averaged = client.post(
        "/v1/models/ctr/predict?variant=averaged", json={"instances": [{"x": X[0].tolist()}]}
    )
    assert averaged.status_code == 422
    assert averaged.json()["error"]["code"] == "no_averaged_variant"
    assert "lorentztron_progressive_loss" in client.get("/metrics").text


def test_regression_pqr_reports_rmse(client):
    spec = {
        "name": "rating",
        "kind": "pqr",
        "input": {"n_features": 4},
        "params": {"k": 2, "task": "regression", "separation": [0, 1]},
    }
    assert client.post("/v1/models", json=spec).status_code == 201
    body = "3.5 1:1 2:1\n1 3:1\n4.25 1:1 4:2\n"
    response = client.post(
        "/v1/models/rating/feedback",
        content=body.encode(),
        headers={"content-type": "text/x-svmlight"},
    )
    assert response.status_code == 200, response.text
    response = client.post(
        "/v1/models/rating/feedback", json={"examples": [{"x": [1, 0, 1, 0], "label": 2.0}]}
    )
    assert response.status_code == 200
    result = response.json()["results"][0]
    assert isinstance(result["predicted"], float) and result["loss"] >= 0
    info = client.get("/v1/models/rating").json()
    assert info["task"] == "regression" and info["classes"] == []
    assert info["metrics"]["rmse"] > 0 and info["metrics"]["accuracy"] is None
    prediction = client.post(
        "/v1/models/rating/predict", json={"instances": [{"x": [1, 1, 0, 0]}]}
    ).json()["predictions"][0]
    assert prediction["label"] == prediction["score"] and prediction["probability"] is None
    bad = client.post(
        "/v1/models/rating/feedback", json={"examples": [{"x": [1, 0, 1, 0], "label": "high"}]}
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_label"
    assert "lorentztron_progressive_rmse" in client.get("/metrics").text


@pytest.mark.parametrize(
    "extra,text",
    [
        ({"params": {"task": "regression"}, "classes": [0, 1]}, "no classes"),
        ({"averaging": {"interval": 10}}, "cannot be time-averaged"),
        ({"params": {"k": -1}}, "k"),
    ],
)
def test_invalid_pqr_specs(client, extra, text):
    body = {"name": "p", "kind": "pqr", "input": {"n_features": 4}, **extra}
    response = client.post("/v1/models", json=body)
    assert response.status_code == 422 and text in response.json()["error"]["message"]


def test_pqr_snapshot_restart(settings):
    spec = {"name": "p", "kind": "pqr", "input": {"n_features": 4}, "params": {"k": 2, "warmup": 2}}
    instance = {"instances": [{"x": [1, 1, 0, 1]}]}
    with TestClient(create_app(settings)) as client:
        client.post("/v1/models", json=spec)
        client.post(
            "/v1/models/p/feedback",
            json={
                "examples": [
                    {"x": [1, 1, 0, 1], "label": 1},
                    {"x": [0, 1, 1, 0], "label": -1},
                    {"x": [1, 0, 0, 1], "label": 1},
                ]
            },
        )
        before = client.post("/v1/models/p/predict", json=instance).json()["predictions"]
    with TestClient(create_app(settings)) as client:
        after = client.post("/v1/models/p/predict", json=instance).json()["predictions"]
    assert after[0]["score"] == before[0]["score"]
