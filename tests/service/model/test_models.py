"""The lifecycle of models through ``Models``: deletions made durable before anything is
removed, finished after a failure or a crash, never undone; creation durable before it
serves."""

from __future__ import annotations

import logging
import threading

import pytest

from service.durability.capture import MODEL
from service.durability.local_store import LocalStore
from service.main import create_app
from service.model.kinds import SUBMODEL_OVERHEAD_FLOATS, WINDOW_SLOT_FLOATS
from service.model.spec import spec_from_json, spec_to_json
from tests.service.conftest import TestClient, create, wait_for
from tests.service.durability.test_store import reencoded, setting


def feed(client, n=3):
    examples = [{"x": [float(i), 1.0, -1.0], "label": 1 if i % 2 else -1} for i in range(n)]
    return client.post("/v1/models/m/feedback", json={"examples": examples})


def test_a_deletion_whose_files_cannot_be_removed_is_finished_later(settings, monkeypatch):
    """The tombstone is the commit point: DELETE answers 204 although the store failed to
    remove the files, the model is gone at once, and the next start finishes the deletion
    before restoring anything (the model never comes back)."""
    with TestClient(create_app(settings)) as client:
        create(client)
        assert feed(client).status_code == 200
        store = client.app.state.components.models.store

        def broken(name):
            raise OSError("disk went read-only")

        monkeypatch.setattr(store, "delete", broken)
        assert client.delete("/v1/models/m").status_code == 204
        assert client.get("/v1/models/m").status_code == 404
        assert feed(client).status_code == 404
        assert store.deleting() == ["m"] and (settings.snapshot_dir / "m").exists()
    monkeypatch.undo()
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/models/m").status_code == 404
        assert client.app.state.components.models.store.deleting() == []
        assert not (settings.snapshot_dir / "m").exists()
        assert not (settings.snapshot_dir / ".log" / "m").exists()
        create(client)  # the name is free again, with nothing of the old model
        assert client.get("/v1/models/m").json()["examples_learned"] == 0


def test_a_deletion_that_cannot_start_keeps_the_model_serving(settings, monkeypatch):
    with TestClient(create_app(settings)) as client:
        create(client)
        store = client.app.state.components.models.store

        def broken(name):
            raise OSError("no space left")

        monkeypatch.setattr(store, "mark_deleting", broken)
        refused = client.delete("/v1/models/m")
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "store_unavailable"
        assert feed(client).status_code == 200  # still serving, still durable
    monkeypatch.undo()
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/models/m").json()["examples_learned"] == 3


def test_the_worker_finishes_pending_deletions(settings, monkeypatch):
    settings = settings.model_copy(update={"snapshot_interval": 0.2})
    with TestClient(create_app(settings)) as client:
        create(client)
        store = client.app.state.components.models.store
        original = store.delete
        freed = threading.Event()  # (the files stay busy until the test frees them)

        def flaky(name):
            if not freed.is_set():
                raise OSError("busy")
            original(name)

        monkeypatch.setattr(store, "delete", flaky)
        assert client.delete("/v1/models/m").status_code == 204
        assert store.deleting() == ["m"]
        freed.set()
        wait_for(lambda: store.deleting() == [], timeout=10)
        assert not (settings.snapshot_dir / "m").exists()


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_model_created_again_is_another_model(settings, fast_path):
    """Prediction ids and feedback queues belong to one incarnation of a name."""
    settings = settings.model_copy(update={"fast_path": fast_path})
    with TestClient(create_app(settings)) as client:
        create(client)
        pid = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]})
        pid = pid.json()["predictions"][0]["prediction_id"]
        assert client.delete("/v1/models/m").status_code == 204
        create(client)
        answer = client.post(
            "/v1/models/m/feedback", json={"examples": [{"prediction_id": pid, "label": 1}]}
        )
        assert answer.json()["error"]["code"] == "unknown_prediction_id"
        assert feed(client).json()["version"] == 1


