"""Real HTTP through uvicorn: a9a learned over the wire, concurrent writers, SIGKILL restarts."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import uvicorn

from benchmarks.servers import ServiceProcess, free_port
from core.averaging import Averaged
from core.calibration import Calibrated
from core.datasets import data_dir, load_svmlight
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.registry import state_digest
from service.config import Settings
from service.main import create_app


class ServerThread:
    """uvicorn serving an app on a loopback port from a background thread."""

    def __init__(self, app):
        self.port = free_port()
        self.app = app
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive()
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)


def svmlight_body(X, y) -> bytes:
    lines = []
    for i in range(X.shape[0]):
        row = X.getrow(i)
        features = " ".join(f"{j + 1}:{v:.17g}" for j, v in zip(row.indices, row.data, strict=True))
        lines.append(f"{int(y[i]):+d} {features}")
    return ("\n".join(lines) + "\n").encode()


def test_a9a_over_http_matches_the_library(tmp_path):
    """One pass over a9a as bulk svmlight feedback, then test predictions as JSON batches:
    the same accuracy as the same model trained in-process (identical, in fact)."""
    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    X_test, y_test = load_svmlight(data_dir() / "a9a" / "a9a.t", n_features=123)
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600)
    spec = {
        "name": "adult",
        "kind": "linear-pa",
        "params": {"mode": "pa1", "C": 0.01},
        "input": {"n_features": 123},
        "averaging": {"interval": 1000},
    }
    with (
        ServerThread(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        assert http.post("/v1/models", json=spec).status_code == 201
        body = svmlight_body(X, y)
        chunks, start = [], 0  # under the body limit, cut at line ends
        while start < len(body):
            stop = min(len(body), start + 4_000_000)
            stop = body.rfind(b"\n", start, stop) + 1 if stop < len(body) else stop
            chunks.append(body[start:stop])
            start = stop
        learned = 0
        for chunk in chunks:
            response = http.post(
                "/v1/models/adult/feedback",
                content=chunk,
                headers={"content-type": "text/x-svmlight"},
            )
            assert response.status_code == 200, response.text
            learned += response.json()["learned"]
        assert learned == X.shape[0]
        labels = []
        for start in range(0, X_test.shape[0], 2000):
            part = X_test[start : start + 2000]
            instances = [
                {"indices": part.getrow(i).indices.tolist(), "values": part.getrow(i).data.tolist()}
                for i in range(part.shape[0])
            ]
            response = http.post(
                "/v1/models/adult/predict?variant=averaged", json={"instances": instances}
            )
            assert response.status_code == 200, response.text
            labels += [p["label"] for p in response.json()["predictions"]]
    reference = Averaged(
        model=Calibrated(model=LinearPA(n_features=123, mode="pa1", C=0.01)), interval=1000
    )
    reference.learn_many(X, y)
    expected = reference.predict_many(X_test, variant="averaged")
    http_accuracy = np.mean(np.array(labels) == y_test)
    assert http_accuracy == pytest.approx(np.mean(expected == y_test), abs=1e-12)
    assert http_accuracy > 0.83  # a9a: linear models reach ~0.84-0.85


def test_concurrent_feedback_is_some_sequential_order(tmp_path):
    """Many threads send feedback at once; the result equals replaying the requests in the
    order of the versions the server acknowledged (no lost or interleaved update)."""
    rng = np.random.default_rng(0)
    n_threads, per_thread, batch = 8, 12, 3
    X = rng.standard_normal((n_threads * per_thread * batch, 6))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600)
    app = create_app(settings)
    spec = {
        "name": "m",
        "kind": "dos",
        "params": {"rank": 3, "seed": 4},
        "input": {"n_features": 6},
        "averaging": {"interval": 7},
    }
    acknowledged: list[tuple[int, int]] = []

    def worker(thread: int):
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for k in range(per_thread):
                start = (thread * per_thread + k) * batch
                body = {
                    "examples": [
                        {"x": X[i].tolist(), "label": int(y[i])}
                        for i in range(start, start + batch)
                    ]
                }
                response = http.post("/v1/models/m/feedback", json=body)
                assert response.status_code == 200, response.text
                acknowledged.append((response.json()["version"], start))

    with ServerThread(app) as server:
        assert httpx.post(f"{server.url}/v1/models", json=spec).status_code == 201
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(worker, range(n_threads)))
        live = app.state.components.models.get("m")
        served = state_digest(live.estimator.get_state())
        assert live.champion.counters.examples_learned == X.shape[0]
    versions = sorted(v for v, _ in acknowledged)
    assert versions == list(range(1, n_threads * per_thread + 1))
    reference = Averaged(
        model=Calibrated(model=DoSClassifier(n_features=6, rank=3, seed=4)), interval=7
    )
    for _, start in sorted(acknowledged):
        reference.learn_many(X[start : start + batch], y[start : start + batch])
    assert state_digest(reference.get_state()) == served


@pytest.mark.parametrize("store", ["local", "redis"])
def test_snapshot_kill_restart_gives_identical_predictions(tmp_path, store, request):
    env = {"LORENTZTRON_SNAPSHOT_INTERVAL": "3600"}
    if store == "redis":
        server = request.getfixturevalue("redis_server")
        env["LORENTZTRON_REDIS_URL"] = server.url
    else:
        env["LORENTZTRON_SNAPSHOT_DIR"] = str(tmp_path / "snapshots")
    instances = {"instances": [{"x": [0.5, -1.0, 2.0, 0.0]}, {"features": {"a": 1.0}}]}
    service = ServiceProcess(env)
    url = service.start().url
    try:
        spec = {
            "name": "m",
            "kind": "dos",
            "params": {"rank": 2},
            "input": {"n_features": 4},
            "averaging": {"interval": 3},
        }
        assert httpx.post(f"{url}/v1/models", json=spec).status_code == 201
        rng = np.random.default_rng(1)
        examples = [
            {"x": rng.standard_normal(4).tolist(), "label": int(rng.choice([-1, 1]))}
            for _ in range(20)
        ]
        assert (
            httpx.post(f"{url}/v1/models/m/feedback", json={"examples": examples}).status_code
            == 200
        )
        assert httpx.post(f"{url}/v1/models/m/snapshots").status_code == 201
        before = {
            v: httpx.post(f"{url}/v1/models/m/predict?variant={v}", json=instances).json()
            for v in ("live", "averaged")
        }
    finally:
        service.kill()
    url = service.start().url
    try:
        after = {
            v: httpx.post(f"{url}/v1/models/m/predict?variant={v}", json=instances).json()
            for v in ("live", "averaged")
        }
    finally:
        service.stop()
    for variant in ("live", "averaged"):
        assert after[variant]["version"] == before[variant]["version"] == 1
        assert [p["score"] for p in after[variant]["predictions"]] == [
            p["score"] for p in before[variant]["predictions"]
        ]


@pytest.mark.parametrize("store", ["local", "redis"])
def test_a_restart_continues_the_models_story(tmp_path, store, request):
    """Counters, progressive metrics (cumulative and recent) and the creation time survive
    a SIGTERM (final snapshot) and a SIGKILL (snapshot + log replay) alike; only the count
    of predictions made since the last snapshot is lost to a SIGKILL."""
    env = {"LORENTZTRON_SNAPSHOT_INTERVAL": "3600", "LORENTZTRON_METRICS_WINDOW": "25"}
    if store == "redis":
        env["LORENTZTRON_REDIS_URL"] = request.getfixturevalue("redis_server").url
    else:
        env["LORENTZTRON_SNAPSHOT_DIR"] = str(tmp_path / "snapshots")
    service = ServiceProcess(env).start()
    spec = {"name": "m", "kind": "dos", "params": {"rank": 2}, "input": {"n_features": 4}}
    rng = np.random.default_rng(2)
    story = ("examples_learned", "aggressive_updates", "metrics", "created_at", "version")
    try:
        assert httpx.post(f"{service.url}/v1/models", json=spec).status_code == 201
        for _ in range(4):
            examples = [
                {"x": rng.standard_normal(4).tolist(), "label": int(rng.choice([-1, 1]))}
                for _ in range(15)
            ]
            answer = httpx.post(f"{service.url}/v1/models/m/feedback", json={"examples": examples})
            assert answer.status_code == 200
        httpx.post(f"{service.url}/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3, 4]}]})
        before = httpx.get(f"{service.url}/v1/models/m").json()
        assert before["examples_learned"] == 60 and before["metrics"]["recent_examples"] == 25
        service.stop()  # SIGTERM: the final snapshot holds everything
        service.start()
        after = httpx.get(f"{service.url}/v1/models/m").json()
        assert {k: after[k] for k in (*story, "predictions")} == {
            k: before[k] for k in (*story, "predictions")
        }
        more = [{"x": rng.standard_normal(4).tolist(), "label": 1} for _ in range(5)]
        assert httpx.post(f"{service.url}/v1/models/m/feedback", json={"examples": more}).is_success
        before = httpx.get(f"{service.url}/v1/models/m").json()
        service.kill()  # SIGKILL: the snapshot, then the log replayed after it
        service.start()
        after = httpx.get(f"{service.url}/v1/models/m").json()
        assert {k: after[k] for k in story} == {k: before[k] for k in story}
        assert after["examples_learned"] == 65
    finally:
        service.stop()
