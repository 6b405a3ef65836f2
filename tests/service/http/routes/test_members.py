"""A model's members through HTTP: challengers that learn the same feedback as the champion,
compared on the same examples; promotion (by an operator, by the policy), the variant that
serves, shadow predictions, drift, the pause of learning; all durable across restarts."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from service.config import Settings
from service.main import create_app
from tests.service.conftest import TestClient, create

N_FEATURES = 4


def examples(n: int, seed: int = 0, product: bool = True) -> list[dict]:
    """Examples of y = sign(x0 x1): a quadratic rule (a DoS model learns it, a linear one
    cannot), or of y = sign(x0 + x1) (``product`` false)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N_FEATURES))
    y = np.sign(X[:, 0] * X[:, 1] if product else X[:, 0] + X[:, 1])
    return [
        {"x": x.round(4).tolist(), "label": int(label or 1)} for x, label in zip(X, y, strict=True)
    ]


def feed(client, batch: list[dict], name: str = "m", **headers) -> dict:
    answer = client.post(f"/v1/models/{name}/feedback", json={"examples": batch}, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def settings(tmp_path):
    return Settings(snapshot_dir=tmp_path, snapshot_interval=3600)


def linear(client, **extra) -> dict:
    return create(client, kind="linear-pa", n_features=N_FEATURES, **extra)


def test_a_challenger_learns_the_same_feedback_and_is_compared_on_it(settings):
    with TestClient(create_app(settings)) as client:
        linear(client)
        added = client.post(
            "/v1/models/m/challengers", json={"name": "c1", "kind": "dos", "params": {"rank": 2}}
        )
        assert added.status_code == 201, added.text
        assert added.headers["location"] == "/v1/models/m/challengers/c1"
        assert added.json()["examples_learned"] == 0
        for k in range(6):
            feed(client, examples(100, seed=k))
        info = client.get("/v1/models/m").json()
        assert info["member"] == "original" and info["challengers"] == ["c1"]
        assert info["examples_learned"] == 600 and set(info["variants"]) == {"live", "averaged"}
        [c1] = client.get("/v1/models/m/challengers").json()["challengers"]
        assert c1["examples_learned"] == 600 and c1["kind"] == "dos"
        comparison = c1["comparison"]
        assert comparison["against"] == {"member": "original", "variant": "live"}
        assert comparison["examples"] == 600 and comparison["error"] == "zero_one"
        low, high = comparison["interval"]
        assert low <= comparison["mean_difference"] <= high < 0  # DoS learns the product
        assert comparison["verdict"] == "better"
        # the difference is the mean of the paired errors: its accuracy minus the champion's
        live = client.app.state.components.models.get("m")
        champion, challenger = live.champion.metrics(), live.group.member("c1").metrics()
        assert comparison["mean_difference"] == pytest.approx(
            champion["accuracy"] - challenger["accuracy"], abs=1e-12
        )


def test_promotion_serves_the_challenger_durably_and_can_be_undone(settings):
    query = {"instances": [{"x": [1.0, 1.0, 0.0, 0.0]}, {"x": [1.0, -1.0, 0.0, 0.0]}]}
    with TestClient(create_app(settings)) as client:
        linear(client)
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        feed(client, examples(300))
        before = client.post("/v1/models/m/predict", json=query).json()
        shadow = client.post("/v1/models/m/predict?member=c1", json=query).json()
        assert before["member"] == "original" and shadow["member"] == "c1"
        missing = client.post("/v1/models/m/predict?member=nope", json=query)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "member_not_found"
        headers = {"Idempotency-Key": "promote-1"}
        promoted = client.post("/v1/models/m/promote", json={"challenger": "c1"}, headers=headers)
        assert promoted.status_code == 200, promoted.text
        info = promoted.json()
        assert (
            info["kind"] == "dos" and info["member"] == "c1" and info["challengers"] == ["original"]
        )
        again = client.post("/v1/models/m/promote", json={"challenger": "c1"}, headers=headers)
        assert again.json() == info and again.headers["idempotent-replayed"] == "true"
        after = client.post("/v1/models/m/predict", json=query).json()
        assert after["member"] == "c1"
        assert [p["score"] for p in after["predictions"]] == [
            p["score"] for p in shadow["predictions"]
        ]
        # a prediction id given before the promotion is still answerable
        pid = before["predictions"][0]["prediction_id"]
        feed(client, [{"prediction_id": pid, "label": 1}])
        served = client.get("/v1/models/m").json()
    with TestClient(create_app(settings)) as client:  # restarted: the same group
        restored = client.get("/v1/models/m").json()
        assert {k: restored[k] for k in ("member", "kind", "version", "challengers")} == {
            k: served[k] for k in ("member", "kind", "version", "challengers")
        }
        undone = client.post("/v1/models/m/promote", json={"challenger": "original"})
        assert undone.json()["kind"] == "linear-pa" and undone.json()["member"] == "original"


def test_the_policy_promotes_a_better_challenger(settings):
    with TestClient(create_app(settings)) as client:
        linear(client, promotion={"auto": True, "confidence": 0.95, "min_examples": 100})
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        for k in range(10):
            feed(client, examples(100, seed=k))
        info = client.get("/v1/models/m").json()
        assert info["member"] == "c1" and info["promotions"] == 1
        assert info["promotion"] == {"auto": True, "confidence": 0.95, "min_examples": 100}


def test_challengers_are_checked_and_counted_as_models(settings):
    limited = settings.model_copy(update={"max_models": 2})
    with TestClient(create_app(limited)) as client:
        linear(client)
        post = client.post
        assert (
            post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"}).status_code == 201
        )
        for body, status, code in (
            ({"name": "c1", "kind": "dos"}, 409, "member_exists"),
            ({"name": "c2", "kind": "dos"}, 409, "too_many_models"),
            ({"name": "c2", "kind": "pqr", "params": {"task": "regression"}}, 422, None),
            ({"name": "c2", "kind": "dos", "params": {"rank": 0}}, 422, "invalid_params"),
        ):
            refused = post("/v1/models/m/challengers", json=body)
            assert refused.status_code == status, (body, refused.text)
            assert code is None or refused.json()["error"]["code"] == code
        assert client.delete("/v1/models/m/challengers/original").status_code == 409
        assert client.delete("/v1/models/m/challengers/nope").status_code == 404
        assert client.delete("/v1/models/m/challengers/c1").status_code == 204
        assert client.get("/v1/models/m/challengers").json() == {"challengers": []}
        assert (
            post("/v1/models/m/challengers", json={"name": "c2", "kind": "dos"}).status_code == 201
        )


def test_paused_learning_logs_and_resumes_in_order_or_discards(settings):
    batches = [examples(20, seed=k, product=False) for k in range(4)]
    with TestClient(create_app(settings)) as client:
        linear(client, name="m")
        linear(client, name="reference")
        feed(client, batches[0])
        feed(client, batches[0], name="reference")
        paused = client.post("/v1/models/m/learning", json={"paused": True})
        assert paused.status_code == 200 and paused.json()["learning"] == {
            "paused": True,
            "backlog": 0,
        }
        answer = feed(client, batches[1])
        assert answer["learned"] == 0 and answer["logged"] == 20
        feed(client, batches[2])
        info = client.get("/v1/models/m").json()
        assert info["examples_learned"] == 20 and info["learning"]["backlog"] == 2
        assert client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 0, 0, 0]}]})
    with TestClient(create_app(settings)) as client:  # a restart while paused: backlog kept
        assert client.get("/v1/models/m").json()["learning"] == {"paused": True, "backlog": 2}
        resumed = client.post("/v1/models/m/learning", json={"paused": False})
        assert resumed.json()["learning"] == {"paused": False, "backlog": 0}
        for batch in batches[1:3]:
            feed(client, batch, name="reference")
        mine, theirs = (
            client.post(
                f"/v1/models/{n}/predict", json={"instances": [{"x": [1, 2, 3, 4]}]}
            ).json()["predictions"][0]["score"]
            for n in ("m", "reference")
        )
        assert mine == theirs and client.get("/v1/models/m").json()["examples_learned"] == 60
        client.post("/v1/models/m/learning", json={"paused": True})
        feed(client, batches[3])
        dropped = client.post("/v1/models/m/learning", json={"paused": False, "discard": True})
        assert dropped.json()["learning"] == {"paused": False, "backlog": 0}
        bad = client.post("/v1/models/m/learning", json={"paused": True, "discard": True})
        assert bad.status_code == 422
    with TestClient(create_app(settings)) as client:  # the discard is durable
        info = client.get("/v1/models/m").json()
        assert info["examples_learned"] == 60 and info["learning"]["backlog"] == 0


