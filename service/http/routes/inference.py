"""The Open Inference Protocol (KServe V2) REST surface beside ``/v1``, so that clients built
for KServe, Triton and MLServer (``tritonclient.http``, say) can call the models.

- ``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``: server metadata and health;
- ``GET /v2/models/{name}`` (and ``/versions/{version}``): the model's inputs and outputs;
- ``GET /v2/models/{name}/ready``;
- ``POST /v2/models/{name}/infer`` (and ``/versions/{version}/infer``): one input tensor,
  FP32 or FP64 of shape ``[n, n_features]`` (JSON ``data`` flat or nested, or in the binary
  tensor data extension), and the outputs ``label`` (INT64, BYTES for text classes, FP64
  for regression), ``score`` (FP64, ``[n]`` or ``[n, classes]``) and ``probability`` (when
  the model has probabilities), each in JSON or, when asked (``binary_data``), binary. The
  request parameter ``variant`` picks the live or time-averaged model (default: the variant
  that serves), and ``member`` a challenger that scores in the shadow (default: the
  champion).

The version is the model's current one: a request for another version gets 404. Errors are
``{"error": message, "code": code}`` (the protocol's ``error`` string, and our stable code).
Infer is answered by ``serve``, through these routes or the fast path
(``service.http.fastpath``), and as ``/v1`` predict: a small tensor of a free model on the
event loop, anything else in a handler thread.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Awaitable, Callable
from json.encoder import encode_basestring_ascii

import numpy as np
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from core import __version__
from core.features import as_batch
from service.exceptions import InvalidRequest, NotFound, TooLarge
from service.http.bodies import json_document
from service.http.deps import App, Components, Read
from service.http.errors import shown
from service.http.openapi import errors
from service.http.schemas import FiniteFloat, InferenceErrorResponse
from service.http.threads import INLINE_BODY_BYTES, run_sync
from service.model.live import INLINE_WORK, LiveModel
from service.ops import tracing

router = APIRouter(prefix="/v2", tags=["inference (V2)"])

HEADER_LENGTH = "inference-header-content-length"
INPUT_TYPES = {"FP32": "<f4", "FP64": "<f8"}
#: most digits of ``Inference-Header-Content-Length`` (more than any body the service takes)
HEADER_DIGITS = 18
_BYTES = struct.Struct("<I")
#: INT64's range, as Python ints (``np.iinfo``'s ``min`` and ``max`` are computed per call)
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
#: the output datatypes whose flat lists of these exact Python types are answered as they are
_PLAIN = {"FP64": float, "INT64": int}
#: their binary data: little-endian values (struct caches the compiled formats)
_STRUCT = {"FP64": "<{}d", "INT64": "<{}q"}
#: ``json.dumps(..., separators=(",", ":"))``, its encoder made once; a string as it writes it
_encode = json.JSONEncoder(separators=(",", ":")).encode
_quote = encode_basestring_ascii
#: JSON tensor data: numbers only (no strings, no booleans), finite; flat or one list per row
_FLAT = TypeAdapter(list[FiniteFloat])
_ROWS = TypeAdapter(list[list[FiniteFloat]])

#: what the model routes may answer (503: the service is starting)
MODEL_ERRORS = errors(401, 403, 404, 422, 503, model=InferenceErrorResponse)
#: ... and infer (413: more rows than ``MAX_BATCH``, or a body over the limit; 408: a body
#: not received in time)
INFER_ERRORS = errors(401, 403, 404, 408, 413, 422, 503, model=InferenceErrorResponse)
_TENSOR = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0},
            "description": "[n, n_features], n at most `MAX_BATCH`",
        },
        "datatype": {"type": "string", "enum": sorted(INPUT_TYPES)},
        "data": {
            "type": "array",
            "description": "row-major numbers (no strings or booleans), finite and within "
            "the datatype's range: flat, or one list per row",
        },
        "parameters": {
            "type": "object",
            "description": "binary_data_size: the tensor's bytes in the binary part",
        },
    },
}
INFER_BODY = {
    "requestBody": {
        "required": True,
        "description": "The protocol's `$inference_request`: one input tensor `[n, "
        "n_features]`; `outputs` (default: every output, in JSON) with `parameters."
        "binary_data`; `parameters.variant` (`live` or `averaged`; default: the one that serves) "
        "and `parameters.member` (a challenger, in the shadow). With the binary tensor "
        "data extension, the JSON head is followed by the tensors' bytes "
        "(`Inference-Header-Content-Length`: the head's length).",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["inputs"],
                    "properties": {
                        "id": {"type": "string"},
                        "parameters": {"type": "object"},
                        "inputs": {"type": "array", "items": _TENSOR, "minItems": 1, "maxItems": 1},
                        "outputs": {"type": "array", "items": {"type": "object"}},
                    },
                }
            },
        },
    }
}


@router.get("")
def server_metadata() -> dict:
    """The server's name, version and protocol extensions."""
    return {"name": "lorentztron", "version": __version__, "extensions": ["binary_tensor_data"]}


