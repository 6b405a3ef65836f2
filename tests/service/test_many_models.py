"""Many small models in one real process (issue 28): the list a page at a time over HTTP, the
per-model series of /metrics bounded with aggregates over every model, and a restart after
SIGKILL that restores the models on first use, each answering as before, bit for bit."""

from __future__ import annotations

import re

import httpx
import numpy as np

from benchmarks.servers import ServiceProcess, free_port

N_MODELS = 24
N_FEATURES = 4


def series(text: str, name: str) -> dict[str, float]:
    """``{labels: value}`` of the samples of ``name`` in a Prometheus text answer."""
    found = {}
    for labels, value in re.findall(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M):
        found[labels] = float(value)
    return found


def test_many_models_paged_bounded_and_restored_lazily(tmp_path):
    env = {
        "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
        "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",  # the feedback stays in the log only
        "LORENTZTRON_MAX_MODELS": str(N_MODELS),
        "LORENTZTRON_METRICS_TOP_N": "3",
        "LORENTZTRON_METRICS_MODELS": "m00",
        "LORENTZTRON_EAGER_RESTORE": "2",
    }
    names = [f"m{i:02d}" for i in range(N_MODELS)]
    rng = np.random.default_rng(5)
    X = rng.standard_normal((8, N_FEATURES)).round(3).tolist()
    rows = {"instances": [{"x": x} for x in X]}
    port = free_port()
    service = ServiceProcess(env, tmp_path / "server.log").start(port=port)
    try:
        client = httpx.Client(base_url=service.url, timeout=30)
        for name in names:
            spec = {"name": name, "kind": "linear-pa", "input": {"n_features": N_FEATURES}}
            assert client.post("/v1/models", json=spec).status_code == 201
        # feedback (logged, not snapshotted) for every third model, more for the busiest
        learned = {}
        for k, name in enumerate(names[::3]):
            examples = [{"x": x, "label": int(rng.choice([-1, 1]))} for x in X[: k + 1]]
            response = client.post(f"/v1/models/{name}/feedback", json={"examples": examples})
            assert response.status_code == 200
            learned[name] = len(examples)
        for _ in range(2):
            assert client.post(f"/v1/models/{names[5]}/predict", json=rows).status_code == 200
        # a keyed request, retried after the restart: answered again, never learned twice
        keyed = {"examples": [{"x": X[0], "label": 1}]}
        key = {"Idempotency-Key": "k-22"}
        first = client.post("/v1/models/m22/feedback", json=keyed, headers=key)
        assert first.status_code == 200
        learned["m22"] = 1

        # -- the list, a page at a time --------------------------------------------------
        pages, after = [], None
        while True:
            params = {"limit": 10, **({"after": after} if after else {})}
            page = client.get("/v1/models", params=params).json()
            pages.append([model["name"] for model in page["models"]])
            after = page["next"]
            if after is None:
                break
        assert [len(page) for page in pages] == [10, 10, 4]
        assert [name for page in pages for name in page] == names
        whole = client.get("/v1/models").json()  # the default page holds all of these
        assert [model["name"] for model in whole["models"]] == names and whole["next"] is None
        assert client.get("/v1/models", params={"limit": 1001}).status_code == 422
        assert client.get("/v1/models", params={"limit": 0}).status_code == 422

        # -- /metrics: per-model series of the named and the busiest; aggregates of all --
        text = client.get("/metrics").text
        shown = {
            re.search(r'model="([^"]+)"', labels).group(1)
            for labels in series(text, "lorentztron_model_version")
        }
        # m00 is named; the busiest: m05 (16 predictions), m21 and m18 (8 and 7 examples)
        assert shown == {"m00", "m05", "m21", "m18"}
        assert series(text, "lorentztron_metrics_exported_models") == {"": 4.0}
        for metric in ("lorentztron_feedback_examples_total", "lorentztron_predictions_total"):
            assert {
                re.search(r'model="([^"]+)"', labels).group(1) for labels in series(text, metric)
            } <= shown
        assert series(text, "lorentztron_models_feedback_examples_total") == {
            "": float(sum(learned.values()))
        }
        assert series(text, "lorentztron_models_predictions_total") == {"": 16.0}
        assert series(text, "lorentztron_models") == {"": float(N_MODELS)}
        assert series(text, "lorentztron_models_log_unsnapshotted_records") == {
            "": float(len(learned))
        }

        before = {
            name: client.post(f"/v1/models/{name}/predict", json=rows).json() for name in names
        }
        infos = {model["name"]: model for model in whole["models"]}

        # -- SIGKILL, then a restart that restores 2 models and the others on first use ---
        service.kill()
        service.start(port=port)
        text = client.get("/metrics").text
        assert series(text, "lorentztron_models") == {"": float(N_MODELS)}
        assert len(series(text, "lorentztron_model_version")) == 2  # m00 and m01 restored
        # a dormant model's name is taken and its limit counted; deleted, it is gone
        spec = {"name": "extra", "kind": "linear-pa", "input": {"n_features": N_FEATURES}}
        assert client.post("/v1/models", json=spec).json()["error"]["code"] == "too_many_models"
        taken = {**spec, "name": "m23"}
        assert client.post("/v1/models", json=taken).json()["error"]["code"] == "model_exists"
        assert client.delete("/v1/models/m20").status_code == 204
        assert client.get("/v1/models/m20").status_code == 404
        assert client.post("/v1/models", json=spec).status_code == 201
        # m22 is dormant: the retry of its keyed request is its first use
        again = client.post("/v1/models/m22/feedback", json=keyed, headers=key)
        assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
        assert again.json() == first.json()
        assert client.get("/v1/models/m22").json()["examples_learned"] == 1
        for name in names:
            if name == "m20":
                continue
            after = client.post(f"/v1/models/{name}/predict", json=rows).json()
            scores = [(p["label"], p["score"]) for p in after["predictions"]]
            assert scores == [(p["label"], p["score"]) for p in before[name]["predictions"]]
            info = client.get(f"/v1/models/{name}").json()
            assert info["version"] == infos[name]["version"] == (1 if name in learned else 0)
            assert info["examples_learned"] == learned.get(name, 0)
    finally:
        service.stop()
