"""One learner and two api replicas as separate processes on loopback against one Redis:
feedback posted to either replica is logged, learned by the learner and published; both
replicas converge to the learner's version and predict identically to it."""

from __future__ import annotations

import re
import threading

import httpx
import numpy as np
import pytest
import redis

from benchmarks.servers import RedisServer, start_all, stop_all
from service.scale.keys import RedisKeys
from tests.service.conftest import wait_for
from tests.service.server import roles

SPEC = {
    "name": "m",
    "kind": "dos",
    "params": {"rank": 2, "seed": 1},
    "input": {"n_features": 5},
    "averaging": {"interval": 5},
}


def version(url) -> int | None:
    """The model's version served at ``url`` (or by a test client)."""
    get = url.get if hasattr(url, "get") else lambda path: httpx.get(f"{url}{path}", timeout=5)
    response = get("/v1/models/m")
    return response.json()["version"] if response.status_code == 200 else None


def test_two_replicas_converge_to_the_learner(tmp_path):
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    learner, replicas = roles(redis_server.url, tmp_path)
    try:
        start_all((learner, *replicas))
        assert httpx.post(f"{replicas[0].url}/v1/models", json=SPEC).status_code == 201
        wait_for(lambda: version(learner.url) == 0 and version(replicas[1].url) == 0, timeout=30)

        rng = np.random.default_rng(0)
        batches = 0
        for round_ in range(30):
            X = rng.standard_normal((3, 5))
            body = {"examples": [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]}
            url = replicas[round_ % 2].url
            response = httpx.post(f"{url}/v1/models/m/feedback", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["logged"] == 3 and response.json()["learned"] == 0
            batches += 1
        # the learner learns every logged batch once, in log order (one version per batch)
        wait_for(lambda: version(learner.url) == batches, timeout=30)
        # tracing off: a stream entry is the record alone (service.ops.tracing; the latest
        # entry is never trimmed)
        store = redis.Redis.from_url(redis_server.url)
        [(_, fields)] = store.xrevrange(RedisKeys().log("m"), count=1)
        assert set(fields) == {b"r"}
        wait_for(lambda: all(version(r.url) == batches for r in replicas), timeout=30)

        instances = {"instances": [{"x": rng.standard_normal(5).tolist()} for _ in range(4)]}
        for variant in ("live", "averaged"):
            answers = [
                httpx.post(f"{s.url}/v1/models/m/predict?variant={variant}", json=instances).json()[
                    "predictions"
                ]
                for s in (learner, *replicas)
            ]
            scores = [[p["score"] for p in answer] for answer in answers]
            assert scores[0] == scores[1] == scores[2], variant

        # replicas serve, they do not write snapshots
        refused = httpx.post(f"{replicas[0].url}/v1/models/m/snapshots")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "wrong_role"
        for replica in replicas:
            metrics = httpx.get(f"{replica.url}/metrics").text
            count = re.search(r'lorentztron_freshness_seconds_count\{model="m"\} (\S+)', metrics)
            total = re.search(r'lorentztron_freshness_seconds_sum\{model="m"\} (\S+)', metrics)
            assert count and float(count.group(1)) > 0
            assert float(total.group(1)) / float(count.group(1)) < 1.0  # mean delay < 1 s
            assert f'lorentztron_model_version{{model="m"}} {float(batches)}' in metrics
            # versions after the first come as deltas (service.scale.deltas)
            deltas = re.search(r'lorentztron_version_loads_total\{kind="delta"\} (\S+)', metrics)
            assert deltas and float(deltas.group(1)) > 0

        # a model deleted on one replica disappears everywhere
        assert httpx.delete(f"{replicas[1].url}/v1/models/m").status_code == 204
        wait_for(
            lambda: version(learner.url) is None and version(replicas[0].url) is None, timeout=30
        )
    finally:
        stop_all((*replicas, learner))
        redis_server.stop()


def test_replicas_serve_every_member_the_learner_learns(tmp_path):
    """A challenger added on the learner learns the feedback logged through the replicas; the
    replicas serve both members (shadow predictions), their comparison, and a promotion."""
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    learner, replicas = roles(redis_server.url, tmp_path)
    try:
        start_all((learner, *replicas))
        assert httpx.post(f"{replicas[0].url}/v1/models", json=SPEC).status_code == 201
        wait_for(lambda: version(learner.url) == 0, timeout=30)
        challenger = {"name": "c1", "kind": "dos", "params": {"rank": 1, "seed": 2}}
        refused = httpx.post(f"{replicas[0].url}/v1/models/m/challengers", json=challenger)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "wrong_role"
        added = httpx.post(f"{learner.url}/v1/models/m/challengers", json=challenger)
        assert added.status_code == 201, added.text
        # every replica serves the model (with its challenger) before feedback goes to it
        wait_for(lambda: all(version(r.url) == 1 for r in replicas), timeout=30)
        rng = np.random.default_rng(1)
        for round_ in range(20):
            X = rng.standard_normal((5, 5))
            body = {"examples": [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]}
            response = httpx.post(f"{replicas[round_ % 2].url}/v1/models/m/feedback", json=body)
            assert response.status_code == 200, response.text
        batches = 1 + 20  # (the challenger's version, then one per batch)
        wait_for(lambda: all(version(s.url) == batches for s in (learner, *replicas)), timeout=30)

        def comparisons(url):
            info = httpx.get(f"{url}/v1/models/m/challengers").json()["challengers"]
            return [(c["name"], c["examples_learned"], c["comparison"]) for c in info]

        assert comparisons(learner.url)[0][1] == 100
        assert comparisons(replicas[0].url) == comparisons(learner.url)
        instances = {"instances": [{"x": rng.standard_normal(5).tolist()} for _ in range(4)]}

        def scores(url, query=""):
            answer = httpx.post(f"{url}/v1/models/m/predict{query}", json=instances).json()
            return answer["member"], [p["score"] for p in answer["predictions"]]

        shadow = scores(learner.url, "?member=c1")
        assert shadow[0] == "c1" and shadow != scores(learner.url)
        assert all(scores(r.url, "?member=c1") == shadow for r in replicas)
        promoted = httpx.post(f"{learner.url}/v1/models/m/promote", json={"challenger": "c1"})
        assert promoted.status_code == 200, promoted.text
        wait_for(lambda: all(version(r.url) == batches + 1 for r in replicas), timeout=30)
        assert all(scores(r.url) == shadow for r in replicas)
        assert httpx.get(f"{replicas[1].url}/v1/models/m").json()["challengers"] == ["original"]
    finally:
        stop_all((*replicas, learner))
        redis_server.stop()


def publications(url: str) -> float:
    """The versions of model m a learner published."""
    text = httpx.get(f"{url}/metrics").text
    found = re.search(r'^lorentztron_published_versions_total\{model="m"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("loaded", ["delta", "full"])
def test_a_replica_answers_while_it_swaps_a_version_in(tmp_path, loaded):
    """An api replica builds a published version aside (a delta, or a whole version) and
    swaps it in: held just before the swap (failpoint ``replica.swap``), it answers
    predictions at once from the version it serves; after the swap, from the new version
    whole (the learner's scores at that version)."""
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    learner, [replica] = roles(redis_server.url, tmp_path, replicas=1)
    learner.env["LORENTZTRON_FULL_SNAPSHOT_EVERY"] = "1" if loaded == "full" else "40"
    replica.env["LORENTZTRON_FAILPOINTS"] = "replica.swap=hold*1"
    replica.env["LORENTZTRON_FAILPOINTS_DIR"] = str(tmp_path)
    held = tmp_path / "replica.swap"
    rng = np.random.default_rng(2)
    instances = {"instances": [{"x": rng.standard_normal(5).tolist()} for _ in range(4)]}

    def predict(url) -> tuple[int, list]:
        answer = httpx.post(f"{url}/v1/models/m/predict", json=instances, timeout=2).json()
        return answer["version"], [p["score"] for p in answer["predictions"]]

    try:
        start_all((learner, replica))
        assert httpx.post(f"{replica.url}/v1/models", json=SPEC).status_code == 201
        wait_for(lambda: version(learner.url) == 0 and version(replica.url) == 0, timeout=30)
        if loaded == "delta":  # the learner's chain starts (a full snapshot) at version 0,
            # so that version 1 is its first delta (a chain started after the feedback would
            # publish 1 whole)
            wait_for(lambda: publications(learner.url) >= 1, timeout=30)
        served = predict(replica.url)
        X = rng.standard_normal((3, 5))
        body = {"examples": [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]}
        assert httpx.post(f"{replica.url}/v1/models/m/feedback", json=body).status_code == 200
        wait_for(held.exists, timeout=30)  # version 1 built aside, not yet served
        wait_for(lambda: version(learner.url) == 1, timeout=30)
        published = predict(learner.url)
        assert published[0] == 1 and published[1] != served[1]
        for _ in range(20):  # answered meanwhile (2-s timeout), from version 0 whole
            assert predict(replica.url) == served
        assert version(replica.url) == 0
        held.unlink()
        wait_for(lambda: version(replica.url) == 1, timeout=10)
        assert predict(replica.url) == published
        metrics = httpx.get(f"{replica.url}/metrics").text
        count = re.search(rf'lorentztron_version_loads_total\{{kind="{loaded}"\}} (\S+)', metrics)
        assert count and float(count.group(1)) >= 1
    finally:
        held.unlink(missing_ok=True)
        stop_all((replica, learner))
        redis_server.stop()


def test_roles_need_redis():
    from service.config import Settings
    from service.main import create_app

    with pytest.raises(ValueError, match="LORENTZTRON_REDIS_URL"):
        create_app(Settings(role="api"))


def test_a_learner_learns_on_while_a_publication_hangs(redis_server, tmp_path):
    """The learner publishes in a thread of its own: a publication that takes long (the
    one after an averaging step uploads the whole average) does not hold the learning."""
    from service.config import Settings
    from service.main import create_app
    from tests.service.conftest import TestClient

    settings = Settings(
        snapshot_dir=tmp_path / "snapshots",
        redis_url=redis_server.url,
        role="learner",
        publish_interval=0.05,
    )
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/models", json=SPEC).status_code == 201
        learner = client.app.state.startup.role_loop
        wait_for(lambda: "m" in learner.held_leases() and version(client) == 0, timeout=30)
        writer = learner.models.writer
        entered, release = threading.Event(), threading.Event()
        publish = writer.publish

        def hanging(live):
            entered.set()
            release.wait(30)
            return publish(live)

        writer.publish = hanging
        try:
            post = {"examples": [{"x": [1.0, 0, 0, 0, 0], "label": 1}]}
            assert client.post("/v1/models/m/feedback", json=post).status_code == 200
            assert entered.wait(10)  # the publication of that version hangs ...
            for _ in range(3):
                assert client.post("/v1/models/m/feedback", json=post).status_code == 200
            wait_for(lambda: version(client) == 4, timeout=10)  # ... and learning goes on
        finally:
            release.set()
        wait_for(lambda: learner.models.get("m").record.published_version == 4, timeout=10)