def test_a_crash_keeps_the_backlog_and_the_discard(settings):
    """What is on disk after a crash (no shutdown snapshot) is all a restart has: the
    records logged while paused come back as the backlog, and a discard stays done."""
    batches = [examples(20, seed=k, product=False) for k in range(4)]
    with TestClient(create_app(settings)) as client:
        linear(client)
        feed(client, batches[0])
        client.post("/v1/models/m/learning", json={"paused": True})
        feed(client, batches[1])
        feed(client, batches[2])
        crashed = settings.snapshot_dir.parent / "crashed"
        shutil.copytree(settings.snapshot_dir, crashed)
        client.post("/v1/models/m/learning", json={"paused": False, "discard": True})
        feed(client, batches[3])
        discarded = settings.snapshot_dir.parent / "discarded"
        shutil.copytree(settings.snapshot_dir, discarded)
    with TestClient(create_app(settings.model_copy(update={"snapshot_dir": crashed}))) as client:
        info = client.get("/v1/models/m").json()
        assert info["learning"] == {"paused": True, "backlog": 2}
        assert info["examples_learned"] == 20
        resumed = client.post("/v1/models/m/learning", json={"paused": False}).json()
        assert resumed["examples_learned"] == 60 and resumed["learning"]["backlog"] == 0
    with TestClient(create_app(settings.model_copy(update={"snapshot_dir": discarded}))) as c:
        info = c.get("/v1/models/m").json()
        assert info["learning"] == {"paused": False, "backlog": 0}
        assert info["examples_learned"] == 40  # (the first batch and the last)


