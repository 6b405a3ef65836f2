"""Models as safetensors files: the files this service writes are read by Hugging Face's
own ``safetensors`` package (and the other way round), and a model exported from a running
service and imported again (under another name) predicts bit for bit the same."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from core.linear import LinearPA
from core.metrics import ProgressiveValidation
from service.durability.capture import MODEL, PROGRESSIVE, with_service
from service.durability.interchange import (
    InterchangeError,
    dump_model,
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
    exists = client.put(
        "/v1/models/m",
        content=exported.content,
        headers={"content-type": exported.headers["content-type"]},
    )
    assert exists.status_code == 409 and exists.json()["error"]["code"] == "model_exists"


def test_a_model_trained_with_the_library_loads_into_the_service(client):
    """The structure the service builds for a linear-pa create request (time-averaged and
    calibrated by default), trained in-process, written with ``dump_model`` and imported:
    the service predicts what the library model predicts; a mismatch is a clear 422."""
    from core.averaging import Averaged
    from core.calibration import Calibrated

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


# -- files built to attack the import -----------------------------------------------------------
def container(header: dict | bytes, payload: bytes = b"") -> bytes:
    """A safetensors container: ``header`` (JSON, or raw bytes) then ``payload``."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + payload


def rewritten(data: bytes, change) -> bytes:
    """A model file with its header changed in place by ``change(header)`` (the payload
    kept), or replaced by what ``change`` returns."""
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + length])
    return container(change(header) or header, data[8 + length :])


def in_model(change):
    """A header change of the JSON under ``__metadata__["model"]``."""

    def apply(header):
        model = json.loads(header["__metadata__"]["model"])
        change(model)
        header["__metadata__"]["model"] = json.dumps(model)

    return apply


def setting(*path, value):
    """A change of the model JSON that sets ``model[path[0]][path[1]]...`` to ``value``."""

    def change(model):
        for key in path[:-1]:
            model = model[key]
        model[path[-1]] = value

    return in_model(change)


def every_scalar(suffix: str, value):
    """Set every estimator scalar whose name ends with ``suffix``."""

    def change(model):
        for name in model["scalars"]:
            if name.endswith(suffix):
                model["scalars"][name] = value

    return in_model(change)


def in_tensor(name: str, **entry):
    def change(header):
        header[name].update(entry)

    return change


def adding(name: str, **entry):
    """A header change that adds the tensor ``name`` (``entry``: dtype, shape, offsets)."""

    def change(header):
        header[name] = entry

    return change


def offsets_as(kind):
    """The offsets of service.progressive.recent_ given as ``kind`` (str, float)."""

    def change(header):
        entry = header[PROGRESSIVE + "recent_"]
        entry["data_offsets"] = [kind(offset) for offset in entry["data_offsets"]]

    return change


def shape_as_digits(header):
    """The shape of a tensor of one-digit sizes as the string of its digits ("44" for
    [4, 4]): a reader that iterates over it gets the same sizes back."""
    entry = next(
        e
        for n, e in header.items()
        if n != "__metadata__" and e["shape"] and all(0 < size < 10 for size in e["shape"])
    )
    entry["shape"] = "".join(map(str, entry["shape"]))


def overlapping(header):
    """The second tensor (in payload order) starts where the first does."""
    first, second = sorted(
        (e for n, e in header.items() if n != "__metadata__" and e["data_offsets"][1] > 0),
        key=lambda e: e["data_offsets"][0],
    )[:2]
    size = second["data_offsets"][1] - second["data_offsets"][0]
    second["data_offsets"] = [first["data_offsets"][0], first["data_offsets"][0] + size]


def as_bytes(header):
    """service.progressive.recent_ (3 x window float64) read as a U8 array of its bytes."""
    entry = header[PROGRESSIVE + "recent_"]
    entry.update(dtype="U8", shape=[3, 8 * entry["shape"][1]])


def filled_beyond_window(header):
    """More recent examples than the progressive window holds (n larger still)."""
    window = header[PROGRESSIVE + "recent_"]["shape"][1]
    scalars = {PROGRESSIVE + "n": window + 100, PROGRESSIVE + "filled": window + 1}
    in_model(lambda model: model[SERVICE].update(scalars))(header)


