"""The fast path of the hot endpoints answers exactly as FastAPI's routes: the same
requests sent to an app with the fast path and to one without give the same status, body
(prediction ids aside) and headers, and the same metrics labels."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from core.registry import state_digest
from service.config import Settings
from service.durability.feedback_log import LogUnavailable, decode_record
from service.http import grouping
from service.http.bodies import is_json, media_type
from service.http.errors import status_of
from service.http.fastpath import FastPath
from service.http.routes import inference
from service.http.routes import predict as predict_route
from service.http.routes.inference import HEADER_LENGTH
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for

JSON = {"content-type": "application/json"}
SVMLIGHT = {"content-type": "text/x-svmlight"}
NDJSON = {"content-type": "application/x-ndjson"}
INSTANCE = {"instances": [{"x": [1.0, 2.0, 3.0]}]}


def make_clients(tmp_path, **overrides):
    clients = []
    for fast in (True, False):
        settings = Settings(
            snapshot_dir=tmp_path / f"snapshots-{fast}", snapshot_interval=3600, fast_path=fast
        ).model_copy(update=overrides)
        clients.append(TestClient(create_app(settings), follow_redirects=False))
    return clients


def outcome(response) -> tuple:
    text = re.sub(r'"prediction_id":"[0-9a-f]{32}"', '"prediction_id":"*"', response.text)
    text = re.sub(r'"created_at":[0-9.e+]+', '"created_at":"*"', text)
    headers = {
        key: value
        for key, value in response.headers.items()
        if key not in {"x-request-id", "date", "content-length"}
    }
    return response.status_code, text, headers


def same(fast: TestClient, slow: TestClient, method: str, path: str, **kwargs) -> tuple:
    """Send the request to both apps (a callable ``content`` makes each its body)."""
    answers = []
    for client in (fast, slow):
        content = kwargs.get("content")
        sent = kwargs | ({"content": content()} if callable(content) else {})
        answers.append(outcome(client.request(method, path, **sent)))
    assert answers[0] == answers[1], (method, path, kwargs)
    return answers[0]


def request_lines(client: TestClient) -> list[str]:
    return sorted(
        re.sub(r" [0-9.e+]+$", "", line)
        for line in client.get("/metrics").text.splitlines()
        if line.startswith(("lorentztron_http_requests_total{", "lorentztron_requests_total{"))
    )


@pytest.fixture
def pair(tmp_path):
    fast, slow = make_clients(tmp_path)
    with fast, slow:
        yield fast, slow


def test_the_fast_path_serves_the_hot_endpoints_only_when_enabled(pair, monkeypatch):
    fast, slow = pair
    assert any(m.cls is FastPath for m in fast.app.user_middleware)
    assert not any(m.cls is FastPath for m in slow.app.user_middleware)
    served = []
    original = FastPath._serve

    async def spy(self, scope, receive, send, name, action):
        served.append((name, action))
        await original(self, scope, receive, send, name, action)

    monkeypatch.setattr(FastPath, "_serve", spy)
    for client in pair:
        create(client)
        client.post("/v1/models/m/predict", json=INSTANCE)
        client.post("/v1/models/m/feedback", json={"examples": [{"x": [1, 2, 3], "label": 1}]})
        client.get("/v1/models/m")
    assert served == [("m", "predict"), ("m", "feedback")]


def test_predict_answers_like_fastapi(pair):
    fast, slow = pair
    for client in pair:
        create(client, averaging={"interval": 2}, params={"rank": 2, "seed": 0})
        create(client, name="r", kind="pqr", params={"task": "regression"})
    cases = [
        ("/v1/models/m/predict", dict(json=INSTANCE)),
        ("/v1/models/m/predict?variant=averaged", dict(json=INSTANCE)),
        ("/v1/models/m/predict?variant=live&variant=averaged", dict(json=INSTANCE)),
        ("/v1/models/r/predict?variant=averaged", dict(json=INSTANCE)),
        ("/v1/models/m/predict?variant=best", dict(json=INSTANCE)),
        ("/v1/models/m/predict?variant=", dict(json=INSTANCE)),
        ("/v1/models/m/predict?variant=best", dict(json={"instances": "no"})),
        ("/v1/models/m/predict?other=1", dict(json=INSTANCE)),
        ("/v1/models/m/predict", dict(json={"instances": []})),
        ("/v1/models/m/predict", dict(json={})),
        ("/v1/models/m/predict", dict(json=[1, 2])),
        ("/v1/models/m/predict", dict(json={"instances": [{"x": [1, 2]}]})),
        ("/v1/models/m/predict", dict(json={"instances": [{"indices": [7], "values": [1]}]})),
        ("/v1/models/m/predict", dict(json={"instances": [{}]})),
        ("/v1/models/m/predict", dict(json={"instances": [{"features": {"a": "b", "c": 2}}]})),
        ("/v1/models/m/predict", dict(content=b'{"instances": [{"x": [NaN, 1]}]}', headers=JSON)),
        ("/v1/models/m/predict", dict(content=b'{"instances": [', headers=JSON)),
        ("/v1/models/m/predict", dict(content=b"", headers=JSON)),
        ("/v1/models/m/predict", dict(content=b"\xff\xfe{", headers=JSON)),
        ("/v1/models/m/predict", dict(content=b'{"instances": [{"x": [1, 2, 3]}]}')),
        ("/v1/models/m/predict", dict(content=b'{"instances": []}', headers=SVMLIGHT)),
        (
            "/v1/models/m/predict",
            dict(
                content=b'{"instances": [{"x": [1, 2, 3]}]}',
                headers={"content-type": "application/vnd.lorentztron+json; charset=utf-8"},
            ),
        ),
        ("/v1/models/none/predict", dict(json=INSTANCE)),
        ("/v1/models/m%2Fx/predict", dict(json=INSTANCE)),
        ("/v1/models/m/predict/", dict(json=INSTANCE)),
        ("/v1/models//predict", dict(json=INSTANCE)),
    ]  # fmt: skip
    for path, kwargs in cases:
        same(fast, slow, "POST", path, **kwargs)
    assert same(fast, slow, "GET", "/v1/models/m/predict")[0] == 405
    assert same(fast, slow, "POST", "/v1/models/m/predict", json=INSTANCE)[0] == 200
    assert request_lines(fast) == request_lines(slow)
    assert 'endpoint="/v1/models/{name}/predict"' in "".join(request_lines(fast))


def test_feedback_answers_like_fastapi(pair):
    fast, slow = pair
    for client in pair:
        create(client, n_features=4, params={"rank": 2, "seed": 1}, classes=["a", "b", "c"])
    example = {"x": [1, 0, 0, 2], "label": "b"}
    cases = [
        dict(json={"examples": [example]}),
        dict(json={"examples": [example, {"indices": [1], "values": [2.0], "label": "c"}]}),
        dict(json={"examples": [{"x": [1, 0], "label": "a"}]}),
        dict(json={"examples": [{"x": [1, 0, 0, 1], "label": "z"}]}),
        dict(json={"examples": [{"prediction_id": "nope", "label": "a"}]}),
        dict(json={"examples": []}),
        dict(json={}),
        dict(content=b'{"examples": [', headers=JSON),
        dict(content=b"", headers=JSON),
        dict(content=b'{"examples": [{"x": [1, 0, 0, 2], "label": "a"}]}'),
        dict(content=b'{"x": [1, 0, 0, 2], "label": "a"}\n', headers=NDJSON),
        dict(content=b'{"x": [1]}\n', headers=NDJSON),
        dict(content=b"", headers=NDJSON),
        dict(content=b"1 1:0.5 4:1\n", headers=SVMLIGHT),
        dict(content=b"1 1:0.5 4:1\n", headers={"content-type": "text/plain; charset=ascii"}),
        dict(content=b"7 1:0.5\n", headers=SVMLIGHT),
        dict(content=b"1 1:0.5 9:1\n", headers=SVMLIGHT),
        dict(content=b"1 1:nan\n", headers=SVMLIGHT),
        dict(content=b"1 4:1 1:0.5 1:0.25 2:0.0\n2 3:0.30000000000000004\n", headers=SVMLIGHT),
        dict(content=b"1 1:1e309\n", headers=SVMLIGHT),
        dict(content=b"x", headers={"content-type": "application/xml"}),
        dict(content=b"x", headers={"content-type": "APPLICATION/JSON; charset=utf-8"}),
    ]  # fmt: skip
    for kwargs in cases:
        same(fast, slow, "POST", "/v1/models/m/feedback", **kwargs)
    same(fast, slow, "POST", "/v1/models/none/feedback", json={"examples": [example]})
    same(
        fast,
        slow,
        "POST",
        "/v1/models/none/feedback",
        content=b"x",
        headers={"content-type": "a/b"},
    )
    # feedback by prediction id: each app answers its own ids
    for client in pair:
        pid = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 1, 1, 1]}]})
        pid = pid.json()["predictions"][0]["prediction_id"]
        body = {"examples": [{"prediction_id": pid, "label": "c"}]}
        assert client.post("/v1/models/m/feedback", json=body).status_code == 200
    assert same(fast, slow, "GET", "/v1/models/m")[0] == 200  # same counters and metrics
    assert request_lines(fast) == request_lines(slow)


def test_auth_answers_like_fastapi(tmp_path):
    fast, slow = make_clients(tmp_path, write_keys=["w1", "w2"], read_keys=["r1"])
    with fast, slow:
        for client in (fast, slow):
            create_body = {"name": "m", "kind": "dos", "input": {"n_features": 3}}
            response = client.post(
                "/v1/models", json=create_body, headers={"authorization": "Bearer w1"}
            )
            assert response.status_code == 201
        keys = [None, "Bearer r1", "Bearer w2", "Bearer nope", "bearer  w1 ", "Basic w1", "Bearer"]
        for key in keys:
            headers = {} if key is None else {"authorization": key}
            for body in (INSTANCE, {"instances": []}):
                same(fast, slow, "POST", "/v1/models/m/predict", json=body, headers=headers)
            # the key is checked before the body is read
            same(
                fast,
                slow,
                "POST",
                "/v1/models/m/predict?variant=x",
                content=b"{",
                headers=headers | JSON,
            )
            for body in ({"examples": [{"x": [1, 2, 3], "label": 1}]}, {"examples": []}):
                same(fast, slow, "POST", "/v1/models/m/feedback", json=body, headers=headers)
            same(fast, slow, "POST", "/v1/models/none/feedback", json={}, headers=headers)
        answer = same(fast, slow, "POST", "/v1/models/m/predict", json=INSTANCE)
        assert answer[0] == 401 and answer[2]["www-authenticate"] == "Bearer"


def test_oversized_bodies_answer_like_fastapi(tmp_path):
    fast, slow = make_clients(tmp_path, max_body_bytes=200)
    with fast, slow:
        for client in (fast, slow):
            create(client)

        def chunks():
            yield b'{"instances": ['
            for _ in range(20):
                yield b'{"x": [1, 2, 3]},'
            yield b'{"x": [1, 2, 3]}]}'

        for path in ("/v1/models/m/predict", "/v1/models/m/feedback"):
            answer = same(fast, slow, "POST", path, content=chunks, headers=JSON)
            assert answer[0] == 413 and '"payload_too_large"' in answer[1]
            big = {"instances": [{"x": [1, 2, 3]}] * 20}
            assert same(fast, slow, "POST", path, json=big)[0] == 413


def test_unexpected_errors_are_a_logged_json_500(pair, monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("boom")

    for client in pair:
        create(client)
    monkeypatch.setattr(predict_route, "_predict", broken)
    with caplog.at_level(logging.ERROR, logger="lorentztron"):
        answer = same(*pair, "POST", "/v1/models/m/predict", json=INSTANCE)
    assert answer[0] == 500 and '"internal_error"' in answer[1]
    assert sum("boom" in (r.exc_text or "") for r in caplog.records) == 2
    assert request_lines(pair[0]) == request_lines(pair[1])


def test_openapi_is_the_same_with_and_without_the_fast_path(pair):
    fast, slow = pair
    spec = fast.get("/openapi.json").json()
    assert spec == slow.get("/openapi.json").json()
    predict = spec["paths"]["/v1/models/{name}/predict"]["post"]
    assert [p["name"] for p in predict["parameters"]] == ["name", "variant", "member"]
    assert predict["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PredictRequest"
    }
    feedback = spec["paths"]["/v1/models/{name}/feedback"]["post"]
    assert set(feedback["requestBody"]["content"]) == {
        "application/json",
        "application/x-ndjson",
        "text/x-svmlight",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON", True),
        ("application/problem+json", True),
        ("application/jsonl", False),
        ("text/json", False),
        ("application/x-ndjson", False),
        ("", True),
        ("json", False),
    ],
)
def test_json_content_types(value, expected):
    assert is_json(media_type(value)) is expected


def grouped_bodies(n: int) -> list[tuple[bytes, int]]:
    """(body, expected status) of ``n`` single-example feedback requests: valid ones,
    one of a wrong dimension and one of an unknown label in every four."""
    rng = np.random.default_rng(3)
    bodies = []
    for i in range(n):
        x = rng.standard_normal(4).round(3).tolist()
        label = "a" if rng.random() < 0.5 else "b"
        if i % 4 == 2:
            bodies.append((json.dumps({"examples": [{"x": x, "label": "z"}]}).encode(), 422))
        elif i % 4 == 3:
            bodies.append((json.dumps({"examples": [{"x": x[:3], "label": label}]}).encode(), 422))
        else:
            bodies.append((json.dumps({"examples": [{"x": x, "label": label}]}).encode(), 200))
    return bodies


def test_concurrent_feedback_is_grouped_and_each_request_answered_as_alone(pair, monkeypatch):
    """Small feedback requests that wait for a handler thread (here all of them: none is
    learned on the event loop) are handled a group at a time (one thread hop, one fsync of
    the log), yet each gets its own answer: the invalid ones their 422 and nothing learned,
    the valid ones a version each, and the model ends exactly as the same valid examples
    learned one by one in the order of their versions (FastAPI's route, no grouping), with
    one log record per valid request in that order. (``tests/service/http/test_grouping.py``:
    the same for the requests learned on the loop.)"""
    fast, slow = pair
    monkeypatch.setattr(grouping, "INLINE_BODY_BYTES", -1)
    for client in pair:
        create(client, n_features=4, params={"rank": 2, "seed": 1}, classes=["a", "b"])
    sizes = []
    original = grouping.handle_group

    def spy(app, live, requests, learned):
        if not sizes:
            time.sleep(0.3)  # the first group holds the model's turn: the others queue
        sizes.append(len(requests))
        return original(app, live, requests, learned)

    monkeypatch.setattr(grouping, "handle_group", spy)
    bodies = grouped_bodies(32)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda b: fast.post("/v1/models/m/feedback", content=b[0]), bodies))
    assert [a.status_code for a in answers] == [status for _, status in bodies]
    assert sum(sizes) == len(bodies) and max(sizes) > 1, sizes
    learned = sorted(
        (a.json()["version"], body)
        for a, (body, status) in zip(answers, bodies, strict=True)
        if status == 200
    )
    versions = [v for v, _ in learned]
    assert versions == list(range(versions[0], versions[0] + len(learned)))
    for _, body in learned:
        assert slow.post("/v1/models/m/feedback", content=body).status_code == 200
    models = [c.app.state.components.models.get("m") for c in (fast, slow)]
    learned_counts = [m.champion.counters.examples_learned for m in models]
    assert learned_counts == [len(learned)] * 2
    assert state_digest(models[0].estimator.get_state()) == state_digest(
        models[1].estimator.get_state()
    )
    records = [decode_record(r) for _, r in models[0].journal.log.read_after("m", 0)]
    expected = [json.loads(body)["examples"][0]["x"] for _, body in learned]
    assert [batch.values.tolist() for batch, _, _ in records[-len(learned) :]] == [
        [v for v in x if v != 0] for x in expected
    ]


def test_a_failed_group_fsync_refuses_every_request_it_was_to_make_durable(pair, monkeypatch):
    fast, _ = pair
    create(fast, n_features=4, params={"rank": 2}, classes=["a", "b"])
    components = fast.app.state.components
    live = components.models.get("m")
    bodies = grouped_bodies(4)  # valid, valid, unknown label, wrong dimension

    def broken(model, position):
        raise LogUnavailable("disk gone")

    monkeypatch.setattr(live.journal.log, "sync", broken)
    calls = []
    outcomes = grouping.handle_group(
        components,
        live,
        [("application/json", body) for body, _ in bodies],
        lambda: calls.append(1),
    )
    assert calls == [1]  # the next group could go before the fsync
    assert [ok for ok, _ in outcomes] == [False] * 4
    codes = [(status_of(error.code), error.code) for _, error in outcomes]
    assert codes == [(503, "log_unavailable")] * 2 + [
        (422, "unknown_label"),
        (422, "invalid_input"),
    ]
    # learned and logged (the log and the model agree), but not acknowledged
    assert (
        live.champion.counters.examples_learned == 2
        and len(list(live.journal.log.read_after("m", 0))) == 2
    )


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_small_predict_is_answered_on_the_loop_unless_a_learner_holds_the_model(
    tmp_path, monkeypatch, fast_path
):
    """No thread hop for a small prediction of a free model; a large body, or a model that a
    learner holds, goes to a handler thread, and the event loop keeps serving meanwhile."""
    hops = []
    original = predict_route.run_sync

    async def counting(executor, function, *args):
        hops.append(next(len(a) for a in args if isinstance(a, bytes)))  # (the body)
        return await original(executor, function, *args)

    monkeypatch.setattr(predict_route, "run_sync", counting)
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600, fast_path=fast_path)
    with TestClient(create_app(settings)) as client:
        create(client)
        assert client.post("/v1/models/m/predict", json=INSTANCE).status_code == 200
        assert hops == []  # answered on the event loop
        large = {"instances": [{"x": [1.0, 2.0, 3.0]}] * 1000}
        answer = client.post("/v1/models/m/predict", json=large)
        assert answer.status_code == 200 and len(answer.json()["predictions"]) == 1000
        assert len(hops) == 1 and hops[0] > predict_route.INLINE_BODY_BYTES
        create(client, name="wide", classes=list(range(40)))  # 780 one-vs-one models
        answer = client.post("/v1/models/wide/predict", json=INSTANCE)
        assert answer.status_code == 200 and answer.json()["predictions"][0]["label"] in range(40)
        assert len(hops) == 2 and hops[1] < 100  # a small body, but a large score: a thread
        hops.clear()
        live = client.app.state.components.models.get("m")
        answers = []
        with live.lock.write():  # a learner holds the model
            waiting = threading.Thread(
                target=lambda: answers.append(client.post("/v1/models/m/predict", json=INSTANCE))
            )
            waiting.start()
            wait_for(lambda: len(hops) == 1)  # it went to a thread
            other = []
            health = threading.Thread(target=lambda: other.append(client.get("/healthz")))
            health.start()
            health.join(timeout=20)  # the loop is free: another request is answered
            assert [a.status_code for a in other] == [200]
            time.sleep(0.05)
            assert waiting.is_alive() and not answers  # the prediction waits for the learner
        waiting.join(timeout=20)
        assert [a.status_code for a in answers] == [200]
        assert answers[0].json()["predictions"][0]["label"] in (-1, 1)


# -- the Open Inference Protocol's infer ------------------------------------------------------
V2_INFER = "/v2/models/m/infer"


def tensor(data=None, shape=(1, 3), datatype="FP64", **extra) -> dict:
    entry = {"name": "input", "shape": list(shape), "datatype": datatype, **extra}
    if data is not None:
        entry["data"] = data
    return {"inputs": [entry]}


def binary_body(values: np.ndarray, datatype="FP64", **head) -> tuple[bytes, dict]:
    """A body in the binary tensor data extension, and its headers."""
    data = values.astype("<f8" if datatype == "FP64" else "<f4").tobytes()
    parameters = {"binary_data_size": len(data)}
    text = json.dumps(
        {**tensor(shape=values.shape, datatype=datatype, parameters=parameters), **head}
    ).encode()
    return text + data, {"inference-header-content-length": str(len(text))}


def test_v2_infer_is_served_by_the_fast_path_only_when_enabled(pair, monkeypatch):
    served = []
    original = FastPath._infer

    async def spy(self, scope, receive, send, name, version):
        served.append((name, version))
        await original(self, scope, receive, send, name, version)

    monkeypatch.setattr(FastPath, "_infer", spy)
    for client in pair:
        create(client)
        for path in (V2_INFER, "/v2/models/m/versions/0/infer", "/v2/models/m/infer/"):
            client.post(path, json=tensor([1, 2, 3]))
        client.get("/v2/models/m")
    assert served == [("m", None), ("m", "0")]


def test_v2_infer_answers_like_fastapi(pair):
    """Every answer of the route, through the fast path: byte for byte, JSON and binary, each
    validation and error (in V2's form), the version paths, and the same metrics labels."""
    fast, slow = pair
    for client in pair:
        create(client, averaging={"interval": 2}, params={"rank": 2, "seed": 0})
        create(client, name="r", kind="pqr", params={"task": "regression"})
        create(client, name="t", classes=["ham", "spam"])
        create(client, name="d", classes=[0, 1, 2], multiclass="ovr")
        create(client, name="huge", kind="linear-pa", classes=[1 << 70, 1])
        body = {"name": "c1", "kind": "dos", "params": {"rank": 2}}
        assert client.post("/v1/models/m/challengers", json=body).status_code == 201
        examples = [{"x": [1.0, -1.0, 0.5], "label": 1}, {"x": [0.0, 2.0, -1.0], "label": -1}]
        assert client.post("/v1/models/m/feedback", json={"examples": examples}).status_code == 200
    version = fast.get("/v2/models/m").json()["versions"][0]
    rows = np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 0.5], [0.0, 0.0, 0.0]])
    every_binary = {"parameters": {"binary_data_output": True}}
    some_binary = {
        "outputs": [{"name": "score", "parameters": {"binary_data": True}}, {"name": "label"}]
    }
    many = rows[np.arange(1500) % 3]  # over INLINE_BODY_BYTES: answered in a thread
    ok = [
        (V2_INFER, dict(json=tensor([1, 2, 3]))),
        (V2_INFER, dict(json=tensor(rows.tolist(), shape=(3, 3)))),
        (V2_INFER, dict(json=tensor(rows.ravel().tolist(), shape=(3, 3), datatype="FP32"))),
        (V2_INFER, dict(json=tensor([], shape=(0, 3)))),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "id": "request-7", **every_binary})),
        (V2_INFER, dict(json={**tensor(rows.tolist(), shape=(3, 3)), **some_binary})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": {"variant": "averaged"}})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": {"member": "c1"}})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "outputs": [{"name": "probability"}]})),
        (V2_INFER, dict(json=tensor(many.ravel().tolist(), shape=many.shape))),
        (f"/v2/models/m/versions/{version}/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/r/infer", dict(json={**tensor([1, 2, 3]), **every_binary})),
        ("/v2/models/r/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/t/infer", dict(json={**tensor(rows.tolist(), shape=(3, 3)), **every_binary})),
        ("/v2/models/t/infer", dict(json=tensor(rows.tolist(), shape=(3, 3)))),
        ("/v2/models/d/infer", dict(json={**tensor(rows.tolist(), shape=(3, 3)), **every_binary})),
        ("/v2/models/d/infer", dict(json=tensor(rows.tolist(), shape=(3, 3)))),
        ("/v2/models/huge/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/huge/infer", dict(json={**tensor([1, 2, 3]), **every_binary})),
        (f"{V2_INFER}?variant=averaged", dict(json=tensor([1, 2, 3]))),
    ]  # fmt: skip
    for datatype in ("FP64", "FP32"):
        for head in ({}, every_binary, some_binary):
            content, headers = binary_body(rows, datatype, **head)
            ok.append((V2_INFER, dict(content=content, headers=headers)))
    content, headers = binary_body(many)
    ok.append((V2_INFER, dict(content=content, headers=headers)))
    for path, kwargs in ok:
        assert same(fast, slow, "POST", path, **kwargs)[0] == 200, (path, kwargs)
    nan, nan_headers = binary_body(np.array([[np.nan, 0.0, 1.0]]))
    short, short_headers = binary_body(rows)
    wrong_size = json.dumps(tensor(shape=(1, 3), parameters={"binary_data_size": 8})).encode()
    wrong_size_headers = {HEADER_LENGTH: str(len(wrong_size))}
    refused = [
        (V2_INFER, dict(content=b'{"inputs": [', headers=JSON)),
        (V2_INFER, dict(content=b"", headers=JSON)),
        (V2_INFER, dict(content=b"[" * 10_000 + b"]" * 10_000, headers=JSON)),
        (V2_INFER, dict(json=[1, 2])),
        (V2_INFER, dict(json={})),
        (V2_INFER, dict(json={"inputs": [tensor([1, 2, 3])["inputs"][0]] * 2})),
        (V2_INFER, dict(json=tensor([1, 2, 3], shape=(1, 4)))),
        (V2_INFER, dict(json=tensor([1, 2, 3], shape=(True, 3)))),
        (V2_INFER, dict(json=tensor([1, 2, 3], datatype="INT8"))),
        (V2_INFER, dict(json=tensor(["1", 2, 3]))),
        (V2_INFER, dict(json=tensor([1, 2]))),
        (V2_INFER, dict(json=tensor([[1, 2], [3, 4, 5]], shape=(2, 3)))),
        (V2_INFER, dict(json=tensor([1.0, 2.0, 1e39], datatype="FP32"))),
        (V2_INFER, dict(json=tensor("never read", shape=(10_001, 3)))),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": {"variant": "best"}})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": {"member": 5}})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": {"member": "nope"}})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "parameters": [1]})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "outputs": [{"name": "nope"}]})),
        (V2_INFER, dict(json={**tensor([1, 2, 3]), "outputs": "label"})),
        (V2_INFER, dict(json={**tensor([1]), "outputs": [{"name": "label", "parameters": 1}]})),
        (V2_INFER, dict(content=nan, headers=nan_headers)),
        (V2_INFER, dict(content=short[:-1], headers=short_headers)),
        (V2_INFER, dict(content=wrong_size + bytes(24), headers=wrong_size_headers)),
        (V2_INFER, dict(json=tensor([1, 2, 3]), headers={HEADER_LENGTH: "12a"})),
        (V2_INFER, dict(json=tensor([1, 2, 3]), headers={HEADER_LENGTH: "99999"})),
        (V2_INFER, dict(json=tensor([1, 2, 3]), headers={HEADER_LENGTH: "9" * 5000})),
        ("/v2/models/m/versions/99/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/none/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/none/versions/1/infer", dict(content=b"{", headers=JSON)),
        ("/v2/models/m/infer/", dict(json=tensor([1, 2, 3]))),
        ("/v2/models//infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/m/versions//infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/m/versions/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/m/versions/1/2/infer", dict(json=tensor([1, 2, 3]))),
        ("/v2/models/m%2Fx/infer", dict(json=tensor([1, 2, 3]))),
    ]  # fmt: skip
    for path, kwargs in refused:
        status, text, _ = same(fast, slow, "POST", path, **kwargs)
        assert status >= 300 and status != 500, (path, status, text)
        if status >= 400:
            assert set(json.loads(text)) == {"error", "code"}, (path, text)  # V2's form
    assert same(fast, slow, "GET", V2_INFER)[0] == 405
    assert same(fast, slow, "GET", "/v2/models/m")[0] == 200  # the same version and members
    assert request_lines(fast) == request_lines(slow)
    lines = "".join(request_lines(fast))
    assert 'endpoint="/v2/models/{name}/infer"' in lines
    assert 'endpoint="/v2/models/{name}/versions/{version}/infer"' in lines


