from pathlib import Path

import numpy as np
import pytest

from core.averaging import Averaged
from core.calibration import Calibrated
from core.dos import DoSClassifier
from core.one_vs_one import OneVsOne
from core.registry import state_digest
from service.durability.feedback_log import LogUnavailable
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(params=[True, False], ids=["fast_path", "fastapi_routes"])
def settings(settings, request):
    """Every test here runs with the fast path of service.http.fastpath and without it."""
    return settings.model_copy(update={"fast_path": request.param})


def digest(client, name="m"):
    return state_digest(client.app.state.components.models.get(name).estimator.get_state())


def test_json_feedback_learns_like_the_library(client):
    create(client, params={"rank": 2, "seed": 3})
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    body = {
        "examples": [{"x": x.tolist(), "label": int(label)} for x, label in zip(X, y, strict=True)]
    }
    response = client.post("/v1/models/m/feedback", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["learned"] == 40 and data["version"] == 1
    reference = Averaged(
        model=Calibrated(model=DoSClassifier(n_features=3, rank=2, seed=3)), interval=50_000
    )
    steps = reference.learn_many(X, y)
    assert data["aggressive"] == steps.n_aggressive
    assert [r["loss"] for r in data["results"]] == pytest.approx(steps.losses.tolist(), abs=0)
    assert [r["predicted"] for r in data["results"]] == np.where(steps.scores > 0, 1, -1).tolist()
    assert digest(client) == state_digest(reference.get_state())
    info = client.get("/v1/models/m").json()
    assert info["examples_learned"] == 40 and info["aggressive_updates"] == steps.n_aggressive
    expected_accuracy = np.mean(np.where(steps.scores > 0, 1, -1) == y)
    assert info["metrics"]["accuracy"] == pytest.approx(expected_accuracy)
    assert info["metrics"]["loss"] == pytest.approx(np.mean(steps.losses))
    assert info["metrics"]["loss_kind"] == "hinge"


def test_string_classes_multiclass_and_all_forms(client):
    create(client, classes=["a", "b", "c"], n_features=4)
    body = {
        "examples": [
            {"x": [1, 0, 0, 0], "label": "a"},
            {"indices": [1], "values": [1.0], "label": "b"},
            {"features": {"colour": "red", "size": 2.5}, "label": "c"},
        ]
    }
    response = client.post("/v1/models/m/feedback", json=body)
    assert response.status_code == 200, response.text
    assert [r["predicted"] in ("a", "b", "c") for r in response.json()["results"]] == [True] * 3
    reference = Averaged(
        model=OneVsOne(
            base=Calibrated(model=DoSClassifier(n_features=4, rank=2)), classes=["a", "b", "c"]
        ),
        interval=50_000,
    )
    for example in body["examples"]:
        x = example.get("x") or (example.get("indices"), example.get("values"))
        if "features" in example:
            x = example["features"]
        reference.learn_one(
            x if not isinstance(x, tuple) else tuple(map(list, x)), example["label"]
        )
    assert digest(client) == state_digest(reference.get_state())
    predicted = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 0, 0, 0]}]})
    assert predicted.json()["predictions"][0]["label"] == reference.predict_one(
        np.array([1.0, 0, 0, 0]), variant="live"
    )
    assert len(predicted.json()["predictions"][0]["score"]) == 3


def test_feedback_by_prediction_id(client):
    create(client)
    predictions = client.post(
        "/v1/models/m/predict",
        json={"instances": [{"x": [1.0, 0.0, 2.0]}, {"indices": [2], "values": [3.0]}]},
    ).json()["predictions"]
    ids = [p["prediction_id"] for p in predictions]
    response = client.post(
        "/v1/models/m/feedback",
        json={
            "examples": [
                {"prediction_id": ids[0], "label": 1},
                {"prediction_id": ids[1], "label": -1},
            ]
        },
    )
    assert response.status_code == 200, response.text
    reference = Averaged(
        model=Calibrated(model=DoSClassifier(n_features=3, rank=2)), interval=50_000
    )
    reference.learn_many(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]), [1, -1])
    assert digest(client) == state_digest(reference.get_state())
    # an id is answered once
    again = client.post(
        "/v1/models/m/feedback", json={"examples": [{"prediction_id": ids[0], "label": 1}]}
    )
    assert again.status_code == 422 and again.json()["error"]["code"] == "unknown_prediction_id"
    metrics = client.get("/metrics").text
    assert 'lorentztron_prediction_id_misses_total{reason="unknown"} 1.0' in metrics