SERVICE = "service_scalars"
#: (what, header change): files the import must refuse, each with a 422 and nothing created
BAD_FILES = [
    ("examples_learned a string", setting(SERVICE, MODEL + "examples_learned", value="lots")),
    ("examples_learned negative", setting(SERVICE, MODEL + "examples_learned", value=-7)),
    ("created_at a string", setting(SERVICE, MODEL + "created_at", value="yesterday")),
    ("incarnation unbounded", setting(SERVICE, MODEL + "incarnation", value="i" * 10_000)),
    ("version negative", setting("version", value=-5)),
    ("version 10^30", setting("version", value=10**30)),
    ("version 2^63+5", setting("version", value=2**63 + 5)),
    ("version true", setting("version", value=True)),
    ("version 1e308", setting("version", value=1e308)),
    ("n_seen_ 10^40", every_scalar("n_seen_", 10**40)),
    ("loss_sum NaN", setting(SERVICE, PROGRESSIVE + "loss_sum", value=math.nan)),
    ("correct above n", setting(SERVICE, PROGRESSIVE + "correct", value=10**6)),
    ("filled beyond the window", filled_beyond_window),
    ("progressive window as U8", as_bytes),
    ("an unknown service scalar", setting(SERVICE, "service.model.owner", value="me")),
    ("shape a string", shape_as_digits),
    ("data_offsets overlapping", overlapping),
    ("header nested 100k deep", lambda h: b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("__metadata__ a string", lambda h: {**h, "__metadata__": "model"}),
    ("__metadata__ a list", lambda h: {**h, "__metadata__": ["model"]}),
    ("data_offsets strings", offsets_as(str)),
    ("data_offsets floats", offsets_as(float)),
    ("shape [2^32, 2^32]", adding("x", dtype="F64", shape=[2**32, 2**32], data_offsets=[0, 0])),
    ("shape [1e300]", adding("x", dtype="F64", shape=[1e300], data_offsets=[0, 0])),
    ("shape [-2, -4]", adding("x", dtype="U8", shape=[-2, -4], data_offsets=[0, 8])),
    ("dtype unknown", in_tensor(PROGRESSIVE + "recent_", dtype="F128")),
    ("spec a string", setting("spec", value="dos")),
    ("spec a list", setting("spec", value=["dos"])),
    ("spec null", setting("spec", value=None)),
    ("spec not a create request", setting("spec", "input", value={"n_features": 0})),
]


def model_file() -> bytes:
    """A valid model file: a linear model with counters and progressive metrics."""
    progressive = ProgressiveValidation(window=4, loss="hinge")
    progressive.update([True, False, True, True, False], [0.0, 1.5, 0.0, 0.0, 2.0])
    counters = {"created_at": 1.7e9, "incarnation": "abc", "examples_learned": 5}
    service = {PROGRESSIVE: progressive.get_state(), MODEL: {"scalars": counters}}
    state = with_service(LinearPA(n_features=3).get_state(), service)
    spec = {"name": "m", "kind": "linear-pa", "input": {"n_features": 3}}
    return dump_model("m", 5, spec, state)


def test_a_valid_file_loads():
    info, state = load_model(model_file())
    assert info["version"] == 5 and info["spec"]["kind"] == "linear-pa"
    assert state["service"]["scalars"][MODEL + "examples_learned"] == 5


@pytest.mark.parametrize("what,change", BAD_FILES, ids=[what for what, _ in BAD_FILES])
def test_a_file_that_breaks_the_schema_is_refused(what, change):
    with pytest.raises(InterchangeError):
        load_model(rewritten(model_file(), change))


def test_the_import_refuses_every_bad_file_and_creates_nothing(client, settings):
    """Each file of ``BAD_FILES``, exported from a running model and tampered with: a 422
    (``invalid_input``), no model, no file written (a version of 1e308 or 2^63+5 never
    reaches the file system), and every other endpoint still answers."""
    create(client, kind="linear-pa", classes=["a", "b", "c"])
    body = {"examples": [{"x": x, "label": y} for x, y in zip(ROWS, "abc", strict=True)]}
    assert client.post("/v1/models/m/feedback", json=body).status_code == 200
    exported = client.get("/v1/models/m/export").content
    headers = {"content-type": "application/vnd.safetensors"}
    assert client.put("/v1/models/fine", content=exported, headers=headers).status_code == 201
    for what, change in BAD_FILES:
        answer = client.put("/v1/models/bad", content=rewritten(exported, change), headers=headers)
        assert answer.status_code == 422, (what, answer.text)
        assert answer.json()["error"]["code"] == "invalid_input", what
        assert not (settings.snapshot_dir / "bad").exists(), what
        assert client.get("/v1/models/bad").status_code == 404, what
    listed = client.get("/v1/models")
    assert listed.status_code == 200
    assert [m["name"] for m in listed.json()["models"]] == ["fine", "m"]
    assert client.post("/v1/models/fine/feedback", json=body).json()["version"] == 2


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
