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

router = APIRouter(prefix="/v1/models", tags=["predict"])

_VARIANT = {
    "name": "variant",
    "in": "query",
    "required": False,
    "description": "live (default) or averaged: the aligned time average of section 3.4",
    "schema": {"type": "string", "enum": ["live", "averaged"], "default": "live"},
}


@router.post(
    "/{name}/predict",
    response_model=PredictResponse,
    dependencies=[Read],
    responses=errors(401, 403, 404, 408, 413, 415, 422),
    openapi_extra={"parameters": [_VARIANT], **json_body(PredictRequest)},
)
async def predict(name: str, request: Request, app: App) -> JSONResponse:
    """Label, score and prediction id per instance, from the live or time-averaged model."""
    answer = await serve(
        app, name, request.query_params.get("variant"), request.headers, request.body
    )
    return JSONResponse(answer)


async def serve(
    app: Components, name: str, variant, headers, body: Callable[[], Awaitable[bytes]]
) -> dict:
    """The answer to a predict request (FastAPI's route and the fast path).

    A small request (body and scoring work, ``INLINE_BODY_BYTES`` and ``INLINE_WORK``)
    whose model no learner holds or waits for is answered on the event loop: its work
    (validation, a score kernel, an id) takes microseconds, a trip to a handler thread and
    back several times that. Any other goes to the thread pool in one trip, so that the loop
    never waits for a lock or a large batch; the response is built there, already valid, so
    it is not validated again."""
    data = await body()
    content_type = headers.get("content-type")
    if len(data) > INLINE_BODY_BYTES:
        return await run_sync(
            app.executor, _parse_and_predict, app, name, variant, content_type, data
        )
    # parsed here once: answered here if the model is free, else in a thread
    variant, request = _parse(variant, content_type, data)
    answer = _predict(app, name, variant, request, data, False)  # not blocking
    if answer is not None:
        return answer
    return await run_sync(app.executor, _predict, app, name, variant, request, data)


def _parse(variant, content_type, data: bytes) -> tuple:
    """The request's variant and body, validated (``InvalidRequest`` otherwise)."""
    return bodies.variant(variant), bodies.predict_request(content_type, data)


def _parse_and_predict(app: Components, name: str, variant, content_type, data: bytes) -> dict:
    return _predict(app, name, *_parse(variant, content_type, data), data)


def _predict(
    app: Components, name: str, variant: str, request, data: bytes, blocking: bool = True
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
        predicted = live.predict(rows, variant, blocking)
        if predicted is None:
            return None
        version, labels, scores, probabilities = predicted
        ids = app.cache.put(live.incarnation, rows)
    app.metrics.predicted(name, len(rows))
    return {
        "model": name,
        "version": version,
        "variant": variant,
        "predictions": [
            {"label": label, "score": score, "probability": probability, "prediction_id": pid}
            for label, score, probability, pid in zip(
                labels, scores, probabilities, ids, strict=True
            )
        ],
    }
