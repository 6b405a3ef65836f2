"""Dependencies shared by the routers: the app's components and API-key checks."""

from __future__ import annotations

import hmac
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from service.config import Settings
from service.exceptions import Forbidden, Unauthorized
from service.http.grouping import FeedbackGroups
from service.model.cache import PredictionCache
from service.model.models import Models
from service.ops.metrics import Metrics
from service.ops.worker import SnapshotWorker


@dataclass
class Components:
    """What the lifespan builds and the routes use (one per app, never module globals)."""

    settings: Settings
    models: Models
    cache: PredictionCache
    metrics: Metrics
    worker: SnapshotWorker
    warm: bool = False
    #: the thread pool of the request handlers (``service.http.threads``; None: the loop's default)
    executor: Executor | None = None
    #: feedback requests waiting to be learned in groups (``service.http.grouping``)
    groups: FeedbackGroups = field(init=False)

    def __post_init__(self):
        self.groups = FeedbackGroups(self)

    def warmed_up(self) -> None:
        """The per-request kernels are compiled (``/readyz``)."""
        self.warm = True


async def components(request: Request) -> Components:
    return request.app.state.components


App = Annotated[Components, Depends(components)]


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value (None otherwise)."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _matches(token: str, keys: list[str]) -> bool:
    # compare against every key, in constant time per key
    found = False
    for key in keys:
        found |= hmac.compare_digest(token.encode(), key.encode())
    return found


def check_write(settings: Settings, authorization: str) -> None:
    """Raise Unauthorized / Forbidden unless the Authorization header value carries a write key
    (nothing to check when no write keys are configured)."""
    keys = settings.write_keys
    if not keys:
        return
    token = bearer_token(authorization)
    if token is None:
        raise Unauthorized(
            "unauthorized", "this endpoint needs a write key (Authorization: Bearer <key>)"
        )
    if not _matches(token, keys):
        raise Forbidden("forbidden", "the key is not allowed to write")


def check_read(settings: Settings, authorization: str) -> None:
    """Raise Unauthorized / Forbidden unless the header value carries a read or a write key
    (nothing to check when no read keys are configured)."""
    keys = settings.read_keys
    if not keys:
        return
    token = bearer_token(authorization)
    if token is None:
        raise Unauthorized(
            "unauthorized", "this endpoint needs a read key (Authorization: Bearer <key>)"
        )
    if not (_matches(token, keys) or _matches(token, settings.write_keys)):
        raise Forbidden("forbidden", "the key is not allowed to read")


def check_export(settings: Settings, authorization: str) -> None:
    """A model's export (its full weights) needs what replacing it needs: a write key when
    write keys are configured, else a read key when read keys are."""
    if settings.write_keys:
        check_write(settings, authorization)
    else:
        check_read(settings, authorization)


async def require_write(request: Request, app: App) -> None:
    check_write(app.settings, request.headers.get("authorization", ""))


async def require_read(request: Request, app: App) -> None:
    check_read(app.settings, request.headers.get("authorization", ""))


async def require_export(request: Request, app: App) -> None:
    check_export(app.settings, request.headers.get("authorization", ""))


Write = Depends(require_write)
Read = Depends(require_read)
Export = Depends(require_export)