def test_prediction_ids_survive_a_refusal_that_applied_nothing(client, monkeypatch):
    """A request refused before anything of it was applied (the log cannot be written: 503;
    an example whose squared norm overflows: 422) gives its prediction ids back, so the
    client can answer them again; once learned they are consumed."""
    create(client)
    live = client.app.state.components.models.get("m")
    [first, second] = client.post(
        "/v1/models/m/predict",
        json={"instances": [{"x": [1.0, 0.0, 2.0]}, {"x": [0.0, 1.0, 0.0]}]},
    ).json()["predictions"]
    body = {"examples": [{"prediction_id": first["prediction_id"], "label": 1}]}

    def broken(model, records, incarnation=None):
        raise LogUnavailable("disk gone")

    with monkeypatch.context() as patch:
        patch.setattr(live.journal.log, "append_many", broken)
        refused = client.post("/v1/models/m/feedback", json=body)
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "log_unavailable"
    overflow = {
        "examples": [
            {"prediction_id": second["prediction_id"], "label": -1},
            {"x": [1e200, 0.0, 0.0], "label": 1},
        ]
    }
    refused = client.post("/v1/models/m/feedback", json=overflow)
    assert refused.status_code == 422 and "overflows" in refused.json()["error"]["message"]
    assert live.champion.counters.examples_learned == 0
    for answer in (body, {"examples": [{"prediction_id": second["prediction_id"], "label": -1}]}):
        assert client.post("/v1/models/m/feedback", json=answer).status_code == 200
    assert live.champion.counters.examples_learned == 2
    again = client.post("/v1/models/m/feedback", json=body)
    assert again.status_code == 422 and again.json()["error"]["code"] == "unknown_prediction_id"


def test_expired_and_duplicate_prediction_ids(client):
    create(client)
    cache = client.app.state.components.cache
    now = [1000.0]
    cache.clock = lambda: now[0]
    pid = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]}).json()[
        "predictions"
    ][0]["prediction_id"]
    twice = client.post(
        "/v1/models/m/feedback",
        json={"examples": [{"prediction_id": pid, "label": 1}, {"prediction_id": pid, "label": 1}]},
    )
    assert twice.json()["error"]["code"] == "duplicate_prediction_id"
    now[0] += cache.ttl + 1
    before = digest(client)
    expired = client.post(
        "/v1/models/m/feedback", json={"examples": [{"prediction_id": pid, "label": 1}]}
    )
    assert expired.status_code == 422
    assert expired.json()["error"]["code"] == "expired_prediction_id"
    assert digest(client) == before
    metrics = client.get("/metrics").text
    assert 'lorentztron_prediction_id_misses_total{reason="expired"} 1.0' in metrics
    assert "lorentztron_prediction_ids_expired_total 1.0" in metrics


def test_expired_ids_are_told_apart_after_the_sweep(settings):
    """An id the worker's sweep has already dropped still answers expired_prediction_id
    (for ``prediction_ttl`` seconds after expiry), not unknown_prediction_id."""
    with TestClient(create_app(settings.model_copy(update={"prediction_ttl": 0.3}))) as client:
        create(client)
        pid = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]})
        pid = pid.json()["predictions"][0]["prediction_id"]
        wait_for(lambda: len(client.app.state.components.cache) == 0)  # swept
        answer = client.post(
            "/v1/models/m/feedback", json={"examples": [{"prediction_id": pid, "label": 1}]}
        )
        assert answer.json()["error"]["code"] == "expired_prediction_id"
        unknown = client.post(
            "/v1/models/m/feedback", json={"examples": [{"prediction_id": "f" * 32, "label": 1}]}
        )
        assert unknown.json()["error"]["code"] == "unknown_prediction_id"


