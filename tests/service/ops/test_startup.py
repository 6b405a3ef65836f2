"""Start-up in the background, over real HTTP (uvicorn): the port answers at once, /healthz
200 and /readyz 503 with what is pending while the kernels compile (and a log line says so);
restored models are served meanwhile; a model request that comes while the models are
still being restored waits for them, or gets 503 ``not_ready`` after ``startup_wait``."""

from __future__ import annotations

import logging
import threading

import httpx

from service import main
from service.config import Settings
from service.main import create_app
from tests.service.conftest import wait_for
from tests.service.test_end_to_end import ServerThread

SPEC = {"name": "m", "kind": "linear-pa", "input": {"n_features": 2}}


def test_the_port_opens_before_the_kernels_are_compiled(tmp_path, monkeypatch, caplog):
    compiled = threading.Event()
    monkeypatch.setattr(main, "warm_up", lambda: compiled.wait(60))
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    caplog.set_level(logging.INFO, logger="lorentztron")
    try:
        with (
            ServerThread(create_app(settings)) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            assert http.get("/healthz").status_code == 200
            ready = http.get("/readyz")
            assert ready.status_code == 503 and "kernels_compiled" in ready.json()["pending"]
            wait_for(lambda: http.get("/readyz").json()["pending"] == ["kernels_compiled"])
            wait_for(lambda: "compiling the kernels" in caplog.text)
            # the models are restored (none here): they are served while the kernels compile
            assert http.post("/v1/models", json=SPEC).status_code == 201
            answer = http.post("/v1/models/m/predict", json={"instances": [{"x": [1.0, 2.0]}]})
            assert answer.status_code == 200
            compiled.set()
            wait_for(lambda: http.get("/readyz").status_code == 200)
            assert "kernels compiled in" in caplog.text
    finally:
        compiled.set()


def test_model_requests_wait_for_the_restore_then_get_not_ready(tmp_path, monkeypatch):
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    with ServerThread(create_app(settings)) as server:
        assert httpx.post(f"{server.url}/v1/models", json=SPEC).status_code == 201
    restored = threading.Event()
    original = main.SnapshotWorker.restore_all

    def slow_restore(worker):
        restored.wait(60)
        original(worker)

    monkeypatch.setattr(main.SnapshotWorker, "restore_all", slow_restore)
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, startup_wait=2)
    try:
        with (
            ServerThread(create_app(settings)) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            assert http.get("/healthz").status_code == 200
            ready = http.get("/readyz").json()
            assert ready["pending"] == ["kernels_compiled", "models_restored"]
            waited = http.get("/v1/models/m")
            assert waited.status_code == 503
            assert waited.json()["error"]["code"] == "not_ready"
            late = {}
            thread = threading.Thread(target=lambda: late.update(r=http.get("/v1/models/m")))
            thread.start()
            restored.set()  # the waiting request is answered once the model is back
            thread.join(timeout=30)
            assert late["r"].status_code == 200 and late["r"].json()["name"] == "m"
    finally:
        restored.set()