def test_drift_starts_a_challenger_that_the_policy_can_promote(settings):
    """Labels flipped after 2,000 examples: the champion's errors rise, the detector sees it,
    a fresh copy of the champion starts learning and is promoted once it is better; the same
    model without the policy (a soft margin slow to unlearn) is still worse 400 examples on."""
    stream = examples(2400, seed=3, product=False)
    for example in stream[2000:]:
        example["label"] = -example["label"]
    slow = {"mode": "pa1", "C": 0.002}
    with TestClient(create_app(settings)) as client:
        linear(
            client,
            params=slow,
            drift={"detector": "adwin", "on_drift": "challenger"},
            promotion={"auto": True, "confidence": 0.95, "min_examples": 100},
        )
        linear(client, name="plain", params=slow)
        for k in range(0, 2400, 200):
            feed(client, stream[k : k + 200])
            feed(client, stream[k : k + 200], name="plain")
            if k < 2000:  # (a learning curve falling is not a drift)
                assert client.get("/v1/models/m").json()["drift"]["detections"] == 0
        info = client.get("/v1/models/m").json()
        assert info["drift"]["detections"] == 1
        assert 2000 < info["drift"]["last_detected_at_example"] < 2100
        assert info["member"] == "drift" and info["promotions"] == 1
        assert info["challengers"] == ["original"]
        plain = client.get("/v1/models/plain").json()
        assert plain["metrics"]["recent_accuracy"] < info["metrics"]["recent_accuracy"] - 0.1