def test_labels_and_values_must_be_numbers_a_float64_holds(client):
    """A regression label too large for a float64, strings and booleans where numbers go:
    422 with a message, nothing learned (they were a 500 or were learned as numbers)."""
    create(client, name="r", kind="pqr", params={"task": "regression"})
    create(client, name="c")
    big = b"1" + b"0" * 400  # an integer no float64 holds
    cases = [
        ("r", "application/json", b'{"examples": [{"x": [1, 2, 3], "label": ' + big + b"}]}"),
        ("r", "application/x-ndjson", b'{"x": [1, 2, 3], "label": ' + big + b"}"),
        ("r", "application/json", b'{"examples": [{"x": [1, 2, 3], "label": 1e400}]}'),
        ("c", "application/json", b'{"examples": [{"x": ["1", "1", "1"], "label": 1}]}'),
        ("c", "application/json", b'{"examples": [{"x": [true, 1, 1], "label": 1}]}'),
        ("c", "application/x-ndjson", b'{"x": ["1", "1", "1"], "label": 1}'),
        ("c", "application/json", b'{"examples": [{"features": {"a": ' + big + b'}, "label": 1}]}'),
    ]
    for name, content_type, body in cases:
        response = client.post(
            f"/v1/models/{name}/feedback", content=body, headers={"content-type": content_type}
        )
        assert response.status_code == 422, (body[:60], response.text)
        assert response.json()["error"]["code"] in ("invalid_input", "invalid_label")
    for name in ("r", "c"):
        assert client.get(f"/v1/models/{name}").json()["examples_learned"] == 0


def test_prediction_ids_of_another_model_are_refused(client):
    create(client, name="a")
    create(client, name="b")
    pid = client.post("/v1/models/a/predict", json={"instances": [{"x": [1, 2, 3]}]}).json()[
        "predictions"
    ][0]["prediction_id"]
    response = client.post(
        "/v1/models/b/feedback", json={"examples": [{"prediction_id": pid, "label": 1}]}
    )
    assert response.json()["error"]["code"] == "unknown_prediction_id"


BAD_BATCHES = [
    ({"x": [1, 2], "label": 1}, 422, "invalid_input", "length 2, expected 3"),
    ({"x": [1, 2, 3], "label": 5}, 422, "unknown_label", "unknown label 5"),
    ({"x": [1, 2, 3], "label": "1"}, 422, "unknown_label", "unknown label '1'"),
    ({"x": [1, 2, 3], "label": True}, 422, "unknown_label", "a boolean is never a number class"),
    ({"indices": [3], "values": [1.0], "label": 1}, 422, "invalid_input", "out of range"),
    ({"indices": [0, 1], "values": [1.0], "label": 1}, 422, "invalid_input", "2 indices"),
    ({"features": {"a": [1]}, "label": 1}, 422, "invalid_input", "features"),
    (
        {"x": [1, 2, 3], "indices": [0], "values": [1.0], "label": 1},
        422,
        "invalid_input",
        "exactly one",
    ),
    ({"prediction_id": "nope", "label": 1}, 422, "unknown_prediction_id", "unknown"),
    ({"x": [1, 2, 3]}, 422, "invalid_input", "label"),
]


@pytest.mark.parametrize("bad,status,code,text", BAD_BATCHES)
def test_a_bad_example_applies_nothing(client, bad, status, code, text):
    create(client)
    client.post("/v1/models/m/feedback", json={"examples": [{"x": [1, 1, 1], "label": 1}]})
    before = digest(client)
    good = [{"x": [0.5, 1, -1], "label": -1}] * 3
    response = client.post("/v1/models/m/feedback", json={"examples": [*good, bad]})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and text in error["message"]
    assert digest(client) == before
    assert client.get("/v1/models/m").json()["version"] == 1


