"""Multi-output polynomial networks (kind mofm), the ordinal McRank reduction and the
separation thesis's online learners through the service."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from benchmarks.servers import ServiceProcess
from core.mofm import MultiOutputPN
from core.ordinal import OrdinalMcRank
from core.registry import state_digest
from core.separation import EllipsoidPerceptron
from service.config import Settings
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for

CLASSES = ["a", "b", "c"]


def examples(seed: int, n: int = 30):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = [CLASSES[k] for k in np.argmax(X, axis=1)]
    return X, y, [{"x": x.tolist(), "label": t} for x, t in zip(X, y, strict=True)]


def test_mofm_learns_like_the_library_and_predicts_probabilities(client):
    params = {"n_basis": 4, "learning_rate": 0.2, "seed": 3}
    create(client, kind="mofm", classes=CLASSES, params=params)
    X, y, body = examples(0)
    response = client.post("/v1/models/m/feedback", json={"examples": body})
    assert response.status_code == 200, response.text
    reference = MultiOutputPN(n_features=3, classes=CLASSES, **params)
    steps = [reference.learn_one(x, t) for x, t in zip(X, y, strict=True)]
    results = response.json()["results"]
    assert [r["predicted"] for r in results] == [s.predicted for s in steps]
    assert [r["loss"] for r in results] == [s.loss for s in steps]
    served = client.app.state.components.models.get("m").estimator
    assert state_digest(served.get_state()) == state_digest(reference.get_state())
    predicted = client.post("/v1/models/m/predict", json={"instances": [{"x": [2.0, 0, 0]}]})
    prediction = predicted.json()["predictions"][0]
    assert prediction["label"] == reference.predict_one([2.0, 0, 0])
    assert prediction["score"] == reference.score_one([2.0, 0, 0]).tolist()
    assert prediction["probability"] == pytest.approx(reference.predict_proba_one([2.0, 0, 0]))
    info = client.get("/v1/models/m").json()
    assert info["multiclass"] is None and info["metrics"]["loss_kind"] == "softmax"
    assert info["metrics"]["accuracy"] is not None


def test_ordinal_mcrank_predicts_the_expected_relevance(client):
    params = {"n_basis": 3, "seed": 1}
    create(client, kind="mofm", multiclass="ordinal", classes=[1, 2, 3, 4], params=params)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 3))
    y = np.clip(np.round(2.5 + X[:, 0]), 1, 4).astype(int)
    body = [{"x": x.tolist(), "label": int(t)} for x, t in zip(X, y, strict=True)]
    assert client.post("/v1/models/m/feedback", json={"examples": body}).status_code == 200
    base = MultiOutputPN(n_features=3, n_outputs=3, loss="logistic", **params)
    reference = OrdinalMcRank(base=base, levels=[1, 2, 3, 4])
    reference.learn_many(X, y)
    query = {"instances": [{"x": [1.0, 0.0, 0.0]}]}
    prediction = client.post("/v1/models/m/predict", json=query).json()["predictions"][0]
    assert prediction["label"] == pytest.approx(reference.predict_one([1.0, 0.0, 0.0]))
    assert prediction["probability"] == pytest.approx(reference.predict_proba_one([1.0, 0.0, 0.0]))
    info = client.get("/v1/models/m").json()
    assert info["task"] == "ordinal" and info["metrics"]["rmse"] > 0
    bad = client.post("/v1/models/m/feedback", json={"examples": [{"x": [0, 0, 0], "label": 5}]})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "unknown_label"


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"kind": "mofm", "params": {"n_basis": 0}}, "n_basis"),
        ({"kind": "mofm", "params": {"bogus": 1}}, "unknown parameter"),
        ({"kind": "mofm", "averaging": {"interval": 5}}, "cannot be time-averaged"),
        ({"kind": "mofm", "params": {"reservoir_policy": "uniform"}}, "window"),
        ({"kind": "mofm", "params": {"reservoir_refit_every": -1}}, "refit_every"),
        ({"kind": "mofm", "multiclass": "ordinal", "classes": ["x", "y"]}, "increasing"),
        ({"kind": "mofm", "multiclass": "ordinal", "classes": [3, 1]}, "increasing"),
        ({"kind": "dos", "multiclass": "ordinal", "classes": [1, 2, 3]}, "multi-output"),
        ({"kind": "ellipsoid-perceptron", "params": {"on_unseparable": "panic"}}, "panic"),
    ],
)
def test_invalid_specs_are_refused(client, spec, message):
    body = {"name": "m", "input": {"n_features": 3}, **spec}
    response = client.post("/v1/models", json=body)
    assert response.status_code == 422, response.text
    assert message in response.json()["error"]["message"]
    assert client.get("/v1/models").json()["models"] == []


def test_refit_on_the_reservoir_is_swapped_in_and_durable(tmp_path):
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=0.2)
    # (a refit only after the third request: with 40, the worker's tick could fall between
    # the second and the third, and the refit be version 3)
    params = {"n_basis": 4, "reservoir_size": 100, "reservoir_refit_every": 90}
    with TestClient(create_app(settings)) as client:
        create(client, kind="mofm", classes=CLASSES, params=params)
        for seed in range(3):
            assert (
                client.post("/v1/models/m/feedback", json={"examples": examples(seed)[2]})
            ).status_code == 200
        wait_for(lambda: client.get("/v1/models/m").json()["status"]["refits"] >= 1)
        info = client.get("/v1/models/m").json()
        # a refit is a new version, written as a snapshot before it is served
        assert info["version"] == 4 and info["last_snapshot_version"] == 4
        assert info["status"]["examples_since_refit"] == 0
        live = client.app.state.components.models.get("m")
        served = live.estimator.get_state()
        window, seen = live.champion.window.data(), live.champion.window.n_seen
    with TestClient(create_app(settings)) as client:
        live = client.app.state.components.models.get("m")
        assert state_digest(live.estimator.get_state()) == state_digest(served)
        # the refit window travels with the snapshot: the next refit sees the same data
        X, y = live.champion.window.data()
        assert live.champion.window.n_seen == seen and y == window[1] and (X != window[0]).nnz == 0


def test_refit_then_sigkill_recovers_identically(tmp_path):
    """A refit (outside the log) is snapshotted; feedback after it is in the log; a SIGKILL
    then loses nothing: same version, bit-identical scores."""
    service = ServiceProcess(
        {
            "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path),
            "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
            "LORENTZTRON_LOG_LEVEL": "warning",
        }
    ).start()
    spec = {
        "name": "m",
        "kind": "mofm",
        "input": {"n_features": 3},
        "classes": CLASSES,
        "params": {"n_basis": 4, "reservoir_size": 60, "reservoir_refit_every": 30},
    }
    query = {"instances": [{"x": [0.5, -1.0, 2.0]}, {"x": [1.0, 1.0, -1.0]}]}
    try:
        assert httpx.post(f"{service.url}/v1/models", json=spec).status_code == 201
        for seed in range(2):
            body = {"examples": examples(seed)[2]}
            assert httpx.post(f"{service.url}/v1/models/m/feedback", json=body).is_success
        wait_for(
            lambda: httpx.get(f"{service.url}/v1/models/m").json()["status"]["refits"] >= 1,
            timeout=30,
        )
        body = {"examples": examples(9, n=7)[2]}  # after the refit: only in the log
        assert httpx.post(f"{service.url}/v1/models/m/feedback", json=body).is_success
        before = httpx.post(f"{service.url}/v1/models/m/predict", json=query).json()
        service.kill()
        service.start()
        after = httpx.post(f"{service.url}/v1/models/m/predict", json=query).json()
    finally:
        service.kill()
    assert after["version"] == before["version"]
    assert [p["score"] for p in after["predictions"]] == [p["score"] for p in before["predictions"]]


def test_separation_learners_expose_their_status(client):
    create(client, kind="ellipsoid-perceptron", params={"rho": 0.01})
    rng = np.random.default_rng(4)
    X = rng.standard_normal((25, 3))
    y = np.where(X[:, 1] > 0, 1, -1)
    body = [{"x": x.tolist(), "label": int(t)} for x, t in zip(X, y, strict=True)]
    response = client.post("/v1/models/m/feedback", json={"examples": body})
    assert response.status_code == 200
    reference = EllipsoidPerceptron(n_features=3, rho=0.01)
    reference.learn_many(X, y)
    status = client.get("/v1/models/m").json()["status"]
    assert status == reference.status()
    live = client.post("/v1/models/m/predict?variant=live", json={"instances": [{"x": [0, 1, 0]}]})
    assert live.json()["predictions"][0]["score"] == reference.score_one([0.0, 1.0, 0.0])
    for kind in ("perceptron", "shor-perceptron"):
        create(client, name=kind, kind=kind, classes=[0, 1, 2])  # one-vs-one
        body = [{"x": x.tolist(), "label": int(t) + 1} for x, t in zip(X, y, strict=True)]
        response = client.post(f"/v1/models/{kind}/feedback", json={"examples": body})
        assert response.status_code == 200, response.text


def test_ellipsoidal_batch_kind_is_fitted_by_the_worker(tmp_path):
    """The ellipsoidal classifier: feedback fills a window, the worker fits the SDP on it,
    the fit is snapshotted before it is served, and it survives a restart."""
    from core.separation import EllipsoidalClassifier

    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=0.2)
    params = {"reservoir_size": 60, "reservoir_refit_every": 40}
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 2))
    y = np.where(np.einsum("ij,ij->i", X, X) < 1.0, 1, -1)  # inside the unit disc
    body = [{"x": x.tolist(), "label": int(t)} for x, t in zip(X, y, strict=True)]
    query = {"instances": [{"x": [0.1, 0.2]}, {"x": [2.0, 2.0]}]}
    with TestClient(create_app(settings)) as client:
        info = create(client, kind="ellipsoidal", params=params, n_features=2)
        assert info["metrics"]["loss_kind"] == "zero_one" and info["status"]["fits"] == 0
        response = client.post("/v1/models/m/feedback", json={"examples": body})
        assert response.status_code == 200
        assert not any(r["aggressive"] for r in response.json()["results"])
        wait_for(lambda: client.get("/v1/models/m").json()["status"]["fits"] >= 1, timeout=60)
        status = client.get("/v1/models/m").json()["status"]
        assert status["fitted_on"] == 40 and status["separable"] and status["t"] > 0.0
        labels = [
            p["label"]
            for p in client.post("/v1/models/m/predict", json=query).json()["predictions"]
        ]
        assert labels == [1, -1]
        scores = client.post("/v1/models/m/predict", json=query).json()["predictions"]
    reference = EllipsoidalClassifier(n_features=2).fit(X, y.astype(float))
    assert [p["score"] for p in scores] == pytest.approx(
        reference.score_many(np.array([[0.1, 0.2], [2.0, 2.0]])).tolist(), rel=1e-6
    )
    with TestClient(create_app(settings)) as client:
        again = client.post("/v1/models/m/predict", json=query).json()["predictions"]
        assert [p["score"] for p in again] == [p["score"] for p in scores]
    bad = {"name": "e", "kind": "ellipsoidal", "input": {"n_features": 2}, "classes": [1, 2, 3]}
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/models", json=bad).status_code == 422