def test_v2_auth_answers_like_fastapi(tmp_path):
    fast, slow = make_clients(tmp_path, write_keys=["w1"], read_keys=["r1"])
    with fast, slow:
        for client in (fast, slow):
            create_body = {"name": "m", "kind": "dos", "input": {"n_features": 3}}
            response = client.post(
                "/v1/models", json=create_body, headers={"authorization": "Bearer w1"}
            )
            assert response.status_code == 201
        statuses = set()
        for key in (None, "Bearer r1", "Bearer w1", "Bearer nope", "Basic r1", "Bearer"):
            headers = {} if key is None else {"authorization": key}
            for path in (V2_INFER, "/v2/models/m/versions/0/infer", "/v2/models/none/infer"):
                answer = same(fast, slow, "POST", path, json=tensor([1, 2, 3]), headers=headers)
                statuses.add(answer[0])
                # the key is checked before the body is read
                bad = same(fast, slow, "POST", path, content=b"{", headers=headers | JSON)
                assert (bad[0] == 422) == (answer[0] in (200, 404))
        assert statuses == {200, 401, 403, 404}
        answer = same(fast, slow, "POST", V2_INFER, json=tensor([1, 2, 3]))
        assert answer[0] == 401 and answer[2]["www-authenticate"] == "Bearer"
        assert set(json.loads(answer[1])) == {"error", "code"}