def test_non_finite_and_malformed_json(client):
    create(client)
    before = digest(client)
    for raw, code in (
        (b'{"examples": [{"x": [1, 2, NaN], "label": 1}]}', "invalid_input"),
        (b'{"examples": [{"x": [1, 2, Infinity], "label": 1}]}', "invalid_input"),
        (b'{"examples": [{"x": [1, 2, 1e999], "label": 1}]}', "invalid_input"),
        (b'{"examples": [', "malformed_json"),
        (b"", "malformed_json"),
        (b'{"examples": []}', "invalid_input"),
    ):
        response = client.post(
            "/v1/models/m/feedback", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, raw
        assert response.json()["error"]["code"] == code, (raw, response.json())
    nan = client.post(
        "/v1/models/m/predict",
        content=b'{"instances": [{"x": [NaN, 1, 2]}]}',
        headers={"content-type": "application/json"},
    )
    assert nan.status_code == 422 and nan.json()["error"]["details"][0]["field"].startswith(
        "body.instances.0.x"
    )
    assert digest(client) == before


def test_svmlight_and_ndjson_bulk(client):
    create(client, n_features=4, params={"rank": 2, "seed": 1})
    text = b"+1 1:0.5 4:1\n-1 2:1.5\n# a comment\n\n1 3:-1 1:2\n"
    response = client.post(
        "/v1/models/m/feedback", content=text, headers={"content-type": "text/x-svmlight"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["learned"] == 3 and response.json()["results"] is None
    lines = b'{"x": [1, 0, 0, 2], "label": 1}\n\n{"features": {"k": "v"}, "label": -1}\n'
    response = client.post(
        "/v1/models/m/feedback", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200 and response.json()["learned"] == 2
    reference = Averaged(
        model=Calibrated(model=DoSClassifier(n_features=4, rank=2, seed=1)), interval=50_000
    )
    reference.learn_many(np.array([[0.5, 0, 0, 1], [0, 1.5, 0, 0], [2, 0, -1, 0]]), [1, -1, 1])
    reference.learn_one(np.array([1.0, 0, 0, 2]), 1)
    reference.learn_one({"k": "v"}, -1)
    assert digest(client) == state_digest(reference.get_state())
    before = digest(client)
    for body, ctype, text in (
        (b"+1 1:0.5\n2 1:1\n", "text/x-svmlight", "unknown label 2"),
        (b"+1 1:0.5\n-1 5:1\n", "text/x-svmlight", "exceeds n_features"),
        (b"+1 1:0.5\n-1 0:1\n", "text/x-svmlight", "1-based"),
        (b"+1 1:nan\n", "text/x-svmlight", "not a svmlight row"),
        (b"+1 1:0.5 garbage\n", "text/x-svmlight", "not a svmlight row"),
        (
            b'{"x": [1, 0, 0, 2], "label": 1}\n{"x": [1], "label": 1}\n',
            "application/x-ndjson",
            "line 2",
        ),
        (b'{"x": [1, 0, 0, 2], "label": 1}\nnot json\n', "application/x-ndjson", "line 2"),
        (b"", "application/x-ndjson", "no example"),
    ):
        response = client.post(
            "/v1/models/m/feedback", content=body, headers={"content-type": ctype}
        )
        assert response.status_code == 422, (body, response.text)
        assert text in response.json()["error"]["message"], response.json()
    assert digest(client) == before
    response = client.post(
        "/v1/models/m/feedback", content=b"x", headers={"content-type": "application/xml"}
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_an_index_out_of_range_names_its_first_line_and_index(client):
    """The first offending line and index (1-based, comments and blank lines counted), not
    the body's largest index: a9a.t's first line against n_features=16 was reported as
    index 121, the largest of the 2,000 lines the CLI sent."""
    create(client, n_features=16, params={"rank": 2, "seed": 1})
    before = digest(client)
    body = b"+1 1:1\n# a comment\n\n-1 3:1 17:1 121:1\n+1 500:1\n"
    response = client.post(
        "/v1/models/m/feedback", content=body, headers={"content-type": "text/x-svmlight"}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"] == "body:4: feature index 17 exceeds n_features=16"
    assert error["details"] == {"line": 4, "index": 17, "n_features": 16}
    assert digest(client) == before


def test_oversized_bodies_are_refused(settings):

    from service.main import create_app

    settings = settings.model_copy(update={"max_body_bytes": 1000, "max_batch": 5})
    with TestClient(create_app(settings)) as client:
        create(client)
        big = {"examples": [{"x": [1.0, 2.0, 3.0], "label": 1}] * 100}
        response = client.post("/v1/models/m/feedback", json=big)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"

        def chunks():
            for _ in range(100):
                yield b"+1 1:0.5 2:1\n"

        streamed = client.post(
            "/v1/models/m/feedback", content=chunks(), headers={"content-type": "text/x-svmlight"}
        )
        assert streamed.status_code == 413
        too_many = {"examples": [{"x": [1.0, 2.0, 3.0], "label": 1}] * 6}
        response = client.post("/v1/models/m/feedback", json=too_many)
        assert response.status_code == 413 and response.json()["error"]["code"] == (
            "batch_too_large"
        )
        assert client.get("/v1/models/m").json()["examples_learned"] == 0


def test_unknown_model(client):
    response = client.post("/v1/models/nope/feedback", json={"examples": [{"x": [1], "label": 1}]})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"


def test_deeply_nested_json_is_malformed_json(client):
    """JSON nested deeper than the parser's bound, in every body that holds JSON (create,
    predict, feedback as JSON and as NDJSON): 422 ``malformed_json``, nothing applied."""
    create(client)
    before = digest(client)
    deep = b"[" * 100_000 + b"]" * 100_000
    for path, media, raw in (
        ("/v1/models", "application/json", deep),
        ("/v1/models/m/predict", "application/json", b'{"instances": ' + deep + b"}"),
        ("/v1/models/m/feedback", "application/json", b'{"examples": ' + deep + b"}"),
        ("/v1/models/m/feedback", "application/x-ndjson", b'{"x": ' + deep + b', "label": 1}\n'),
    ):
        response = client.post(path, content=raw, headers={"content-type": media})
        assert response.status_code == 422, (path, media)
        assert response.json()["error"]["code"] == "malformed_json", (path, media, response.text)
    assert digest(client) == before and [
        m["name"] for m in client.get("/v1/models").json()["models"]
    ] == ["m"]


def test_idempotency_keys_are_scoped_per_model(client):
    """A key is one model's: with the same model, another endpoint or body is refused; on
    another model it is another key, applied there. docs/api.md says exactly that."""
    for name in ("a", "b"):
        create(client, name=name)
    key = {"Idempotency-Key": "k-1"}
    body = {"examples": [{"x": [1.0, 2.0, 3.0], "label": 1}]}
    first = client.post("/v1/models/a/feedback", json=body, headers=key)
    assert first.status_code == 200 and first.json()["version"] == 1
    again = client.post("/v1/models/a/feedback", json=body, headers=key)
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    other_body = {"examples": [{"x": [1.0, 2.0, 3.0], "label": -1}]}
    for answer in (
        client.post("/v1/models/a/feedback", json=other_body, headers=key),
        client.post("/v1/models/a/snapshots/0/restore", headers=key),
    ):
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "idempotency_key_reused"
    assert client.get("/v1/models/a").json()["version"] == 1
    elsewhere = client.post("/v1/models/b/feedback", json=body, headers=key)
    assert elsewhere.status_code == 200 and "idempotent-replayed" not in elsewhere.headers
    assert client.get("/v1/models/b").json()["examples_learned"] == 1
    readme = " ".join((ROOT / "docs" / "api.md").read_text().split())
    assert (
        "A key is one model's: sent to the same model with another endpoint or another body, it "
        "is refused (`idempotency_key_reused`); sent to another model, it is another key"
    ) in readme
