"""Scores for one or many instances."""

from typing import Literal

from fastapi import APIRouter

from service.deps import App, Read
from service.errors import APIError
from service.registry import instance_row
from service.schemas import PredictRequest, PredictResponse

router = APIRouter(prefix="/v1/models", tags=["predict"])


@router.post("/{name}/predict", response_model=PredictResponse, dependencies=[Read])
def predict(
    name: str, body: PredictRequest, app: App, variant: Literal["live", "averaged"] = "live"
) -> dict:
    """Label, score and prediction id per instance, from the live or time-averaged model."""
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
