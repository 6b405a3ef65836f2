"""The Open Inference Protocol (KServe V2) surface, called by the real V2 client of
Triton (``tritonclient.http``, from PyPI) against a real server: health, metadata, model
readiness and inference with JSON and binary tensors, whose answers equal ``/v1``'s."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from service.config import Settings
from service.main import create_app
from tests.service.conftest import wait_for
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
        import httpx

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
    import httpx

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
