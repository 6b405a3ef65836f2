"""Realistic traffic against a running service, for the tests that look at what it reports
(the status page, Prometheus and the dashboard): a few models of every kind of metric, and
a bounded loop of predictions, feedback (by features and by prediction id), unknown ids and
snapshots."""

from __future__ import annotations

import time

import httpx
import numpy as np

#: name -> creation body: a hinge-loss classifier, a log-loss classifier, a regressor
MODELS = {
    "spam": {"kind": "dos", "params": {"rank": 2, "mode": "pa1", "C": 0.1}},
    "churn": {"kind": "pqr", "params": {"k": 2}},
    "demand": {"kind": "pqr", "params": {"k": 2, "task": "regression"}},
}
N_FEATURES = 4


def create_models(http: httpx.Client) -> list[str]:
    for name, body in MODELS.items():
        response = http.post(
            "/v1/models", json={"name": name, "input": {"n_features": N_FEATURES}, **body}
        )
        assert response.status_code == 201, response.text
    return list(MODELS)


def drive(
    http: httpx.Client,
    seconds: float,
    seed: int = 0,
    snapshot_every: int = 10,
    pause: float = 0.02,
    flip: bool = False,
) -> int:
    """Send traffic for ``seconds`` (bounded: stops by itself); returns the request count.
    ``flip`` negates the concept (labels and targets): a sudden drift."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(N_FEATURES) * (-1 if flip else 1)
    deadline = time.monotonic() + seconds
    sent = rounds = 0
    while time.monotonic() < deadline:
        rounds += 1
        X = rng.standard_normal((4, N_FEATURES))
        labels = np.where(X @ w > 0, 1, -1).tolist()
        for name in MODELS:
            instances = [{"x": row.tolist()} for row in X]
            response = http.post(f"/v1/models/{name}/predict", json={"instances": instances})
            assert response.status_code == 200, response.text
            ids = [p["prediction_id"] for p in response.json()["predictions"]]
            regression = MODELS[name]["params"].get("task") == "regression"
            targets = (X @ w).tolist() if regression else labels
            examples = [
                {"prediction_id": i, "label": y} for i, y in zip(ids[:2], targets[:2], strict=True)
            ]
            examples += [
                {"x": row.tolist(), "label": y} for row, y in zip(X[2:], targets[2:], strict=True)
            ]
            response = http.post(f"/v1/models/{name}/feedback", json={"examples": examples})
            assert response.status_code == 200, response.text
            sent += 2
        if rounds % snapshot_every == 0:
            # an unknown prediction id (a 422 and a counted miss) and a snapshot
            response = http.post(
                "/v1/models/spam/feedback",
                json={"examples": [{"prediction_id": "0" * 32, "label": 1}]},
            )
            assert response.status_code == 422, response.text
            http.post("/v1/models/spam/snapshots")
            sent += 2
        time.sleep(pause)
    return sent