@router.get("/health/live")
def live() -> dict:
    """The process is alive."""
    return {"live": True}


@router.get(
    "/health/ready",
    responses={
        503: {
            "description": "Not ready: the models are being restored or the kernels compiled",
            "content": {
                "application/json": {
                    "schema": {"type": "object", "properties": {"ready": {"const": False}}}
                }
            },
        }
    },
)
def ready(app: App) -> JSONResponse:
    """Ready to serve: models restored and kernels compiled (503 otherwise)."""
    ok = app.warm and app.worker.restored
    return JSONResponse({"ready": ok}, status_code=200 if ok else 503)


def _model(app: Components, name: str, version: str | None = None) -> LiveModel:
    live = app.models.get(name)
    if version is not None and version != str(live.version):
        raise NotFound(
            "model_not_found",
            f"model {name!r} serves version {live.version}, not {version!r}",
        )
    return live


def _label_type(live: LiveModel) -> str:
    """FP64 for regression and ordinal models, INT64 for integer classes that fit it, else
    BYTES (text classes, or integers beyond int64: sent as their decimal text)."""
    if live.family.regression or live.plan.family == "ordinal":
        return "FP64"
    if all(isinstance(c, int) and _INT64_MIN <= c <= _INT64_MAX for c in live.classes):
        return "INT64"
    return "BYTES"


def _per_class(live: LiveModel) -> bool:
    return len(live.classes) > 2


def metadata(live: LiveModel) -> dict:
    """The model's metadata (the protocol's ``$metadata_model_response``)."""
    width = [-1, len(live.classes)] if _per_class(live) else [-1]
    outputs = [
        {"name": "label", "datatype": _label_type(live), "shape": [-1]},
        {"name": "score", "datatype": "FP64", "shape": width},
    ]
    if live.family.probabilistic:
        outputs.append({"name": "probability", "datatype": "FP64", "shape": width})
    return {
        "name": live.name,
        "versions": [str(live.version)],
        "platform": f"lorentztron/{live.spec.kind}",
        "inputs": [{"name": "input", "datatype": "FP64", "shape": [-1, live.n_features]}],
        "outputs": outputs,
        "parameters": {
            "classes": [str(c) for c in live.classes],
            # the members a request's parameter ``member`` may name (the champion first),
            # and the variant that serves by default
            "members": [m.name for m in live.group.members()],
            "variant": live.group.variant,
        },
    }


@router.get("/models/{name}", dependencies=[Read], responses=MODEL_ERRORS)
def model_metadata(name: str, app: App) -> dict:
    """The model's inputs and outputs."""
    return metadata(_model(app, name))


@router.get("/models/{name}/versions/{version}", dependencies=[Read], responses=MODEL_ERRORS)
def model_version_metadata(name: str, version: str, app: App) -> dict:
    """The model's inputs and outputs (its current version only)."""
    return metadata(_model(app, name, version))


