"""Labelled feedback: JSON, NDJSON or svmlight bodies, learned in order by the one writer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from core.datasets import parse_svmlight
from core.features import as_batch
from service.deps import App, Components, Write
from service.errors import APIError
from service.registry import LiveModel, instance_row
from service.schemas import Example, FeedbackRequest, FeedbackResponse
from service.threads import run_sync

router = APIRouter(prefix="/v1/models", tags=["feedback"])

JSON_TYPES = {"", "application/json"}
NDJSON_TYPES = {"application/x-ndjson", "application/ndjson", "application/jsonl"}
SVMLIGHT_TYPES = {"text/x-svmlight", "application/x-svmlight", "text/plain"}

_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": "JSON (`application/json`, per-example results), NDJSON "
        "(`application/x-ndjson`, one example object per line) or svmlight text "
        "(`text/x-svmlight`: `label index:value ...` with 1-based indices and numeric labels). "
        "The whole body is validated before anything is learned.",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/FeedbackRequest"}},
            "application/x-ndjson": {
                "schema": {"type": "string"},
                "example": '{"x": [0.0, 1.0], "label": 1}\n',
            },
            "text/x-svmlight": {"schema": {"type": "string"}, "example": "+1 3:0.5 17:1\n"},
        },
    }
}


@router.post(
    "/{name}/feedback",
    response_model=FeedbackResponse,
    dependencies=[Write],
    openapi_extra=_BODY_DOC,
)
async def feedback(name: str, request: Request, app: App) -> JSONResponse:
    """Learn from labelled examples (scored before learning: progressive validation).

    Each request's examples are appended to the durable feedback log before they are learned
    and before this answers: a 2xx means durable (a crash loses nothing acknowledged); 503
    `log_unavailable` means nothing was learned. On an `api` replica the examples are only
    logged (`logged`), and the learner process learns them."""
    live = app.registry.get(name)
    body = await request.body()
    handler = handler_for(request.headers.get("content-type", ""))
    # built here and already valid: returned as is, not re-validated
    return JSONResponse(await run_sync(app.executor, handler, app, live, body))


def handler_for(content_type: str):
    """The handler of a body with this Content-Type header value (415 if none)."""
    content_type = content_type.split(";")[0].strip().lower()
    if content_type in JSON_TYPES:
        return _json_feedback
    if content_type in NDJSON_TYPES:
        return _ndjson_feedback
    if content_type in SVMLIGHT_TYPES:
        return _svmlight_feedback
    raise APIError(
        415,
        "unsupported_media_type",
        f"unsupported Content-Type {content_type!r}; "
        "use application/json, application/x-ndjson or text/x-svmlight",
    )


def _json_feedback(
    app: Components, live: LiveModel, body: bytes, deferred: list | None = None
) -> dict:
    try:
        request = FeedbackRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError(error.errors()) from None
    return _apply_examples(app, live, request.examples, True, deferred)


def _ndjson_feedback(
    app: Components, live: LiveModel, body: bytes, deferred: list | None = None
) -> dict:
    examples = []
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            examples.append(Example.model_validate_json(line))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise APIError(
                422,
                "invalid_input",
                f"line {number}: {where + ': ' if where else ''}{first['msg']}",
                {"line": number},
            ) from None
    if not examples:
        raise APIError(422, "invalid_input", "the body holds no example")
    return _apply_examples(app, live, examples, False, deferred, where="line")


def _apply_examples(
    app: Components,
    live: LiveModel,
    examples: list[Example],
    with_results: bool,
    deferred: list | None,
    where: str = "examples",
) -> dict:
    if with_results and len(examples) > app.settings.max_batch:
        raise APIError(
            413,
            "batch_too_large",
            f"at most {app.settings.max_batch} examples per "
            "JSON request; use NDJSON or svmlight for bulk feedback",
        )
    rows: list = [None] * len(examples)
    targets = np.empty(len(examples), dtype=np.float64 if live.regression else np.int64)
    by_id: list[tuple[int, str]] = []
    for i, example in enumerate(examples):
        field = f"{where}.{i}" if where == "examples" else f"line {i + 1}"
        targets[i] = live.target(example.label, f"{field}.label")
        if example.prediction_id is not None:
            by_id.append((i, example.prediction_id))
            continue
        try:
            rows[i] = instance_row(example, live.n_features)
        except ValueError as error:
            raise APIError(422, "invalid_input", f"{field}: {error}", {"field": field}) from None
    ids = [pid for _, pid in by_id]
    if by_id:
        try:
            taken = app.cache.take_entries(ids, live.uid)
        except APIError as error:
            app.metrics.pending_misses.labels(error.code.removesuffix("_prediction_id")).inc()
            raise
        for (i, _), entry in zip(by_id, taken, strict=True):
            rows[i] = entry.row
    try:
        result = live.learn_rows(rows, targets, deferred)
    except APIError as error:
        if by_id and not error.applied:  # refused before anything changed (an overflowing
            app.cache.give_back(ids, taken)  # norm, an unwritable log): ids stay answerable
        raise
    return _response(app, live, result, len(rows), with_results)


def _svmlight_feedback(
    app: Components, live: LiveModel, body: bytes, deferred: list | None = None
) -> dict:
    try:
        X, y = parse_svmlight(body, n_features=live.n_features, source="body")
        batch = as_batch(X, live.n_features)
    except ValueError as error:
        raise APIError(422, "invalid_input", str(error)) from None
    if batch.n_rows == 0:
        raise APIError(422, "invalid_input", "the body holds no example")
    if live.regression:
        return _response(app, live, live.learn_batch(batch, y, deferred), batch.n_rows, False)
    labels = np.full(y.shape[0], -1, dtype=np.int64)
    for value in np.unique(y):
        matches = [k for k, c in enumerate(live.classes) if not isinstance(c, str) and c == value]
        if not matches:
            row = int(np.flatnonzero(y == value)[0])
            raise APIError(
                422,
                "unknown_label",
                f"row {row}: unknown label {value:g}; the model's classes are {live.classes}",
                {"row": row},
            )
        labels[y == value] = matches[0]
    result = live.learn_batch(batch, labels, deferred)
    return _response(app, live, result, batch.n_rows, with_results=False)


def _response(app: Components, live: LiveModel, result: dict, n: int, with_results: bool) -> dict:
    if "logged" in result:  # api role: durable in the log, learned by the learner
        app.metrics.learned(live.name, n, None)
        return {
            "model": live.name,
            "version": result["version"],
            "learned": 0,
            "aggressive": 0,
            "results": None,
            "logged": n,
        }
    app.metrics.learned(live.name, n, result["n_aggressive"])
    response = {
        "model": live.name,
        "version": result["version"],
        "learned": n,
        "aggressive": result["n_aggressive"],
        "results": None,
    }
    if with_results:
        response["results"] = [
            {"predicted": live.predicted_label(p), "loss": float(loss), "aggressive": bool(flag)}
            for p, loss, flag in zip(
                result["predicted"], result["losses"], result["aggressive"], strict=True
            )
        ]
    return response


def handle_group(
    app: Components, requests: list[tuple[Callable, LiveModel, bytes]], learned: Callable
) -> list[tuple[bool, Any]]:
    """Handle small feedback requests, in their order, in one trip to a handler thread:
    ``requests`` are ``(handler, model, body)``; the answer is one ``(True, response)`` or
    ``(False, exception)`` per request.

    Each request is parsed, validated, logged and learned exactly as alone (its own log
    record, version, results and errors), except that the log records of the group are made
    durable together, by one fsync after the last of them (group commit), before any
    request is answered. ``learned()`` is called between the two, so that the next group
    can be learned during this fsync. A failed fsync answers 503 ``log_unavailable`` to
    every request of the group that it was to make durable."""
    outcomes: list[tuple[bool, Any]] = []
    pending: list[list] = []
    try:
        for handler, live, body in requests:
            deferred: list = []
            pending.append(deferred)
            try:
                outcomes.append((True, handler(app, live, body, deferred)))
            except Exception as error:  # the request's own answer (4xx, 503, or a 500)
                outcomes.append((False, error))
    finally:
        learned()
    for k, ((_, live, _), deferred) in enumerate(zip(requests, pending, strict=True)):
        if deferred:
            try:
                live.sync(deferred[-1])  # the first covers the others (one fsync per log)
            except APIError as error:
                outcomes[k] = (False, error)
    return outcomes