def test_v2_oversized_bodies_and_unexpected_errors_answer_like_fastapi(tmp_path, monkeypatch):
    fast, slow = make_clients(tmp_path, max_body_bytes=300)
    with fast, slow:
        for client in (fast, slow):
            create(client)

        def chunks():
            yield b'{"inputs": [{"name": "input", "shape": [40, 3], "datatype": "FP64", "data": ['
            for _ in range(39):
                yield b"1.0, 2.0, 3.0, "
            yield b"1.0, 2.0, 3.0]}]}"

        answer = same(fast, slow, "POST", V2_INFER, content=chunks, headers=JSON)
        assert answer[0] == 413 and json.loads(answer[1])["code"] == "payload_too_large"

        def broken(*args):
            raise RuntimeError("a bug")

        monkeypatch.setattr(inference, "_response", broken)
        answer = same(fast, slow, "POST", V2_INFER, json=tensor([1, 2, 3]))
        assert answer[0] == 500 and json.loads(answer[1]) == {
            "error": "internal server error",
            "code": "internal_error",
        }
        assert request_lines(fast) == request_lines(slow)


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_small_infer_is_answered_on_the_loop_unless_a_learner_holds_the_model(
    tmp_path, monkeypatch, fast_path
):
    """As /v1 predict: no thread hop for a small tensor of a free model; a large body, or a
    model that a learner holds, goes to a handler thread, the event loop serving meanwhile."""
    hops = []
    original = inference.run_sync

    async def counting(executor, function, *args):
        hops.append(next(len(a) for a in args if isinstance(a, bytes)))  # (the body)
        return await original(executor, function, *args)

    monkeypatch.setattr(inference, "run_sync", counting)
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600, fast_path=fast_path)
    with TestClient(create_app(settings)) as client:
        create(client)
        assert client.post(V2_INFER, json=tensor([1, 2, 3])).status_code == 200
        content, headers = binary_body(np.ones((2, 3)))
        assert client.post(V2_INFER, content=content, headers=headers).status_code == 200
        assert hops == []  # answered on the event loop
        answer = client.post(V2_INFER, json=tensor([1.0, 2.0, 3.0] * 2000, shape=(2000, 3)))
        assert answer.status_code == 200 and answer.json()["outputs"][0]["shape"] == [2000]
        assert len(hops) == 1 and hops[0] > inference.INLINE_BODY_BYTES
        create(client, name="wide", classes=list(range(40)))  # 780 one-vs-one models
        answer = client.post("/v2/models/wide/infer", json=tensor([1, 2, 3]))
        assert answer.status_code == 200 and answer.json()["outputs"][0]["data"][0] in range(40)
        assert len(hops) == 2 and hops[1] < 200  # a small body, but a large score: a thread
        hops.clear()
        live = client.app.state.components.models.get("m")
        answers = []
        with live.lock.write():  # a learner holds the model
            waiting = threading.Thread(
                target=lambda: answers.append(client.post(V2_INFER, json=tensor([1, 2, 3])))
            )
            waiting.start()
            wait_for(lambda: len(hops) == 1)  # it went to a thread
            other = []
            health = threading.Thread(target=lambda: other.append(client.get("/healthz")))
            health.start()
            health.join(timeout=20)  # the loop is free: another request is answered
            assert [a.status_code for a in other] == [200]
            time.sleep(0.05)
            assert waiting.is_alive() and not answers  # the prediction waits for the learner
        waiting.join(timeout=20)
        assert [a.status_code for a in answers] == [200]
        assert answers[0].json()["outputs"][0]["data"][0] in (-1, 1)
