"""Scores for one or many instances."""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.http import bodies
from service.http.deps import App, Components, Read
from service.http.openapi import errors, json_body
from service.http.schemas import PredictRequest, PredictResponse
from service.http.threads import INLINE_BODY_BYTES, run_sync
from service.model.live import INLINE_WORK
from service.ops import tracing

router = APIRouter(prefix="/v1/models", tags=["predict"])

_VARIANT = {
    "name": "variant",
    "in": "query",
    "required": False,
    "description": "live or averaged (the aligned time average of section 3.4); default: the "
    "variant that serves (the model's `variant`; a challenger's live one)",
    "schema": {"type": "string", "enum": ["live", "averaged"]},
}
_MEMBER = {
    "name": "member",
    "in": "query",
    "required": False,
    "description": "a challenger that scores in the shadow (default: the champion); nothing "
    "it answers is learned by it or counted by the comparisons",
    "schema": {"type": "string"},
}


@router.post(
    "/{name}/predict",
    response_model=PredictResponse,
    dependencies=[Read],
    responses=errors(401, 403, 404, 408, 413, 415, 422),
    openapi_extra={"parameters": [_VARIANT, _MEMBER], **json_body(PredictRequest)},
)
async def predict(name: str, request: Request, app: App) -> JSONResponse:
    """Label, score and prediction id per instance, from the live or time-averaged model
    (or a challenger's, in the shadow)."""
    query = request.query_params
    answer = await serve(
        app, name, query.get("variant"), request.headers, request.body, query.get("member")
    )
    return JSONResponse(answer)


async def serve(
    app: Components,
    name: str,
    variant,
    headers,
    body: Callable[[], Awaitable[bytes]],
    member: str | None = None,
) -> dict:
    """The answer to a predict request (FastAPI's route and the fast path).

    A small request (body and scoring work, ``INLINE_BODY_BYTES`` and ``INLINE_WORK``)
    whose model no learner holds or waits for is answered on the event loop: its work
    (validation, a score kernel, an id) takes microseconds, a trip to a handler thread and
    back several times that. Any other goes to the thread pool in one trip, so that the loop
    never waits for a lock or a large batch; the response is built there, already valid, so
    it is not validated again."""
    with tracing.server("POST /v1/models/{name}/predict", headers, model=name):
        return await _serve(app, name, variant, headers, body, member)


async def _serve(app: Components, name: str, variant, headers, body, member) -> dict:
    data = await body()
    content_type = headers.get("content-type")
    member = bodies.member(member)
    if len(data) > INLINE_BODY_BYTES:
        return await run_sync(
            app.executor, _parse_and_predict, app, name, variant, content_type, data, member
        )
    # parsed here once: answered here if the model is free, else in a thread
    variant, request = _parse(variant, content_type, data)
    answer = _predict(app, name, variant, request, data, False, member)  # not blocking
    if answer is not None:
        return answer
    return await run_sync(app.executor, _predict, app, name, variant, request, data, True, member)


def _parse(variant, content_type, data: bytes) -> tuple:
    """The request's variant and body, validated (``InvalidRequest`` otherwise)."""
    return bodies.variant(variant), bodies.predict_request(content_type, data)


def _parse_and_predict(
    app: Components, name: str, variant, content_type, data: bytes, member: str | None
) -> dict:
    return _predict(app, name, *_parse(variant, content_type, data), data, True, member)


def _predict(
    app: Components,
    name: str,
    variant: str | None,
    request,
    data: bytes,
    blocking: bool = True,
    member: str | None = None,
) -> dict | None:
    """The answer to a request parsed from ``data``, or None if ``blocking`` is false and its
    scoring work is not small or the model's lock is not free."""
    with app.models.use(name) as live:
        # the body's bytes times the model's floats per input bound the scoring work (a
        # non-zero takes a few bytes and touches at most that many parameters): a DoS model
        # of rank 16 takes ~600 bytes x 64, a one-vs-one reduction over 40 classes (780
        # binary models) goes to a thread
        if not blocking and len(data) * live.plan.floats > INLINE_WORK * live.n_features:
            return None
        rows = bodies.predict_rows(request, live, app.settings.max_batch)
        predicted = live.predict(rows, variant, blocking, member)
        if predicted is None:
            return None
        version, scored_by, variant, labels, scores, probabilities = predicted
        ids = app.cache.put(live.incarnation, rows)
    app.metrics.predicted(name, len(rows))
    return {
        "model": name,
        "version": version,
        "member": scored_by,
        "variant": variant,
        "predictions": [
            {"label": label, "score": score, "probability": probability, "prediction_id": pid}
            for label, score, probability, pid in zip(
                labels, scores, probabilities, ids, strict=True
            )
        ],
    }