def test_serve_best_serves_the_better_variant(settings):
    """With ``serve: best`` predict serves the averaged variant once it is better."""
    stream = examples(3000, seed=5, product=False)
    rng = np.random.default_rng(5)
    for example in stream:  # label noise: the time average does better than the live model
        if rng.random() < 0.25:
            example["label"] = -example["label"]
    with TestClient(create_app(settings)) as client:
        linear(
            client,
            averaging={"interval": 50},
            serve="best",
            promotion={"confidence": 0.9, "min_examples": 1},
        )
        for k in range(0, 3000, 100):
            feed(client, stream[k : k + 100])
        info = client.get("/v1/models/m").json()
        assert info["variant"] == "averaged"
        live, averaged = info["variants"]["live"], info["variants"]["averaged"]
        assert averaged["comparison"] is None and live["comparison"]["verdict"] in (
            "worse",
            "undecided",
        )
        answer = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 0, 0, 0]}]})
        assert answer.json()["variant"] == "averaged"


def test_policies_are_patched_durably(settings):
    with TestClient(create_app(settings)) as client:
        linear(client)
        patched = client.patch(
            "/v1/models/m", json={"serve": "best", "drift": {"detector": "page_hinkley"}}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["serve"] == "best" and patched.json()["drift"]["detections"] == 0
        bad = client.patch(
            "/v1/models/m", json={"drift": {"detector": "adwin", "params": {"x": 1}}}
        )
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_params"
        assert client.patch("/v1/models/m", json={}).status_code == 422
        inline = {"detector": "adwin", "delta": 0.01, "on_drift": "challenger"}  # (params beside)
        assert client.patch("/v1/models/m", json={"drift": inline}).status_code == 200
        bad = client.patch("/v1/models/m", json={"drift": {"detector": "adwin", "delta": 2.0}})
        assert bad.status_code == 422 and "delta" in bad.json()["error"]["message"]
        both = {"detector": "page_hinkley", "params": {"threshold": 20.0}}
        assert client.patch("/v1/models/m", json={"drift": both}).status_code == 200
    with TestClient(create_app(settings)) as client:
        info = client.get("/v1/models/m").json()
        assert info["serve"] == "best" and info["drift"]["detector"] == "page_hinkley"
        removed = client.patch("/v1/models/m", json={"drift": None}).json()
        assert removed["drift"] is None


@pytest.mark.parametrize(
    "method, path, body, other",
    [
        ("post", "/challengers", {"name": "c2", "kind": "dos"}, {"name": "c3", "kind": "dos"}),
        ("post", "/learning", {"paused": True}, {"paused": False}),
        ("patch", "", {"serve": "best"}, {"serve": "fixed"}),
        ("post", "/promote", {"challenger": "c1"}, {"challenger": "original"}),
    ],
)
def test_every_change_honours_an_idempotency_key(settings, method, path, body, other):
    """A retry with the key gets the first answer (and changes nothing: no new version);
    the key with another body is refused."""
    with TestClient(create_app(settings)) as client:
        linear(client)
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        feed(client, examples(50))
        headers = {"Idempotency-Key": "change-1"}
        send = getattr(client, method)
        first = send(f"/v1/models/m{path}", json=body, headers=headers)
        assert first.status_code in (200, 201), first.text
        version = client.get("/v1/models/m").json()["version"]
        again = send(f"/v1/models/m{path}", json=body, headers=headers)
        assert again.status_code == first.status_code and again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert client.get("/v1/models/m").json()["version"] == version
        reused = send(f"/v1/models/m{path}", json=other, headers=headers)
        assert reused.status_code == 422, reused.text
    with TestClient(create_app(settings)) as client:  # the answer survives a restart
        restarted = getattr(client, method)(f"/v1/models/m{path}", json=body, headers=headers)
        assert restarted.json() == first.json()
        assert restarted.headers["idempotent-replayed"] == "true"


def test_the_inference_protocol_knows_the_members(settings):
    """V2: the metadata lists the members and the variant that serves; the request
    parameter ``member`` scores with a challenger, as v1's ``?member=`` does."""
    instances = [[1.0, 1.0, 0.0, 0.0], [1.0, -1.0, 0.5, 0.0]]
    body = {
        "inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP64", "data": instances}],
        "parameters": {"member": "c1"},
    }
    with TestClient(create_app(settings)) as client:
        linear(client)
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        feed(client, examples(200))
        metadata = client.get("/v2/models/m").json()
        assert metadata["parameters"]["members"] == ["original", "c1"]
        v1 = client.post(
            "/v1/models/m/predict?member=c1", json={"instances": [{"x": x} for x in instances]}
        ).json()
        v2 = client.post("/v2/models/m/infer", json=body).json()
        scores = next(o for o in v2["outputs"] if o["name"] == "score")["data"]
        assert scores == [p["score"] for p in v1["predictions"]]
        champion = client.post("/v2/models/m/infer", json={**body, "parameters": {}}).json()
        assert next(o for o in champion["outputs"] if o["name"] == "score")["data"] != scores
        missing = client.post("/v2/models/m/infer", json={**body, "parameters": {"member": "x"}})
        assert missing.status_code == 404 and missing.json()["code"] == "member_not_found"


