"""Liveness and readiness."""

from fastapi import APIRouter, Request

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> dict:
    """Kernels are compiled and the service can take traffic."""
    return {"status": "ready" if request.app.state.ready else "starting"}
