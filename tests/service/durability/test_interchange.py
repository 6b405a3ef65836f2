"""Models as safetensors files: the files this service writes are read by Hugging Face's
own ``safetensors`` package (and the other way round), and a model exported from a running
service and imported again (under another name) predicts bit for bit the same."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from service.durability.interchange import (
    InterchangeError,
    load_model,
    read_tensors,
    write_tensors,
)
from service.main import create_app
from tests.service.conftest import TestClient, create

ROWS = [[1.0, 0.0, 2.0], [0.0, -1.0, 0.5], [2.0, 1.0, 1.0]]


def test_the_safetensors_package_reads_our_files_and_we_read_its():
    tensors = {
        "a": np.arange(6, dtype=np.float64).reshape(2, 3),
        "b": np.array([1, -2], dtype=np.int64),
        "c": np.array([True, False]),
        "d": np.zeros((0, 4), dtype=np.float32),
    }
    ours = write_tensors(tensors, {"format": "x"})
    for name, array in st_load(ours).items():
        assert np.array_equal(array, tensors[name]) and array.dtype == tensors[name].dtype
    theirs, metadata = read_tensors(st_save(tensors, metadata={"k": "v"}))
    assert metadata == {"k": "v"}
    for name, array in theirs.items():
        assert np.array_equal(array, tensors[name]) and array.dtype == tensors[name].dtype


def test_bad_files_are_refused():
    for data in (b"", b"\x10\x00\x00\x00\x00\x00\x00\x00{", st_save({"a": np.zeros(2)})):
        with pytest.raises(InterchangeError):
            load_model(data)


@pytest.mark.parametrize("kind,dtype", [("dos", "float64"), ("dos", "float32"), ("mofm", None)])
def test_export_then_import_predicts_the_same(client, kind, dtype):
    params = {"rank": 2, "seed": 1, "dtype": dtype} if kind == "dos" else {"n_basis": 3}
    extra = {"averaging": {"interval": 2}} if kind == "dos" else {}
    create(client, kind=kind, classes=["a", "b", "c"], params=params, **extra)
    labels = ["a", "b", "c"]
    body = {"examples": [{"x": x, "label": y} for x, y in zip(ROWS, labels, strict=True)]}
    assert client.post("/v1/models/m/feedback", json=body).status_code == 200
    exported = client.get("/v1/models/m/export")
    assert exported.status_code == 200
    assert exported.headers["content-type"] == "application/vnd.safetensors"
    assert set(st_load(exported.content)) == set(read_tensors(exported.content)[0])
    model = json.loads(read_tensors(exported.content)[1]["model"])
    assert model["name"] == "m" and model["version"] == 1 and model["spec"]["kind"] == kind
    headers = {"content-type": "application/vnd.safetensors", "Idempotency-Key": "i1"}
    imported = client.put("/v1/models/copy", content=exported.content, headers=headers)
    assert imported.status_code == 201, imported.text
    assert imported.json()["version"] == 1 and imported.json()["examples_learned"] == 3
    again = client.put("/v1/models/copy", content=exported.content, headers=headers)
    assert again.json() == imported.json() and again.headers["idempotent-replayed"] == "true"
    instances = {"instances": [{"x": x} for x in ROWS]}
    for variant in ("live", "averaged") if kind == "dos" else ("live",):
        original, copy = (
            client.post(f"/v1/models/{n}/predict?variant={variant}", json=instances).json()
            for n in ("m", "copy")
        )
        strip = lambda answer: [{**p, "prediction_id": None} for p in answer["predictions"]]  # noqa: E731
        assert strip(original) == strip(copy)
    assert (
        client.get("/v1/models/copy").json()["metrics"]
        == client.get("/v1/models/m").json()["metrics"]
    )
    bad = client.put(
        "/v1/models/other", content=b"nonsense", headers=headers | {"Idempotency-Key": "i2"}
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"
    exists = client.put("/v1/models/m", content=exported.content)
    assert exists.status_code == 409 and exists.json()["error"]["code"] == "model_exists"


def test_a_model_trained_with_the_library_loads_into_the_service(client):
    """The structure the service builds for a linear-pa create request (time-averaged and
    calibrated by default), trained in-process, written with ``dump_model`` and imported:
    the service predicts what the library model predicts; a mismatch is a clear 422."""
    from core.averaging import Averaged
    from core.calibration import Calibrated
    from core.linear import LinearPA
    from service.durability.interchange import dump_model

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = np.where(X[:, 0] - X[:, 2] > 0, 1, -1)
    model = Averaged(model=Calibrated(model=LinearPA(n_features=3)), interval=100)
    model.learn_many(X, y)
    spec = {"name": "lib", "kind": "linear-pa", "input": {"n_features": 3}}
    spec["averaging"] = {"interval": 100}
    data = dump_model("lib", 0, spec, model.get_state())
    headers = {"content-type": "application/vnd.safetensors"}
    assert client.put("/v1/models/lib", content=data, headers=headers).status_code == 201
    body = {"instances": [{"x": x.tolist()} for x in X[:20]]}
    for variant in ("live", "averaged"):
        served = client.post(f"/v1/models/lib/predict?variant={variant}", json=body).json()
        scorer = model.scorer(variant)
        assert [p["score"] for p in served["predictions"]] == scorer.score_many(X[:20]).tolist()
    plain = dump_model("plain", 0, {**spec, "name": "plain"}, LinearPA(n_features=3).get_state())
    refused = client.put("/v1/models/plain", content=plain, headers=headers)
    assert (
        refused.status_code == 422 and "does not fit its spec" in refused.json()["error"]["message"]
    )


def test_boolean_classes_survive_export_import_and_a_restart(settings):
    """Models of the classes [false, true] (a binary DoS model, whose estimator learns -1 / +1,
    and mofm, whose estimator holds the classes): exported and imported, and restored from
    their snapshots by a new process, they still predict true / false, the same scores."""
    instances = {"instances": [{"x": x} for x in ROWS]}
    labels = [True, False, True]
    body = {"examples": [{"x": x, "label": y} for x, y in zip(ROWS, labels, strict=True)]}
    headers = {"content-type": "application/vnd.safetensors"}
    answers = {}
    with TestClient(create_app(settings)) as client:
        create(client, name="dos", classes=[False, True])
        create(client, name="mofm", kind="mofm", classes=[False, True], params={"n_basis": 2})
        for name in ("dos", "mofm"):
            assert client.post(f"/v1/models/{name}/feedback", json=body).status_code == 200
            exported = client.get(f"/v1/models/{name}/export").content
            copy = f"{name}-copy"
            imported = client.put(f"/v1/models/{copy}", content=exported, headers=headers)
            assert imported.status_code == 201, imported.text
            for each in (name, copy):
                info = client.get(f"/v1/models/{each}").json()
                assert info["classes"] == [False, True] and info["examples_learned"] == 3
                answer = client.post(f"/v1/models/{each}/predict", json=instances).json()
                answers[each] = [(p["label"], p["score"]) for p in answer["predictions"]]
                assert all(type(label) is bool for label, _ in answers[each])
            assert answers[copy] == answers[name]
    with TestClient(create_app(settings)) as client:  # a restart: snapshots and log
        for name, expected in answers.items():
            info = client.get(f"/v1/models/{name}").json()
            assert info["classes"] == [False, True] and info["examples_learned"] == 3
            answer = client.post(f"/v1/models/{name}/predict", json=instances).json()
            assert [(p["label"], p["score"]) for p in answer["predictions"]] == expected
