import numpy as np

from service.main import create_app
from tests.service.conftest import TestClient, create


def learn(client, seed, n=10):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    body = {"examples": [{"x": x.tolist(), "label": int(1 if x[0] > 0 else -1)} for x in X]}
    assert client.post("/v1/models/m/feedback", json=body).status_code == 200


def predict(client, name="m"):
    body = {"instances": [{"x": [0.3, -1.0, 2.0]}, {"x": [1.0, 1.0, 1.0]}]}
    response = client.post(f"/v1/models/{name}/predict?variant=averaged", json=body).json()
    return [p["score"] for p in response["predictions"]]


def test_snapshot_list_restore(client):
    create(client, averaging={"interval": 4})
    learn(client, 0)
    first = client.post("/v1/models/m/snapshots")
    assert first.status_code == 201 and first.json()["version"] == 1
    scores_v1 = predict(client)
    learn(client, 1)
    assert predict(client) != scores_v1
    client.post("/v1/models/m/snapshots")
    listed = client.get("/v1/models/m/snapshots").json()["snapshots"]
    assert [s["version"] for s in listed] == [0, 1, 2]  # 0: written at creation
    assert all(s["size_bytes"] > 0 for s in listed)
    restored = client.post("/v1/models/m/snapshots/1/restore")
    assert restored.status_code == 200 and restored.json()["version"] == 3
    assert predict(client) == scores_v1
    missing = client.post("/v1/models/m/snapshots/99/restore")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "snapshot_not_found"


def test_a_snapshot_has_one_created_at_in_its_answer_and_in_the_listing(client):
    """The POST's answer reports the instant stored with the snapshot (the listing read
    one taken a few milliseconds earlier, at encoding, than the answer's)."""
    create(client)
    learn(client, 0)
    taken = client.post("/v1/models/m/snapshots").json()
    listed = client.get("/v1/models/m/snapshots").json()["snapshots"]
    assert [s for s in listed if s["version"] == taken["version"]] == [taken]


def test_retention_keeps_the_last_versions(tmp_path):
    from service.config import Settings

    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600, snapshot_retention=2)
    with TestClient(create_app(settings)) as client:
        create(client)
        for seed in range(4):
            learn(client, seed, n=2)
            client.post("/v1/models/m/snapshots")
        versions = [s["version"] for s in client.get("/v1/models/m/snapshots").json()["snapshots"]]
        assert versions == [3, 4]


def test_restart_restores_every_model_identically(settings):
    with TestClient(create_app(settings)) as client:
        create(client, averaging={"interval": 3})
        create(client, name="multi", classes=[0, 1, 2], kind="linear-pa")
        learn(client, 0)
        client.post(
            "/v1/models/multi/feedback",
            json={
                "examples": [
                    {"x": [1, 0, 0], "label": 0},
                    {"x": [0, 1, 0], "label": 1},
                    {"x": [0, 0, 1], "label": 2},
                ]
            },
        )
        before = predict(client), predict(client, "multi")
        info = client.get("/v1/models/m").json()
    # shutdown wrote a final snapshot; a new process restores it
    with TestClient(create_app(settings)) as client:
        assert predict(client) == before[0] and predict(client, "multi") == before[1]
        restored = client.get("/v1/models/m").json()
        assert restored["version"] == info["version"]
        assert restored["last_snapshot_version"] == info["version"]
        assert client.get("/v1/models/multi").json()["classes"] == [0, 1, 2]
    # deleting removes the snapshots too: nothing comes back
    with TestClient(create_app(settings)) as client:
        assert client.delete("/v1/models/m").status_code == 204
    with TestClient(create_app(settings)) as client:
        assert [m["name"] for m in client.get("/v1/models").json()["models"]] == ["multi"]