def test_snapshots_from_before_calibration_restore_without_it():
    """A create request kept by an older snapshot (absent fields as null, no calibration)."""
    old = {"name": "m", "kind": "dos", "params": {}, "input": {"n_features": 3, "hashed": None}}
    old |= {"classes": None, "multiclass": "ovo", "averaging": None}
    spec = spec_from_json(old)
    assert spec.calibration == "none" and spec.input.n_features == 3
    assert spec_from_json(spec_to_json(spec)) == spec


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "dos", "params": {"rank": 8}, "averaging": {"interval": 10}},
        {"kind": "linear-pa"},
        {"kind": "dos", "params": {"rank": 8, "dtype": "float32"}},
        {"kind": "linear-pa", "classes": [0, 1, 2, 3]},
        {"kind": "pqr", "params": {"k": 4}},
        {"kind": "mofm", "classes": [0, 1, 2], "params": {"n_basis": 4}},
    ],
)
def test_a_model_holds_what_its_plan_counts(settings, spec):
    """``Plan.nbytes`` (what ``MAX_MODEL_FLOATS`` and ``MAX_TOTAL_BYTES`` count) covers the
    arrays a model holds once it has been snapshotted: its learned arrays and the buffers
    its snapshots are captured into; within the sub-models' allowance for their objects."""
    with TestClient(create_app(settings)) as client:
        kind = spec.pop("kind")
        create(client, kind=kind, n_features=2000, **spec)
        live = client.app.state.components.models.get("m")
        assert client.post("/v1/models/m/snapshots").status_code == 201
        held, plan = live.memory(), live.plan
        copies = 2 if plan.averaging else 1
        objects = 2 * 8 * SUBMODEL_OVERHEAD_FLOATS * plan.submodels * copies
        window = 8 * WINDOW_SLOT_FLOATS * plan.params.get("reservoir_size", 0)
        assert held <= plan.nbytes <= held + objects + window + 4096


def test_the_memory_budget_refuses_a_model_before_building_it(settings):
    """``MAX_TOTAL_BYTES``: a create or an import that would take the models past it is
    refused (409 ``memory_budget_exceeded``) before anything is allocated, and nothing is
    created; a deletion makes room again."""
    spec = {"params": {"rank": 8}, "n_features": 5000}
    with TestClient(create_app(settings)) as client:
        create(client, name="probe", **spec)
        one = client.app.state.components.models.get("probe").plan.nbytes
    budgeted = settings.model_copy(update={"max_total_bytes": 2 * one + one // 2})
    with TestClient(create_app(budgeted)) as client:
        assert client.get("/v1/models").json()["models"][0]["name"] == "probe"
        create(client, name="a", **spec)
        refused = client.post(
            "/v1/models",
            json={"name": "b", "kind": "dos", "params": {"rank": 8}, "input": {"n_features": 5000}},
        )
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "memory_budget_exceeded" and "MAX_TOTAL_BYTES" in error["message"]
        assert error["details"] == {"held": 2 * one, "needed": one, "budget": 2 * one + one // 2}
        exported = client.get("/v1/models/a/export").content
        headers = {"content-type": "application/octet-stream"}
        imported = client.put("/v1/models/c", content=exported, headers=headers)
        assert imported.status_code == 409 and imported.json()["error"]["code"] == (
            "memory_budget_exceeded"
        )
        names = [m["name"] for m in client.get("/v1/models").json()["models"]]
        assert names == ["a", "probe"] and client.get("/v1/models/b").status_code == 404
        assert client.delete("/v1/models/probe").status_code == 204
        create(client, name="b", **spec)


@pytest.mark.parametrize("eager", [100, 0])
def test_the_restore_skips_an_unreadable_model_and_restores_the_others(settings, caplog, eager):
    """At start-up (or at first use: beyond ``eager_restore`` models) a model whose snapshot
    breaks the schema (its service part) or names parameters out of range is left out with
    a logged error; every other model is restored and served, and the list answers."""
    settings = settings.model_copy(update={"eager_restore": eager})
    with TestClient(create_app(settings)) as client:
        for name in ("a", "b", "c"):
            create(client, name=name)
    store = LocalStore(settings.snapshot_dir)
    poisoned = {
        "a": setting("service_scalars", MODEL + "examples_learned", value="lots"),
        "c": setting("spec", "params", value={"rank": 10**9}),
    }
    for name, change in poisoned.items():
        store.save(name, 0, reencoded(store.load(name), change), retention=3)
    caplog.set_level(logging.ERROR, logger="lorentztron")
    with TestClient(create_app(settings)) as client:
        listed = client.get("/v1/models")
        assert listed.status_code == 200
        assert [m["name"] for m in listed.json()["models"]] == ["b"]
        assert client.get("/v1/models/a").status_code == 404
        assert client.get("/v1/models/b").json()["examples_learned"] == 0
        assert "lorentztron_models 1.0" in client.get("/metrics").text
    assert "could not restore model a" in caplog.text
    assert "could not restore model c" in caplog.text


def test_parallel_learning_is_refused_without_learners(client):
    """``parallel`` needs the roles mode (learners over Redis): the all-in-one server refuses
    it with a 422 naming the settings, and creates nothing."""
    body = {
        "name": "p",
        "kind": "dos",
        "params": {"rank": 2},
        "input": {"n_features": 3},
        "parallel": {"learners": 2, "interval": 100},
    }
    refused = client.post("/v1/models", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"]["field"] == "parallel"
    assert "LORENTZTRON_ROLE" in refused.json()["error"]["message"]
    assert client.get("/v1/models/p").status_code == 404
    assert (
        client.post(
            "/v1/models", json={**body, "parallel": {"learners": 0, "interval": 1}}
        ).status_code
        == 422
    )
    assert create(client, "plain")["parallel"] is None
