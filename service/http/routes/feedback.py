"""Labelled feedback: JSON, NDJSON or svmlight bodies, learned in order by the one writer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.durability.idempotency import HEADER, answer_headers, key_of
from service.http.bodies import media_type
from service.http.deps import App, Components, Write
from service.http.openapi import errors, feedback_body
from service.http.schemas import FeedbackResponse
from service.ops import failpoints, tracing

router = APIRouter(prefix="/v1/models", tags=["feedback"])


@router.post(
    "/{name}/feedback",
    response_model=FeedbackResponse,
    dependencies=[Write],
    responses=errors(401, 403, 404, 408, 413, 415, 422, 503),
    openapi_extra=feedback_body(),
)
async def feedback(name: str, request: Request, app: App) -> JSONResponse:
    """Learn from labelled examples (scored before learning: progressive validation).

    Each request's examples are appended to the durable feedback log before they are learned
    and before this answers: a 2xx means durable (a crash loses nothing acknowledged). 503
    `log_unavailable` means not acknowledged: usually nothing was learned (and prediction ids
    named by the request can be answered again), but if the log's fsync failed after the
    append, or a Redis reply was lost, the examples may be learned; treat them as not
    durable, and their prediction ids as used. On an `api` replica the examples are only
    logged (`logged`), and the learner process learns them.

    With an `Idempotency-Key` header, a retry of the same request (same body) within the
    retention window gets the first answer again (header `Idempotent-Replayed: true`) and
    nothing is learned again, across restarts and crashes: safe to retry after a timeout or
    a 503."""
    answer = await serve(app, name, request.headers, request.body)
    return JSONResponse(answer, headers=answer_headers(answer))


async def serve(app: Components, name: str, headers, body: Callable[[], Awaitable[bytes]]) -> dict:
    """The answer to a feedback request (FastAPI's route and the fast path): the model is
    looked up first (an early 404), its body read, then the request goes to the model's
    group of waiting requests (``service.http.grouping``) inside the model, so that a deletion
    waits for it. With an ``Idempotency-Key``, a retry gets the first answer again
    (``service.durability.idempotency``)."""
    with tracing.server("POST /v1/models/{name}/feedback", headers, model=name):
        return await _serve(app, name, headers, body)


async def _serve(app: Components, name: str, headers, body) -> dict:
    app.models.get(name)
    data = await body()
    content_type = headers.get("content-type")
    key = key_of(headers.get(HEADER), "feedback", media_type(content_type), data)
    live = app.models.enter(name)
    try:
        answer = await app.groups.submit(live, content_type, data, key)
    finally:
        app.models.leave(live)
    failpoints.reach("feedback.answer")
    return answer
