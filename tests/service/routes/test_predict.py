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


OVERFLOWING = [
    [1e200, 0.0, 0.0, 0.0, 0.0],  # its squared norm overflows
    [1.3e154, 0.0, 0.0, 0.0, 0.0],  # its squared norm does not, the scores do
    [1.3e154, 1.3e154, 1.3e154, 1.3e154, 1.3e154],
]
EVERY_KIND = [
    ("dos", {}),
    ("dos", {"averaging": {"interval": 2}}),
    ("dos", {"classes": ["a", "b", "c"]}),
    ("linear-pa", {}),
    ("pqr", {}),
    ("pqr", {"params": {"task": "regression"}}),
    ("mofm", {"classes": ["a", "b", "c"]}),
    ("mofm", {"classes": [1, 2, 3], "multiclass": "ordinal"}),
    ("perceptron", {}),
    ("ellipsoid-perceptron", {}),
    ("shor-perceptron", {}),
    ("ellipsoidal", {}),
]


@pytest.mark.parametrize(("kind", "extra"), EVERY_KIND)
def test_scores_that_overflow_are_a_422_for_every_kind_and_variant(client, kind, extra):
    """Values whose score overflows float64 are refused with a clear 422, never a 500
    (a JSON body cannot carry inf or NaN), before or after the model has learned."""
    create(client, kind=kind, n_features=5, **extra)
    classes = extra.get("classes", [-1, 1])
    rng = np.random.default_rng(0)
    examples = [
        {"x": rng.standard_normal(5).tolist(), "label": classes[i % len(classes)]} for i in range(6)
    ]
    if extra.get("params", {}).get("task") == "regression":
        examples = [{**e, "label": 0.5} for e in examples]
    variants = ("live", "averaged") if "averaging" in extra else ("live",)
    for learned in (False, True):
        if learned:
            response = client.post("/v1/models/m/feedback", json={"examples": examples})
            assert response.status_code == 200, response.text
        for variant in variants:
            for x in OVERFLOWING:
                response = client.post(
                    f"/v1/models/m/predict?variant={variant}", json={"instances": [{"x": x}]}
                )
                assert response.status_code in (200, 422), response.text
                if x[0] == 1e200:  # refused by every kind: no model can score it
                    assert response.status_code == 422
                if response.status_code == 422:
                    error = response.json()["error"]
                    assert error["code"] == "invalid_input" and "overflow" in error["message"]


def test_strings_and_booleans_are_not_numbers(client):
    create(client, n_features=5)
    for instance in (
        {"x": ["1", "1", "1", "1", "1"]},
        {"x": [True, 1, 1, 1, 1]},
        {"indices": [0], "values": ["1"]},
        {"indices": ["0"], "values": [1.0]},
        {"indices": [True], "values": [1.0]},
    ):
        response = client.post("/v1/models/m/predict", json={"instances": [instance]})
        assert response.status_code == 422, instance
        assert response.json()["error"]["code"] == "invalid_input"
