"""The Open Inference Protocol (KServe V2) surface, called by the real V2 client of
Triton (``tritonclient.http``, from PyPI) against a real server: health, metadata, model
readiness and inference with JSON and binary tensors, whose answers equal ``/v1``'s; and
hostile requests (lengths, shapes and data that are not what they say, deep JSON, more rows
than ``MAX_BATCH``) refused with a 4xx in the protocol's form, never a 500."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from service.config import Settings
from service.http.routes import inference
from service.http.routes.inference import HEADER_LENGTH
from service.main import create_app
from tests.service.conftest import TestClient, wait_for
from tests.service.test_end_to_end import ServerThread

ROWS = np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 0.5], [2.0, 1.0, 1.0], [-1.0, 0.5, 0.0]])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("v2") / "snapshots",
        snapshot_interval=3600,
        read_keys=["r"],
        write_keys=["w"],
    )
    with ServerThread(create_app(settings)) as running:
        write = {"Authorization": "Bearer w"}
        for name, classes, extra in (
            ("binary", ["ham", "spam"], {}),
            ("digits", [0, 1, 2], {"multiclass": "ovr"}),
        ):
            spec = {
                "name": name,
                "kind": "dos",
                "params": {"rank": 2, "seed": 1},
                "input": {"n_features": 3},
                "classes": classes,
                "averaging": {"interval": 2},
                **extra,
            }
            assert (
                httpx.post(f"{running.url}/v1/models", json=spec, headers=write).status_code == 201
            )
            labels = [classes[i % len(classes)] for i in range(len(ROWS))]
            body = {
                "examples": [
                    {"x": x.tolist(), "label": y} for x, y in zip(ROWS, labels, strict=True)
                ]
            }
            httpx.post(f"{running.url}/v1/models/{name}/feedback", json=body, headers=write)
        yield running.url


def client_of(url: str) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(url.removeprefix("http://"))


#: (tritonclient adds its own headers to the dict it is given: pass copies)
HEADERS = {"Authorization": "Bearer r"}


def v1_predictions(url: str, name: str, variant: str = "live") -> list[dict]:
    body = {"instances": [{"x": x.tolist()} for x in ROWS]}
    answer = httpx.post(
        f"{url}/v1/models/{name}/predict?variant={variant}", json=body, headers=HEADERS
    )
    return answer.json()["predictions"]


def test_health_and_metadata(server):
    client = client_of(server)
    assert client.is_server_live()
    wait_for(client.is_server_ready, timeout=120)  # (the kernels compile after the start)
    assert client.get_server_metadata()["name"] == "lorentztron"
    assert client.is_model_ready("binary", headers=HEADERS)
    assert not client.is_model_ready("missing", headers=HEADERS)
    meta = client.get_model_metadata("digits", headers=HEADERS)
    assert meta["inputs"] == [{"name": "input", "datatype": "FP64", "shape": [-1, 3]}]
    assert [o["name"] for o in meta["outputs"]] == ["label", "score", "probability"]
    assert meta["outputs"][0]["datatype"] == "INT64" and meta["outputs"][1]["shape"] == [-1, 3]
    with pytest.raises(InferenceServerException, match="unauthorized|read key"):
        client.get_model_metadata("digits")


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("dtype", ["FP64", "FP32"])
def test_infer_equals_v1(server, binary, dtype):
    client = client_of(server)
    for name, variant in (("binary", "live"), ("digits", "averaged")):
        values = ROWS.astype(np.float64 if dtype == "FP64" else np.float32)
        tensor = triton.InferInput("input", list(values.shape), dtype)
        tensor.set_data_from_numpy(values, binary_data=binary)
        outputs = [
            triton.InferRequestedOutput(o, binary_data=binary)
            for o in ("label", "score", "probability")
        ]
        result = client.infer(
            name, [tensor], outputs=outputs, headers=dict(HEADERS), parameters={"variant": variant}
        )
        expected = v1_predictions(server, name, variant)
        labels = result.as_numpy("label").tolist()
        labels = [v.decode() if isinstance(v, bytes) else v for v in labels]
        assert labels == [p["label"] for p in expected]
        if dtype == "FP64":  # FP32 inputs are rounded: close scores, not equal ones
            assert result.as_numpy("score").tolist() == [p["score"] for p in expected]
            assert result.as_numpy("probability").tolist() == [p["probability"] for p in expected]
        else:
            assert np.allclose(result.as_numpy("score"), [p["score"] for p in expected], atol=1e-5)
        assert result.get_response()["model_name"] == name


def test_bad_requests_get_the_protocols_errors(server):
    client = client_of(server)
    tensor = triton.InferInput("input", [2, 4], "FP64")
    tensor.set_data_from_numpy(np.zeros((2, 4)))
    with pytest.raises(InferenceServerException, match=r"shape .*\[n, 3\]"):
        client.infer("binary", [tensor], headers=dict(HEADERS))
    tensor = triton.InferInput("input", [1, 3], "FP64")
    tensor.set_data_from_numpy(np.array([[np.nan, 0.0, 1.0]]))
    with pytest.raises(InferenceServerException, match="not finite"):
        client.infer("binary", [tensor], headers=dict(HEADERS))
    with pytest.raises(InferenceServerException, match="no model named"):
        client.infer("missing", [tensor], headers=dict(HEADERS))


# -- hostile requests: a clear 4xx in the protocol's form, never a 500 ------------------------
MAX_BATCH = 100


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A service with a small ``MAX_BATCH`` and body limit, a model on 3 inputs and one whose
    integer classes do not fit int64."""
    settings = Settings(
        snapshot_dir=tmp_path_factory.mktemp("v2-hostile") / "snapshots",
        snapshot_interval=3600,
        max_batch=MAX_BATCH,
        max_body_bytes=1 << 20,
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        for name, classes in (("m", [0, 1]), ("huge", [1 << 70, 1])):
            spec = {"name": name, "kind": "linear-pa", "input": {"n_features": 3}}
            assert client.post("/v1/models", json={**spec, "classes": classes}).status_code == 201
        examples = [{"x": x.tolist(), "label": i % 2} for i, x in enumerate(ROWS)]
        assert client.post("/v1/models/m/feedback", json={"examples": examples}).status_code == 200
        yield client


def tensor(data=None, shape=(1, 3), datatype="FP64", **extra) -> dict:
    entry = {"name": "input", "shape": list(shape), "datatype": datatype, **extra}
    if data is not None:
        entry["data"] = data
    return {"inputs": [entry]}


def refused(answer, status: int, code: str) -> str:
    """The message of an error answer in the protocol's form (``{"error", "code"}``)."""
    assert answer.status_code == status, answer.text[:300]
    body = answer.json()
    assert set(body) == {"error", "code"} and body["code"] == code, body
    return body["error"]


def infer(client, body=None, content: bytes | None = None, headers=None, name="m"):
    data = content if content is not None else json.dumps(body).encode()
    return client.post(f"/v2/models/{name}/infer", content=data, headers=headers or {})


@pytest.mark.parametrize(
    "body,text",
    [
        (tensor([1, 2, 3], shape=(True, 3)), "shape"),
        (tensor([1, 2, 3], shape=(1.0, 3)), "shape"),
        (tensor([1, 2, 3], shape=(-1, 3)), "shape"),
        (tensor(["1", "2", "3"]), "valid number"),
        (tensor([True, False, True]), "valid number"),
        (tensor(True), "list of numbers"),
        (tensor([[1, 2, 3], ["a", 2, 3]], shape=(2, 3)), "data[1][0]"),
        (tensor([[1, 2], [3, 4, 5]], shape=(2, 3)), "every row"),
        (tensor([1.0, 2.0, 1e39], datatype="FP32"), "range of FP32"),
        (tensor([1, 2, 3], datatype="x" * 100_000), "datatype"),
        (tensor([0] * 100_000, shape=(1, 3)), "holds 100000 numbers"),
    ],
    ids=[
        "bool-in-shape", "float-in-shape", "negative-shape", "strings", "booleans",
        "not-a-list", "string-in-a-row", "ragged-rows", "beyond-fp32", "huge-datatype",
        "more-data-than-shape",
    ],
)  # fmt: skip
def test_bad_tensors_are_422s_in_the_protocols_form(hostile, body, text):
    message = refused(infer(hostile, body), 422, "invalid_input")
    assert text in message and len(message) < 1000  # never the whole input echoed


def test_numbers_beyond_float64_and_deep_json_are_refused(hostile):
    big = b'{"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, '
    assert "data[2]" in refused(
        infer(hostile, content=big + b"9" * 400 + b"]}]}"), 422, "invalid_input"
    )
    deep = b"[" * 100_000 + b"]" * 100_000
    refused(infer(hostile, content=deep), 422, "malformed_json")
    nested = b'{"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": '
    refused(
        infer(hostile, content=nested + b"[" * 50_000 + b"]" * 50_000 + b"}]}"),
        422,
        "malformed_json",
    )


@pytest.mark.parametrize(
    "length",
    [b"\xb2", b"9" * 5000, b"12a", b"-1", b"99999"],
    ids=["superscript-two", "5000-digits", "letters", "negative", "beyond-the-body"],
)
def test_the_header_length_is_ascii_digits_within_the_body(server, length):
    """Over real HTTP: the test client would send "\xb2" (latin-1 "²", which str.isdigit
    takes and int() refuses) as UTF-8."""
    headers = [(HEADER_LENGTH, length), ("Authorization", "Bearer r")]
    answer = httpx.post(
        f"{server}/v2/models/binary/infer", content=json.dumps(tensor([1, 2, 3])), headers=headers
    )
    assert len(refused(answer, 422, "invalid_input")) < 1000


def test_more_rows_than_max_batch_are_refused_from_the_shape(hostile):
    """413 ``batch_too_large`` as /v1 answers it, whatever the data (not even read)."""
    rows = MAX_BATCH + 1
    for body in (
        tensor([0.0] * (rows * 3), shape=(rows, 3)),
        tensor("never read", shape=(10**30, 3)),
        tensor(shape=(rows, 3), parameters={"binary_data_size": rows * 24}),
    ):
        refused(infer(hostile, body), 413, "batch_too_large")
    assert infer(hostile, tensor([0.0] * (MAX_BATCH * 3), shape=(MAX_BATCH, 3))).status_code == 200


def test_a_body_over_the_limit_is_a_413_in_the_protocols_form(hostile):
    answer = infer(hostile, content=b" " * ((1 << 20) + 1))
    refused(answer, 413, "payload_too_large")


def test_integer_classes_beyond_int64_are_bytes(hostile):
    """Labels that INT64 cannot hold go as their decimal text (BYTES), in the metadata too."""
    answer = infer(hostile, tensor([1, 2, 3]), name="huge")
    assert answer.status_code == 200, answer.text
    label = next(o for o in answer.json()["outputs"] if o["name"] == "label")
    assert label["datatype"] == "BYTES" and label["data"][0] in (str(1 << 70), "1")
    metadata = hostile.get("/v2/models/huge").json()
    assert metadata["outputs"][0] == {"name": "label", "datatype": "BYTES", "shape": [-1]}


def test_fp32_json_data_are_read_as_fp32(hostile):
    """The same numbers as FP32 JSON and as FP32 binary data give the same scores."""
    values = np.array([[0.1, 1 / 3, 2.7]])
    as_json = infer(hostile, tensor(values.ravel().tolist(), datatype="FP32")).json()
    head = json.dumps(tensor(shape=(1, 3), datatype="FP32", parameters={"binary_data_size": 12}))
    binary = head.encode() + values.astype("<f4").tobytes()
    as_binary = infer(hostile, content=binary, headers={HEADER_LENGTH: str(len(head))}).json()
    assert as_json["outputs"] == as_binary["outputs"]


def test_an_unexpected_error_is_a_500_in_the_protocols_form(hostile, monkeypatch):
    def broken(live):
        raise RuntimeError("a bug")

    monkeypatch.setattr(inference, "metadata", broken)
    refused(hostile.get("/v2/models/m"), 500, "internal_error")


def test_outputs_from_plain_lists_are_the_bytes_of_the_arrays(hostile):
    """The outputs of flat lists of Python floats and ints skip numpy: the same JSON and
    binary bytes as the same values through numpy (numpy scalars, ints in an FP64 output
    and nested scores take that way)."""
    live = hostile.app.state.components.models.get("m")
    plain = {
        "label": ("INT64", [1, -1, 1 << 62]),
        "score": ("FP64", [0.1, -2.5e300, 1 / 3]),
        "probability": ("FP64", [0.5, 1.0, 0.0]),
    }
    through_numpy = {
        "label": ("INT64", [np.int64(v) for v in plain["label"][1]]),
        "score": ("FP64", [np.float64(v) for v in plain["score"][1]]),
        "probability": ("FP64", np.array(plain["probability"][1])),
    }
    for head in (
        {},
        {"parameters": {"binary_data_output": True}},
        {"outputs": [{"name": "score", "parameters": {"binary_data": True}}, {"name": "label"}]},
    ):
        answer = inference._response(head, live, plain)
        assert answer == inference._response(head, live, through_numpy)
    ints_as_fp64 = inference._response({}, live, {"label": ("FP64", [1, 2.5])})[0]
    assert json.loads(ints_as_fp64)["outputs"][0]["data"] == [1.0, 2.5]
    assert b'"data":[1.0,2.5]' in ints_as_fp64


def reference_answer(head: dict, live, outputs: dict) -> tuple[bytes, int | None]:
    """The protocol's answer as a dict through ``json.dumps`` and numpy: what ``_response``
    writes by hand."""
    asked = head.get("outputs") or [{"name": name} for name in outputs]
    everything_binary = (head.get("parameters") or {}).get("binary_data_output")
    entries, chunks = [], []
    for output in asked:
        datatype, values = outputs[output["name"]]
        if datatype == "BYTES":
            array = np.array([str(v) for v in values], dtype=object)
        else:
            array = np.asarray(values, dtype=np.int64 if datatype == "INT64" else np.float64)
        entry = {"name": output["name"], "datatype": datatype, "shape": list(array.shape)}
        if (output.get("parameters") or {}).get("binary_data", everything_binary) is True:
            if datatype == "BYTES":
                data = b"".join(
                    len(v.encode()).to_bytes(4, "little") + v.encode() for v in array.ravel()
                )
            else:
                data = array.astype(array.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(data)}
            chunks.append(data)
        else:
            entry["data"] = array.reshape(-1).tolist()
        entries.append(entry)
    answer = {"model_name": live.name, "model_version": str(live.version), "outputs": entries}
    if isinstance(head.get("id"), str):
        answer["id"] = head["id"]
    text = json.dumps(answer, separators=(",", ":")).encode()
    return (text + b"".join(chunks), len(text)) if chunks else (text, None)


def test_the_answer_is_json_dumps_of_the_protocols_response(hostile):
    """``_response`` writes the answer's JSON itself: the bytes of ``json.dumps`` of the
    answer as a dict (non-finite scores, nested scores, text labels, any id, binary parts)."""
    live = hostile.app.state.components.models.get("m")
    inf, nan = float("inf"), float("nan")
    cases = [
        {"label": ("INT64", [1, -1, 1 << 62]), "score": ("FP64", [0.1, -2.5e300, 1 / 3])},
        {"label": ("INT64", []), "score": ("FP64", [])},
        {"label": ("FP64", [1, 2.5]), "score": ("FP64", [inf, -inf, nan, 0.0, -0.0])},
        {"label": ("BYTES", ["ham", 'sp\u00e4m "x"\n', 1 << 70]), "score": ("FP64", [1e-310])},
        {"label": ("INT64", [0, 2]), "score": ("FP64", [[0.1, 0.9, 0.0], [nan, 1.0, 2.0]])},
        {"label": ("INT64", [np.int64(3)]), "probability": ("FP64", np.array([0.25]))},
    ]
    heads = [
        {},
        {"id": 'request \u2603 "7"\t'},
        {"id": 7, "parameters": {"binary_data_output": True}},
        {"parameters": {"binary_data_output": True, "variant": "live"}},
    ]
    for outputs in cases:
        names = list(outputs)
        asked = [
            {"outputs": [{"name": names[-1], "parameters": {"binary_data": True}}]},
            {"outputs": [{"name": n, "parameters": {}} for n in reversed(names)]},
        ]
        for head in heads + asked:
            assert inference._response(head, live, outputs) == reference_answer(
                head, live, outputs
            ), (head, outputs)
