"""Create, list, inspect and delete models."""

from fastapi import APIRouter, Response

from service.deps import App, Read, Write
from service.errors import APIError
from service.registry import LiveModel, build_estimator
from service.schemas import CreateModel, ModelInfo, ModelList

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post("", status_code=201, response_model=ModelInfo, dependencies=[Write])
def create_model(spec: CreateModel, app: App, response: Response) -> dict:
    """Create a named model (409 if the name is taken). Its first snapshot is written
    before the response (503 if the snapshot store or the feedback log is unavailable)."""
    if spec.name in app.registry.names():
        raise APIError(409, "model_exists", f"a model named {spec.name!r} exists")
    estimator = build_estimator(
        spec, app.settings.averaging_interval, app.settings.max_model_floats
    )
    live = LiveModel(
        name=spec.name, spec=spec, estimator=estimator, metrics_window=app.settings.metrics_window
    )
    app.registry.add(live)
    try:
        # durable before acknowledged: snapshot 0 written, any old log of the name dropped
        app.worker.initialise(live)
    except Exception as error:
        app.registry.remove(spec.name)
        raise APIError(
            503,
            "store_unavailable",
            f"the model could not be made durable, so it was not created: {error}",
        ) from None
    app.metrics.track_model(live)
    response.headers["Location"] = f"/v1/models/{spec.name}"
    return live.info()


@router.get("", response_model=ModelList, dependencies=[Read])
def list_models(app: App) -> dict:
    """Every live model with its counters and progressive metrics."""
    return {"models": [live.info() for live in app.registry.models()]}


@router.get("/{name}", response_model=ModelInfo, dependencies=[Read])
def get_model(name: str, app: App) -> dict:
    """One model: config, counters, version and progressive metrics."""
    return app.registry.get(name).info()


@router.delete("/{name}", status_code=204, dependencies=[Write])
def delete_model(name: str, app: App) -> Response:
    """Delete a model and its snapshots (503 if the snapshot store cannot delete them)."""
    live = app.registry.get(name)
    try:
        app.worker.delete_snapshots(live)
    except Exception as error:
        live.deleted = False
        raise APIError(
            503,
            "store_unavailable",
            "the snapshot store could not delete the "
            f"model's snapshots, so the model is kept: {error}",
        ) from None
    app.registry.remove(name)
    app.cache.forget_model(live.uid)
    app.metrics.forget_model(name)
    return Response(status_code=204)