@router.get("/models/{name}/ready", dependencies=[Read], responses=MODEL_ERRORS)
def model_ready(name: str, app: App) -> dict:
    """The model serves (404 otherwise)."""
    live = _model(app, name)
    return {"name": live.name, "ready": True}


@router.get("/models/{name}/versions/{version}/ready", dependencies=[Read], responses=MODEL_ERRORS)
def model_version_ready(name: str, version: str, app: App) -> dict:
    """The model serves this version (404 otherwise)."""
    live = _model(app, name, version)
    return {"name": live.name, "ready": True}


@router.post(
    "/models/{name}/infer",
    dependencies=[Read],
    responses=INFER_ERRORS,
    openapi_extra=INFER_BODY,
)
async def infer(name: str, request: Request, app: App) -> Response:
    """Labels, scores and probabilities of a tensor of instances."""
    return response(await serve(app, name, None, request.headers, request.body))


@router.post(
    "/models/{name}/versions/{version}/infer",
    dependencies=[Read],
    responses=INFER_ERRORS,
    openapi_extra=INFER_BODY,
)
async def infer_version(name: str, version: str, request: Request, app: App) -> Response:
    """Labels, scores and probabilities of a tensor of instances (current version only)."""
    return response(await serve(app, name, version, request.headers, request.body))


#: an answer to infer: its body and, for a body in the binary tensor data extension, the
#: length of its JSON head (None: the body is JSON)
Answer = tuple[bytes, int | None]


def response(answer: Answer) -> Response:
    """The HTTP response of an answer (the fast path sends the same bytes and headers)."""
    body, head_length = answer
    if head_length is None:
        return Response(body, media_type="application/json")
    return Response(
        body,
        media_type="application/octet-stream",
        headers={"Inference-Header-Content-Length": str(head_length)},
    )


async def serve(
    app: Components,
    name: str,
    version: str | None,
    headers,
    body: Callable[[], Awaitable[bytes]],
) -> Answer:
    """The answer to an infer request (FastAPI's routes and the fast path).

    As ``/v1`` predict: a small request (``INLINE_BODY_BYTES``, ``INLINE_WORK``) of a model
    that no learner holds or waits for is answered on the event loop; any other in a handler
    thread, in one trip."""
    with tracing.server("POST /v2/models/{name}/infer", headers, model=name):
        data = await body()
        length = headers.get(HEADER_LENGTH)
        if len(data) <= INLINE_BODY_BYTES:
            answer = _answer(app, name, version, data, length, blocking=False)
            if answer is not None:
                return answer
        return await run_sync(app.executor, _answer, app, name, version, data, length)


def _answer(app, name, version, body: bytes, length: str | None, blocking: bool = True):
    """The answer to a request, or None if ``blocking`` is false and its scoring work is not
    small or the model's lock is not free (then nothing was done: the caller asks again in a
    thread)."""
    head, binary = _split(body, length)
    with app.models.use(name) as live:
        _model(app, name, version)
        # the body's bytes bound the scoring work, as for /v1 predict
        if not blocking and len(body) * live.plan.floats > INLINE_WORK * live.n_features:
            return None
        X = _input(head, binary, live.n_features, app.settings.max_batch)
        parameters = _object(head.get("parameters"), "parameters")
        variant = parameters.get("variant")
        if variant is not None and variant not in ("live", "averaged"):
            raise _invalid(f"parameter variant: 'live' or 'averaged', not {shown(variant)}")
        member = parameters.get("member")
        if member is not None and not isinstance(member, str):
            raise _invalid(f"parameter member: a member's name, not {shown(member)}")
        try:
            batch = as_batch(X, live.n_features)
        except ValueError as error:
            raise _invalid(f"input: {error}") from None
        if blocking:
            labels, scores, probabilities = live.predict_batch(batch, variant, member)
        else:
            rows = [batch.row(i) for i in range(batch.n_rows)]
            predicted = live.predict(rows, variant, False, member)
            if predicted is None:
                return None
            labels, scores, probabilities = predicted[3:]
    app.metrics.predicted(name, len(labels))
    outputs = {
        "label": (_label_type(live), labels),
        "score": ("FP64", scores),
    }
    if probabilities and probabilities[0] is not None:  # (the member's family: it may differ)
        outputs["probability"] = ("FP64", probabilities)
    return _response(head, live, outputs)


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest("invalid_input", message)


