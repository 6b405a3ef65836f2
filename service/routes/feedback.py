"""Labelled feedback: JSON, NDJSON or svmlight bodies, learned in order by the one writer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from core.datasets import parse_svmlight
from core.features import CSRBatch, as_batch, batch_from_rows
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
    and before this answers: a 2xx means durable (a crash loses nothing acknowledged). 503
    `log_unavailable` means not acknowledged: usually nothing was learned (and prediction ids
    named by the request can be answered again), but if the log's fsync failed after the
    append, or a Redis reply was lost, the examples may be learned; treat them as not
    durable, and their prediction ids as used. On an `api` replica the examples are only
    logged (`logged`), and the learner process learns them."""
    live = app.registry.get(name)
    body = await request.body()
    handler = handler_for(request.headers.get("content-type", ""))
    # built here and already valid: returned as is, not re-validated
    return JSONResponse(await run_sync(app.executor, handler, app, live, body))


@dataclass(frozen=True)
class Prepared:
    """A feedback request parsed and validated, ready to be learned: its batch and targets
    (class indices or values), and the prediction ids it took from the cache (given back if
    it is refused before anything of it is applied)."""

    batch: CSRBatch
    targets: np.ndarray
    with_results: bool
    ids: list[str] = field(default_factory=list)
    taken: list = field(default_factory=list)

    def refused(self, app: Components, error: BaseException) -> None:
        if self.ids and isinstance(error, APIError) and not error.applied:
            app.cache.give_back(self.ids, self.taken)  # (an overflowing norm, an unwritable
            # file log): the ids stay answerable


@dataclass(frozen=True)
class Handler:
    """The handler of one body format: ``prepare`` parses and validates a body (APIError or
    RequestValidationError if it is not valid, before anything is applied); calling the
    handler prepares, learns and answers one request."""

    prepare: Callable[[Components, LiveModel, bytes], Prepared]

    def __call__(self, app: Components, live: LiveModel, body: bytes) -> dict:
        [(ok, answer)] = handle_group(app, [(self, live, body)], lambda: None)
        if not ok:
            raise answer
        return answer


def handler_for(content_type: str) -> Handler:
    """The handler of a body with this Content-Type header value (415 if none)."""
    content_type = content_type.split(";")[0].strip().lower()
    if content_type in JSON_TYPES:
        return Handler(_prepare_json)
    if content_type in NDJSON_TYPES:
        return Handler(_prepare_ndjson)
    if content_type in SVMLIGHT_TYPES:
        return Handler(_prepare_svmlight)
    raise APIError(
        415,
        "unsupported_media_type",
        f"unsupported Content-Type {content_type!r}; "
        "use application/json, application/x-ndjson or text/x-svmlight",
    )


def _prepare_json(app: Components, live: LiveModel, body: bytes) -> Prepared:
    try:
        request = FeedbackRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError(error.errors()) from None
    return _prepare_examples(app, live, request.examples, True)


def _prepare_ndjson(app: Components, live: LiveModel, body: bytes) -> Prepared:
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
    return _prepare_examples(app, live, examples, False, where="line")


def _prepare_examples(
    app: Components,
    live: LiveModel,
    examples: list[Example],
    with_results: bool,
    where: str = "examples",
) -> Prepared:
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
    ids, taken = [pid for _, pid in by_id], []
    if by_id:
        try:
            taken = app.cache.take(ids, live.uid)
        except APIError as error:
            app.metrics.pending_misses.labels(error.code.removesuffix("_prediction_id")).inc()
            raise
        for (i, _), entry in zip(by_id, taken, strict=True):
            rows[i] = entry.row
    return Prepared(batch_from_rows(rows), targets, with_results, ids, taken)


def _prepare_svmlight(app: Components, live: LiveModel, body: bytes) -> Prepared:
    try:
        X, y = parse_svmlight(body, n_features=live.n_features, source="body")
        batch = as_batch(X, live.n_features)
    except ValueError as error:
        raise APIError(422, "invalid_input", str(error)) from None
    if batch.n_rows == 0:
        raise APIError(422, "invalid_input", "the body holds no example")
    if live.regression:
        return Prepared(batch, y, False)
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
    return Prepared(batch, labels, False)


def _response(app: Components, live: LiveModel, result: dict, prepared: Prepared) -> dict:
    n, with_results = prepared.batch.n_rows, prepared.with_results
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
    app: Components, requests: list[tuple[Handler, LiveModel, bytes]], learned: Callable
) -> list[tuple[bool, Any]]:
    """Handle small feedback requests of one model, in their order, in one trip to a handler
    thread: ``requests`` are ``(handler, model, body)``; the answer is one
    ``(True, response)`` or ``(False, exception)`` per request.

    Each request is parsed and validated alone (its own 4xx), then the valid ones are
    logged and learned by ``LiveModel.learn_group``: their records appended together (one
    write, or one Redis round trip), each learned as alone with its own version, results and
    errors, and made durable by one fsync after the last of them (group commit) before any
    request is answered. ``learned()`` is called between the two, so that the next group
    can be learned during this fsync. A failed fsync answers 503 ``log_unavailable`` to
    every request of the group that it was to make durable."""
    if not requests:
        return []
    outcomes: list[tuple[bool, Any]] = [(False, None)] * len(requests)
    prepared: list[tuple[int, Prepared]] = []
    position = None
    live = requests[0][1]
    try:
        for k, (handler, model, body) in enumerate(requests):
            if model is not live:
                raise RuntimeError("a feedback group holds the requests of one model")
            try:
                prepared.append((k, handler.prepare(app, live, body)))
            except Exception as error:  # the request's own answer (4xx, or a 500)
                outcomes[k] = (False, error)
        results, position = live.learn_group([(p.batch, p.targets) for _, p in prepared])
        for (k, p), result in zip(prepared, results, strict=True):
            if isinstance(result, BaseException):
                p.refused(app, result)
                outcomes[k] = (False, result)
            else:
                outcomes[k] = (True, _response(app, live, result, p))
    finally:
        learned()
    if position is not None:
        try:
            live.sync(position)
        except APIError as error:  # every request whose record was written
            for k, _ in prepared:
                ok, value = outcomes[k]
                if ok or getattr(value, "applied", False):
                    outcomes[k] = (False, error)
    return outcomes
