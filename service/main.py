"""Application factory.

The foundation ships liveness/readiness only; the model routes, registry, snapshot worker
and metrics arrive with the service issue.
"""

from contextlib import asynccontextmanager

import numpy as np
from fastapi import FastAPI

from core import __version__
from service.routes import health


def warm_up() -> None:
    """Compile the per-request kernels before the service reports ready."""
    from core.dos import DoSClassifier
    from core.linear import LinearPA

    for model in (LinearPA(n_features=2), DoSClassifier(n_features=2, rank=1)):
        model.learn_one(np.array([1.0, 0.0]), 1)
        model.learn_many(np.eye(2), np.array([1, -1]))
        model.score_one(([0], [1.0]))
        model.score_many(np.eye(2))


def create_app() -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.ready = False
        warm_up()
        app.state.ready = True
        yield

    app = FastAPI(title="lorentztron", version=__version__, lifespan=lifespan)
    app.include_router(health.router)
    return app