def _object(value, where: str) -> dict:
    """An optional JSON object of the request (``{}`` when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid(f"{where}: a JSON object")
    return value


def _split(body: bytes, length: str | None) -> tuple[dict, memoryview]:
    """The JSON head of a request and its binary part (the binary data extension)."""
    size = len(body)
    if length is not None:
        # ASCII digits only (str.isdigit also takes "²", which int() refuses), and few enough
        # for int() (which refuses more than 4,300)
        if not (length.isascii() and length.isdigit() and len(length) <= HEADER_DIGITS):
            raise _invalid(f"{HEADER_LENGTH}: {shown(length)} is not a length in bytes")
        size = int(length)
        if size > len(body):
            raise _invalid(f"{HEADER_LENGTH}: {size} is beyond the body's {len(body)} bytes")
    head = json_document(body[:size])
    if not isinstance(head, dict):
        raise _invalid("the request must be a JSON object")
    return head, memoryview(body)[size:]


def _input(head: dict, binary: memoryview, n_features: int, max_batch: int) -> np.ndarray:
    """The one input tensor, as an ``[n, n_features]`` float64 array: its shape checked
    (``n`` at most ``max_batch``) before its data are read."""
    inputs = head.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise _invalid("give exactly one input tensor (inputs: [{name, shape, datatype, data}])")
    tensor = inputs[0]
    datatype, shape = tensor.get("datatype"), tensor.get("shape")
    if not isinstance(datatype, str) or datatype not in INPUT_TYPES:
        raise _invalid(f"input datatype {shown(datatype)}: FP32 or FP64")
    if (
        not isinstance(shape, list)
        or len(shape) != 2
        or not all(type(n) is int and n >= 0 for n in shape)  # (not bool, a subclass of int)
        or shape[1] != n_features
    ):
        raise _invalid(f"input shape {shown(shape)}: [n, {n_features}]")
    if shape[0] > max_batch:
        raise TooLarge("batch_too_large", f"at most {max_batch} instances (shape[0])")
    count = shape[0] * shape[1]
    dtype = np.dtype(INPUT_TYPES[datatype])
    size = _object(tensor.get("parameters"), "inputs.0.parameters").get("binary_data_size")
    if size is not None:
        if type(size) is not int or size != count * dtype.itemsize or size > len(binary):
            raise _invalid(f"binary_data_size {shown(size)} does not match the shape {shape}")
        values = np.frombuffer(binary[:size], dtype=dtype)
    else:
        values = _json_data(tensor.get("data"), shape, datatype)
    return values.astype(np.float64, copy=False).reshape(shape)


def _json_data(data, shape: list[int], datatype: str) -> np.ndarray:
    """A tensor's JSON ``data`` as an array of its ``datatype``: strictly numbers (no strings
    or booleans, as ``/v1`` takes them), finite once in the datatype (FP32's range is
    smaller), flat or one list per row; the count is checked before any value is read."""
    count = shape[0] * shape[1]
    if not isinstance(data, list):
        raise _invalid("input data: a list of numbers, flat or one list per row")
    nested = bool(data) and isinstance(data[0], list)
    if len(data) != (shape[0] if nested else count):
        held = f"{len(data)} {'rows' if nested else 'numbers'}"
        raise _invalid(f"input data holds {held}, its shape {shape}")
    try:
        values = (_ROWS if nested else _FLAT).validate_python(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = "".join(f"[{part}]" for part in first["loc"])
        raise _invalid(f"input data{where}: {first['msg']}") from None
    if nested and any(len(row) != shape[1] for row in values):
        raise _invalid(f"input data: every row holds {shape[1]} numbers")
    if datatype == "FP64":  # (finite values, as given: nothing to overflow)
        return np.array(values, dtype=np.float64).reshape(-1)
    with np.errstate(over="ignore"):
        array = np.array(values, dtype=INPUT_TYPES[datatype]).reshape(-1)
    if not np.isfinite(array).all():  # (finite float64 values beyond FP32's range)
        raise _invalid(f"input data: a value is beyond the range of {datatype}")
    return array


def _response(head: dict, live: LiveModel, outputs: dict) -> Answer:
    """The outputs asked for (all by default), in JSON or binary as asked."""
    asked = head.get("outputs")
    everything_binary = _object(head.get("parameters"), "parameters").get("binary_data_output")
    if asked is None:
        asked = [{"name": name} for name in outputs]
    if not isinstance(asked, list) or not all(isinstance(o, dict) for o in asked):
        raise _invalid("outputs: a list of {name, parameters}")
    # the answer's JSON is written here, as ``json.dumps(answer, separators=(",", ":"))``
    # would write it (tests/service/http/routes/test_inference.py compares them): most of a
    # small request's answer was the encoder's walk over the nested objects
    entries, chunks = [], []
    for output in asked:
        name = output.get("name")
        if not isinstance(name, str) or name not in outputs:
            raise _invalid(f"output {shown(name)}: this model gives {sorted(outputs)}")
        datatype, values = outputs[name]
        parameters = output.get("parameters")
        if parameters is None:
            binary = everything_binary is True
        elif isinstance(parameters, dict):
            binary = parameters.get("binary_data", everything_binary) is True
        else:
            raise _invalid(f"outputs.{name}.parameters: a JSON object")
        if _plain(datatype, values):
            # a flat list of Python floats (FP64) or ints (INT64, within its range): already
            # what the array below would give back, without building it
            shape = f"[{len(values)}]"
            if binary:
                data = struct.pack(_STRUCT[datatype].format(len(values)), *values)
            else:
                text = _numbers(values)
        else:
            array = _array(datatype, values)
            shape = _encode(list(array.shape))
            if binary:
                data = _binary(datatype, array)
            else:
                text = _encode(array.reshape(-1).tolist())
        head_of_entry = f'{{"name":{_quote(name)},"datatype":"{datatype}","shape":{shape},'
        if binary:
            entries.append(f'{head_of_entry}"parameters":{{"binary_data_size":{len(data)}}}}}')
            chunks.append(data)
        else:
            entries.append(f'{head_of_entry}"data":{text}}}')
    identifier = head.get("id")
    text = (
        f'{{"model_name":{_quote(live.name)},"model_version":{_quote(str(live.version))},'
        f'"outputs":[{",".join(entries)}]'
        + (f',"id":{_quote(identifier)}}}' if isinstance(identifier, str) else "}")
    ).encode()
    if not chunks:
        return text, None
    return text + b"".join(chunks), len(text)


def _numbers(values: list) -> str:
    """``json.dumps(values)`` of a list of Python floats or ints (the JSON encoder writes
    ``repr``; ``NaN`` and ``Infinity`` for what is not finite: then through the encoder)."""
    text = ",".join(map(repr, values))
    return f"[{text}]" if "n" not in text else _encode(values)  # ("nan", "inf")


def _plain(datatype: str, values) -> bool:
    """Whether ``values`` is a list of exactly the Python type of ``datatype``'s values."""
    kind = _PLAIN.get(datatype)
    if kind is None or type(values) is not list:
        return False
    for value in values:
        if type(value) is not kind:
            return False
    return True


def _array(datatype: str, values: list) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([str(v) for v in values], dtype=object)
    return np.asarray(values, dtype=np.int64 if datatype == "INT64" else np.float64)


def _binary(datatype: str, array: np.ndarray) -> bytes:
    """The binary data extension's bytes: little endian; BYTES as length-prefixed strings."""
    if datatype == "BYTES":
        return b"".join(
            _BYTES.pack(len(text)) + text for text in (v.encode() for v in array.reshape(-1))
        )
    return array.astype(array.dtype.newbyteorder("<")).tobytes()
