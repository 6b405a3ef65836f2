"""Snapshots: take one now, list them, restore one."""

from fastapi import APIRouter, Request, Response

from service.durability.idempotency import HEADER, answer_headers, key_of
from service.durability.store import SnapshotMeta
from service.http.deps import App, Read, Write
from service.http.openapi import errors
from service.http.schemas import ModelInfo, SnapshotInfo, SnapshotList
from service.http.threads import run_sync
from service.http.views import model_info

router = APIRouter(prefix="/v1/models", tags=["snapshots"])


def _info(meta: SnapshotMeta) -> dict:
    return {
        "model": meta.model,
        "version": meta.version,
        "created_at": meta.created_at,
        "size_bytes": meta.size_bytes,
    }


@router.post(
    "/{name}/snapshots",
    status_code=201,
    response_model=SnapshotInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 503),
)
async def take_snapshot(name: str, app: App) -> dict:
    """Write a snapshot of the model now (its live and time-averaged states)."""
    return _info(await run_sync(app.executor, app.models.snapshot, name))


@router.get(
    "/{name}/snapshots",
    response_model=SnapshotList,
    dependencies=[Read],
    responses=errors(401, 403, 404, 503),
)
def list_snapshots(name: str, app: App) -> dict:
    """The model's snapshots, oldest first, with versions, times and sizes."""
    return {"snapshots": [_info(meta) for meta in app.models.snapshots(name)]}


@router.post(
    "/{name}/snapshots/{version}/restore",
    response_model=ModelInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 422, 503),
)
def restore_snapshot(
    name: str, version: int, app: App, request: Request, response: Response
) -> dict:
    """Replace the model's state by a snapshot's; the model's version moves on by one, and
    the restored state is written as the newest snapshot before the response. With an
    `Idempotency-Key`, a retry gets the first answer again (and restores nothing)."""
    key = key_of(request.headers.get(HEADER), f"restore {version}", "", b"")
    answer = app.models.restore_snapshot(name, version, model_info, key)
    response.headers.update(answer_headers(answer) or {})
    return answer