def test_members_are_in_the_metrics(settings):
    with TestClient(create_app(settings)) as client:
        linear(client, averaging={"interval": 10}, drift={"detector": "page_hinkley"})
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        feed(client, examples(300))
        text = client.get("/metrics").text
        assert 'lorentztron_promotions_total{model="m"} 0.0' in text
        assert 'lorentztron_drift_detections_total{model="m"} 0.0' in text
        client.post("/v1/models/m/promote", json={"challenger": "c1"})
        client.post("/v1/models/m/learning", json={"paused": True})
        feed(client, examples(10))
        text = client.get("/metrics").text
        for line in (
            'lorentztron_member_serving{member="c1",model="m",variant="live"} 1.0',
            'lorentztron_member_serving{member="original",model="m",variant="live"} 0.0',
            'lorentztron_member_examples_learned{member="c1",model="m"} 300.0',
            'lorentztron_promotions_total{model="m"} 1.0',
            'lorentztron_learning_paused{model="m"} 1.0',
            'lorentztron_learning_backlog_records{model="m"} 1.0',
        ):
            assert line in text, line
        verdicts = re.findall(
            r'lorentztron_member_verdict\{member="(\w+)",model="m",variant="(\w+)"', text
        )
        assert sorted(verdicts) == [
            ("c1", "averaged"),
            ("original", "averaged"),
            ("original", "live"),
        ]
        client.delete("/v1/models/m/challengers/original")
        text = client.get("/metrics").text
        assert 'member="original"' not in text


@pytest.mark.parametrize(
    "path, body",
    [
        ("/challengers", {"name": "c2", "kind": "dos"}),
        ("/promote", {"challenger": "c1"}),
        ("/learning", {"paused": False, "discard": True}),
        ("/learning", {"paused": False}),
    ],
)
def test_a_change_that_cannot_be_saved_changes_nothing(settings, monkeypatch, path, body):
    """The snapshot store fails: 503, and the model is as it was (members, what serves,
    version, pause and backlog)."""
    with TestClient(create_app(settings)) as client:
        linear(client)
        client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        feed(client, examples(50))
        client.post("/v1/models/m/learning", json={"paused": True})
        feed(client, examples(10, seed=1))
        before = client.get("/v1/models/m").json()
        writer = client.app.state.components.models.writer

        def broken(*args, **kwargs):
            raise OSError("disk full")

        monkeypatch.setattr(writer, "write", broken)
        failed = client.post(f"/v1/models/m{path}", json=body)
        assert failed.status_code == 503 and failed.json()["error"]["code"] == "store_unavailable"
        monkeypatch.undo()
        after = client.get("/v1/models/m").json()
        keys = ("version", "member", "challengers", "learning", "examples_learned")
        assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
