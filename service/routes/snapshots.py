"""Snapshots: take one now, list them, restore one."""

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from service.deps import App, Components, Read, Write
from service.errors import APIError
from service.schemas import ModelInfo, SnapshotInfo, SnapshotList
from service.store import SnapshotError, decode

router = APIRouter(prefix="/v1/models", tags=["snapshots"])


@router.post(
    "/{name}/snapshots", status_code=201, response_model=SnapshotInfo, dependencies=[Write]
)
async def take_snapshot(name: str, app: App) -> dict:
    """Write a snapshot of the model now (its live and time-averaged states)."""
    live = app.registry.get(name)
    _writer_only(app)
    try:
        meta = await run_in_threadpool(app.worker.snapshot, live, True)
    except Exception as error:
        app.metrics.snapshot_failures.labels(name).inc()
        raise APIError(
            503, "store_unavailable", f"the snapshot could not be written: {error}"
        ) from None
    return {
        "model": meta.model,
        "version": meta.version,
        "created_at": meta.created_at,
        "size_bytes": meta.size_bytes,
    }


@router.get("/{name}/snapshots", response_model=SnapshotList, dependencies=[Read])
def list_snapshots(name: str, app: App) -> dict:
    """The model's snapshots, oldest first, with versions, times and sizes."""
    app.registry.get(name)
    try:
        metas = app.worker.store.versions(name)
    except Exception as error:
        raise APIError(
            503, "store_unavailable", f"the snapshot store is unavailable: {error}"
        ) from None
    return {
        "snapshots": [
            {
                "model": m.model,
                "version": m.version,
                "created_at": m.created_at,
                "size_bytes": m.size_bytes,
            }
            for m in metas
        ]
    }


@router.post("/{name}/snapshots/{version}/restore", response_model=ModelInfo, dependencies=[Write])
def restore_snapshot(name: str, version: int, app: App) -> dict:
    """Replace the model's state by a snapshot's; the model's version moves on by one, and
    the restored state is written as the newest snapshot before the response."""
    live = app.registry.get(name)
    _writer_only(app)
    try:
        blob = app.worker.store.load(name, version)
        header, state = decode(blob)
    except SnapshotError as error:
        raise APIError(404, "snapshot_not_found", str(error)) from None
    except Exception as error:
        raise APIError(
            503, "store_unavailable", f"the snapshot store is unavailable: {error}"
        ) from None
    if header["spec"] != live.spec.model_dump(mode="json"):
        raise APIError(
            409,
            "snapshot_mismatch",
            "the snapshot was taken from a model with another configuration",
        )
    try:
        app.worker.restore_version(live, state)
    except ValueError as error:
        raise APIError(409, "snapshot_mismatch", str(error)) from None
    except Exception as error:
        raise APIError(
            503,
            "store_unavailable",
            f"the restored state could not be written as the newest snapshot, so the model "
            f"is unchanged: {error}",
        ) from None
    return live.info()


def _writer_only(app: Components) -> None:
    if not app.worker.writes_snapshots:
        raise APIError(
            409,
            "wrong_role",
            "this api replica serves published versions; snapshot and restore on the learner",
        )
