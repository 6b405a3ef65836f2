"""Start-up in the background: the port opens at once.

The lifespan starts :class:`Startup` and returns, so uvicorn listens immediately: ``/healthz``
answers 200 and ``/readyz`` 503 with what is pending while the models are restored (snapshot
and log replay) and then the kernels of every kind are compiled (up to a minute with a cold
numba cache; a log line says so). Requests for models that arrive before the models are
restored wait for them (:class:`Gate`), at most ``startup_wait`` seconds, then get 503
``not_ready``; once restored, models are served while the other kernels compile (a request
compiles what it needs itself).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

from service.exceptions import Unavailable
from service.http.errors import error_response, json_response

log = logging.getLogger("lorentztron")

#: the paths that need the models restored (every other one is answered at once)
MODEL_PATHS = ("/v1/models", "/v2/models")


class Startup:
    """The background start of one app: recovery, the worker and role loops, warm-up."""

    def __init__(self, components, history, warm_up: Callable[[], None], start_role):
        self.components = components
        self.history = history
        self.warm_up = warm_up
        self.start_role = start_role
        self.role_loop = None
        self._task: asyncio.Task | None = None
        #: set once the first restore was tried (done, or left to the worker)
        self.tried = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        components = self.components
        worker = components.worker
        try:
            if await asyncio.to_thread(worker.check_store):
                await asyncio.to_thread(worker.restore_all)
            else:
                log.error(
                    "snapshot store unreachable at start-up (%s); restoring in the background",
                    worker.store_error,
                )
        except Exception:  # the worker tries again
            log.exception("restoring the models failed; retrying in the background")
        self.tried.set()
        worker.start()
        self.role_loop = self.start_role(worker, components.settings)
        self.history.start(components.models)
        started = time.perf_counter()
        log.info("compiling the kernels (numba; up to a minute when its cache is cold)")
        await asyncio.to_thread(self.warm_up)
        # start-up leaves ~160,000 long-lived objects (modules, routes, schemas, numba's
        # dispatchers); frozen, a full collection no longer scans them on the request path.
        # Before the process says it is ready: this collection holds the loop ~0.1 s
        gc.collect()
        gc.freeze()
        components.warmed_up()
        log.info("kernels compiled in %.1f s", time.perf_counter() - started)

    async def stop(self) -> None:
        """Wait for the start to finish (a shutdown during the warm-up waits for it)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def pending(self) -> list[str]:
        return [
            name
            for name, done in (
                ("models_restored", self.components.worker.restored),
                ("kernels_compiled", self.components.warm),
            )
            if not done
        ]


class Gate:
    """ASGI layer: a model request that arrives before the models are restored waits for
    them, at most ``wait`` seconds, then gets 503 ``not_ready``."""

    def __init__(self, app, wait: float):
        self.app = app
        self.wait = wait

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(MODEL_PATHS):
            worker = scope["app"].state.components.worker
            deadline = time.monotonic() + self.wait
            while not worker.restored:
                if time.monotonic() >= deadline:
                    error = Unavailable(
                        "not_ready",
                        "the service is starting: the models are being restored (see /readyz)",
                    )
                    response = json_response(error_response(error), scope["path"])
                    await response(scope, receive, send)
                    return
                await asyncio.sleep(0.02)
        await self.app(scope, receive, send)
