"""Liveness, readiness and Prometheus metrics."""

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.http.deps import App
from service.ops import multiprocess

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(app: App) -> Response:
    """Ready: kernels compiled, models restored (log replayed), snapshot store and feedback log
    reachable (503 otherwise, with the checks still `pending`)."""
    worker = app.worker
    store_ok = worker.check_store()
    checks = {
        "kernels_compiled": app.warm,
        "models_restored": worker.restored,
        "snapshot_store": store_ok,
    }
    ready = all(checks.values())
    body = {
        "status": "ready" if ready else "not_ready",
        "checks": checks,
        "pending": [name for name, ok in checks.items() if not ok],
        "store_error": worker.store_error,
        "failing_snapshots": worker.failing,
    }
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format",
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
        }
    },
)
def metrics(app: App) -> Response:
    """Prometheus metrics."""
    app.metrics.observe_cache(app.cache)
    serving = app.models.serving()
    app.metrics.observe_models(serving)
    registry = app.metrics.registry
    if multiprocess.enabled():  # serve --workers N: every worker's, from their files
        registry = multiprocess.registry(
            app.metrics.exported(), app.metrics.build_info, app.metrics.aggregated()
        )
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
