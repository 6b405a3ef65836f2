"""Dependencies shared by the routers: the app's components and API-key checks."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from service.config import Settings
from service.errors import APIError
from service.metrics import Metrics
from service.registry import PredictionCache, Registry
from service.worker import SnapshotWorker


@dataclass
class Components:
    """What the lifespan builds and the routes use (one per app, never module globals)."""

    settings: Settings
    registry: Registry
    cache: PredictionCache
    metrics: Metrics
    worker: SnapshotWorker
    warm: bool = False


async def components(request: Request) -> Components:
    return request.app.state.components


App = Annotated[Components, Depends(components)]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _matches(token: str, keys: list[str]) -> bool:
    # compare against every key, in constant time per key
    found = False
    for key in keys:
        found |= hmac.compare_digest(token.encode(), key.encode())
    return found


async def require_write(request: Request, app: App) -> None:
    keys = app.settings.write_keys
    if not keys:
        return
    token = _bearer(request)
    if token is None:
        raise APIError(
            401, "unauthorized", "this endpoint needs a write key (Authorization: Bearer <key>)"
        )
    if not _matches(token, keys):
        raise APIError(403, "forbidden", "the key is not allowed to write")


async def require_read(request: Request, app: App) -> None:
    keys = app.settings.read_keys
    if not keys:
        return
    token = _bearer(request)
    if token is None:
        raise APIError(
            401, "unauthorized", "this endpoint needs a read key (Authorization: Bearer <key>)"
        )
    if not (_matches(token, keys) or _matches(token, app.settings.write_keys)):
        raise APIError(403, "forbidden", "the key is not allowed to read")


Write = Depends(require_write)
Read = Depends(require_read)
