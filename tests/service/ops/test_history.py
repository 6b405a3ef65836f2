import math
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.ops.history import History, bucket_quantile
from service.ops.metrics import LATENCY_BUCKETS, Metrics
from tests.service.conftest import create


def naive_quantile(q, bounds, counts):
    """Prometheus' histogram_quantile written out: find the bucket holding rank q * total,
    then interpolate linearly between its lower and upper bounds."""
    total = counts[-1]
    if total == 0:
        return None
    rank = q * total
    edges = [0.0, *bounds]
    cumulative = [0.0, *counts]
    bucket = next(i for i in range(1, len(edges)) if cumulative[i] >= rank)
    if math.isinf(edges[bucket]):
        return edges[bucket - 1] if bucket > 1 else None
    lower, upper = edges[bucket - 1], edges[bucket]
    inside = cumulative[bucket] - cumulative[bucket - 1]
    return lower + (upper - lower) * (rank - cumulative[bucket - 1]) / inside


def test_bucket_quantile_matches_the_prometheus_rule():
    rng = np.random.default_rng(0)
    bounds = [*LATENCY_BUCKETS, math.inf]
    for _ in range(200):
        counts = np.cumsum(rng.integers(0, 5, len(bounds))).astype(float).tolist()
        for q in (0.01, 0.5, 0.9, 0.99, 1.0):
            expected = naive_quantile(q, bounds, counts)
            got = bucket_quantile(q, bounds, counts)
            assert (got is None) == (expected is None)
            if expected is not None:
                assert got == pytest.approx(expected)
    assert bucket_quantile(0.5, bounds, [0.0] * len(bounds)) is None
    # everything beyond the last finite bucket: its bound is the best estimate
    assert bucket_quantile(0.99, [1.0, math.inf], [0.0, 3.0]) == 1.0


def test_latency_is_computed_from_histogram_deltas():
    metrics = Metrics()
    history = History(metrics, interval=1.0, span=10.0)
    assert history.sample(now=100.0)["endpoints"] == {}  # the baseline
    for seconds in (0.003, 0.004, 0.02, 0.3):
        metrics.latency.labels("/v1/models/{name}/predict", "POST").observe(seconds)
    metrics.latency.labels("/healthz", "GET").observe(0.001)  # not a model endpoint
    metrics.latency.labels("/v1/models/{name}", "DELETE").observe(0.05)
    endpoints = history.sample(now=102.0)["endpoints"]
    # by method too: GET, PUT and DELETE of /{name} are three lines of the status page
    assert set(endpoints) == {"POST /v1/models/{name}/predict", "DELETE /v1/models/{name}"}
    predict = endpoints["POST /v1/models/{name}/predict"]
    assert predict["rate"] == pytest.approx(2.0)
    assert predict["mean"] == pytest.approx((0.003 + 0.004 + 0.02 + 0.3) / 4)
    assert 0.002 <= predict["p50"] <= 0.005  # second of four in the 2-5 ms bucket
    assert 0.25 <= predict["p99"] <= 0.5
    # nothing new: a zero rate and no quantiles, not the old ones again
    quiet = history.sample(now=103.0)["endpoints"]["POST /v1/models/{name}/predict"]
    assert quiet == {"rate": 0.0, "p50": None, "p99": None, "mean": None}


def test_ring_buffer_keeps_the_span():
    history = History(Metrics(), interval=1.0, span=5.0)
    for t in range(20):
        history.sample(now=float(t))
    times = [s["t"] for s in history.samples()]
    assert times == [14.0, 15.0, 16.0, 17.0, 18.0, 19.0]
    with pytest.raises(ValueError):
        History(Metrics(), interval=0.0)


def test_lifespan_samples_the_live_models(settings):
    app = create_app(settings)
    app.state.history = History(app.state.metrics, interval=0.05, span=5.0)
    with TestClient(app) as client:
        create(client, "m")
        response = client.post(
            "/v1/models/m/feedback",
            json={"examples": [{"x": [1.0, 0.0, 0.0], "label": 1}]},
        )
        assert response.status_code == 200
        history = app.state.history
        for _ in range(100):
            samples = history.samples()
            if samples and samples[-1]["models"].get("m", {}).get("version") == 1:
                break
            time.sleep(0.05)
        last = samples[-1]["models"]["m"]
        assert last["version"] == 1 and last["examples"] == 1 and last["loss_kind"] == "hinge"
    assert app.state.history._task is None  # stopped with the app


def test_samples_hold_the_models_a_scrape_shows(settings):
    """With more models than ``metrics_top_n``, a sample holds the models a scrape shows,
    not every model (a sample every 5 s for an hour of 20,000 models would be gigabytes)."""
    app = create_app(settings.model_copy(update={"metrics_top_n": 1}))
    with TestClient(app) as client:
        for name in ("a", "b", "c"):
            create(client, name)
        example = {"examples": [{"x": [1.0, 0.0, 0.0], "label": 1}]}
        assert client.post("/v1/models/b/feedback", json=example).status_code == 200
        history = app.state.history  # (sampling the app's models)
        assert set(history.sample()["models"]) == {"b"}  # the busiest
        client.get("/metrics")
        assert set(history.sample()["models"]) == {"b"}
