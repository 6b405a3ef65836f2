import numpy as np
import pytest

from tests.service.conftest import create


@pytest.fixture(params=[True, False], ids=["fast_path", "fastapi_routes"])
def settings(settings, request):
    """Every test here runs with the fast path of service.http.fastpath and without it."""
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
        probabilities = [p["probability"] for p in response["predictions"]]
        scorer = live.scorer(variant)
        np.testing.assert_array_equal(probabilities, scorer.proba_from_scores(np.array(scores)))
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


@pytest.mark.parametrize("kind", ["linear-pa", "dos", "perceptron", "shor-perceptron"])
@pytest.mark.parametrize(
    "classes,multiclass", [(None, "ovo"), ([0, 1, 2], "ovo"), ([0, 1, 2], "ovr")]
)
def test_margin_kinds_give_calibrated_probabilities(client, kind, classes, multiclass):
    """Platt scaling fitted online on the progressive scores: a probability per binary
    prediction (increasing with the score), one per class (summing to 1) for reductions."""
    extra = {"multiclass": multiclass} | ({"classes": classes} if classes else {})
    info = create(client, kind=kind, n_features=3, params={}, **extra)
    assert info["calibration"] == "platt"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    labels = classes or [-1, 1]
    y = [labels[int(x[0] > 0) + (int(x[1] > 0.5) if classes else 0)] for x in X]
    examples = [{"x": x.tolist(), "label": t} for x, t in zip(X, y, strict=True)]
    assert client.post("/v1/models/m/feedback", json={"examples": examples}).status_code == 200
    for variant in ("live", "averaged"):
        answer = client.post(
            f"/v1/models/m/predict?variant={variant}",
            json={"instances": [{"x": x.tolist()} for x in X[:50]]},
        ).json()["predictions"]
        p = np.array([a["probability"] for a in answer], dtype=float)
        assert np.all((p >= 0) & (p <= 1))
        if classes:
            assert p.shape == (50, 3) and np.allclose(p.sum(axis=1), 1.0)
            truth = [labels.index(t) for t in y[:50]]
            assert np.mean(p[np.arange(50), truth]) > 0.4  # above 1/3: informative
        else:
            scores = np.array([a["score"] for a in answer])
            order = np.argsort(scores)
            assert np.all(np.diff(p[order]) >= -1e-12)  # monotone in the score


def test_calibration_none_and_kinds_without_margins(client):
    info = create(client, kind="dos", calibration="none")
    assert info["calibration"] == "none"
    answer = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]}).json()
    assert answer["predictions"][0]["probability"] is None
    refused = client.post(
        "/v1/models",
        json={"name": "p", "kind": "pqr", "input": {"n_features": 3}, "calibration": "platt"},
    )
    assert refused.status_code == 422 and "calibration" in refused.json()["error"]["message"]
