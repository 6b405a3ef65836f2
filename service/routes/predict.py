"""Scores for one or many instances."""

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.deps import App, Components, Read
from service.errors import APIError
from service.registry import instance_row
from service.schemas import PredictRequest, PredictResponse
from service.threads import run_sync

router = APIRouter(prefix="/v1/models", tags=["predict"])


@router.post("/{name}/predict", response_model=PredictResponse, dependencies=[Read])
async def predict(
    name: str, body: PredictRequest, app: App, variant: Literal["live", "averaged"] = "live"
) -> JSONResponse:
    """Label, score and prediction id per instance, from the live or time-averaged model."""
    # one trip to the thread pool for the whole request (validation, kernels, ids); the
    # response is built here, already valid, so FastAPI does not re-validate it
    return JSONResponse(await run_sync(app.executor, _predict, app, name, body, variant))


def _predict(app: Components, name: str, body: PredictRequest, variant: str) -> dict:
    live = app.registry.get(name)
    if len(body.instances) > app.settings.max_batch:
        raise APIError(413, "batch_too_large", f"at most {app.settings.max_batch} instances")
    rows = []
    for i, instance in enumerate(body.instances):
        try:
            rows.append(instance_row(instance, live.n_features))
        except ValueError as error:
            raise APIError(
                422, "invalid_input", f"instances[{i}]: {error}", {"field": f"instances.{i}"}
            ) from None
    version, labels, scores, probabilities = live.predict_rows(rows, variant)
    ids = app.cache.put(live.uid, rows)
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
