import numpy as np
import pytest

from tests.service.conftest import create


@pytest.fixture(params=[True, False], ids=["fast_path", "fastapi_routes"])
def settings(settings, request):
    """Every test here runs with the fast path of service.fastpath and without it."""
    return settings.model_copy(update={"fast_path": request.param})


def test_live_and_averaged_variants(client):
    create(client, averaging={"interval": 5}, params={"rank": 2, "seed": 0})
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    client.post(
        "/v1/models/m/feedback",
        json={
            "examples": [
                {"x": x.tolist(), "label": int(label)} for x, label in zip(X, y, strict=True)
            ]
        },
    )
    live = client.app.state.components.models.get("m").estimator
    body = {"instances": [{"x": x.tolist()} for x in X[:4]]}
    for variant in ("live", "averaged"):
        response = client.post(f"/v1/models/m/predict?variant={variant}", json=body).json()
        assert response["variant"] == variant and response["version"] == 1
        scores = [p["score"] for p in response["predictions"]]
        np.testing.assert_array_equal(scores, live.score_many(X[:4], variant=variant))
        assert [p["label"] for p in response["predictions"]] == [1 if s > 0 else -1 for s in scores]
        assert all(p["probability"] is None for p in response["predictions"])
    bad = client.post("/v1/models/m/predict?variant=best", json=body)
    assert bad.status_code == 422


def test_predict_errors(client):
    create(client, n_features=3)
    for body, text in (
        ({"instances": []}, "instances"),
        ({"instances": [{"x": [1, 2]}]}, "length 2"),
        ({"instances": [{"indices": [9], "values": [1.0]}]}, "out of range"),
        ({"instances": [{}]}, "exactly one"),
        ({}, "instances"),
    ):
        response = client.post("/v1/models/m/predict", json=body)
        assert response.status_code == 422, body
        assert text in response.json()["error"]["message"], response.json()
    assert (
        client.post("/v1/models/none/predict", json={"instances": [{"x": [1]}]}).status_code == 404
    )


def test_named_features_on_hashed_input(client):
    response = client.post(
        "/v1/models",
        json={
            "name": "h",
            "kind": "linear-pa",
            "input": {"hashed": 1 << 18},
            "classes": ["ham", "spam"],
        },
    )
    assert response.status_code == 201
    example = {"features": {"sender": "bob", "links": 3, "caps": True}}
    client.post("/v1/models/h/feedback", json={"examples": [{**example, "label": "spam"}]})
    prediction = client.post("/v1/models/h/predict", json={"instances": [example]}).json()
    assert prediction["predictions"][0]["label"] == "spam"
    assert prediction["predictions"][0]["score"] > 0
