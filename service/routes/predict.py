"""Scores for one or many instances."""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service import bodies
from service.deps import App, Components, Read
from service.openapi import errors, json_body
from service.schemas import PredictRequest, PredictResponse
from service.threads import run_sync

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
    responses=errors(401, 403, 404, 413, 415, 422),
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
    """The answer to a predict request (FastAPI's route and the fast path)."""
    data = await body()
    # one trip to the thread pool for the whole request (validation, kernels, ids); the
    # response is built there, already valid, so it is not validated again
    return await run_sync(
        app.executor, _predict, app, name, variant, headers.get("content-type"), data
    )


def _predict(app: Components, name: str, variant, content_type, data: bytes) -> dict:
    variant = bodies.variant(variant)
    request = bodies.predict_request(content_type, data)
    with app.models.use(name) as live:
        rows = bodies.predict_rows(request, live, app.settings.max_batch)
        version, labels, scores, probabilities = live.predict(rows, variant)
        ids = app.cache.put(live.incarnation, rows)
    app.metrics.predictions.labels(name).inc(len(rows))
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
