"""Application factory: assembles the routers, the lifespan (registry, store, worker) and
the middleware."""

from __future__ import annotations

import asyncio
import gc
import logging
from contextlib import asynccontextmanager

import numpy as np
from fastapi import FastAPI

from core import __version__
from service.config import Settings, get_settings
from service.durability.file_log import FileLog
from service.durability.local_store import LocalStore
from service.durability.redis_log import RedisLog
from service.durability.redis_store import RedisStore
from service.http.deps import Components
from service.http.errors import install_error_handlers, method_table
from service.http.fastpath import FastPath
from service.http.middleware import ServiceMiddleware
from service.http.openapi import build_openapi
from service.http.routes import (
    docs,
    feedback,
    health,
    inference,
    members,
    models,
    predict,
    snapshots,
    status,
)
from service.http.threads import make_executor
from service.model.cache import PredictionCache
from service.model.models import Models
from service.ops import tracing
from service.ops.history import History
from service.ops.loop_lag import CollectionTimer, LoopLag
from service.ops.metrics import Metrics
from service.ops.startup import Gate, Startup
from service.ops.worker import SnapshotWorker
from service.scale.roles import Learner, Replica

log = logging.getLogger("lorentztron")

DESCRIPTION = """Live online-learning models over HTTP: passive-aggressive linear and
difference-of-squares classifiers that score requests and learn from labelled feedback one
example at a time. Errors are JSON `{"error": {"code", "message", "details"}}`."""


def warm_up() -> None:
    """Compile the per-request kernels of every kind (binary, one-vs-one, averaging, mofm and
    its refit, the separation learners, the svmlight parser), of the members' comparisons,
    of the drift detectors and of delta publication's digests before readiness."""
    from core.averaging import Averaged
    from core.calibration import Calibrated
    from core.datasets import parse_svmlight
    from core.dos import DoSClassifier
    from core.features import as_batch, first_overflowing_row, squared_norm
    from core.linear import LinearPA
    from core.one_vs_one import OneVsOne
    from core.pqr import PQR
    from service.scale import delta_kernels

    delta_kernels.warm_up()  # (the digests of deltas, on learners and api replicas)

    parse_svmlight(b"1 1:0.5 2:1e-30 3:0.30000000000000004\n", n_features=3)
    X = np.eye(3)
    first_overflowing_row(as_batch(X, 3))  # the norm check of every feedback request
    squared_norm(X.T)  # the parameter-norm gauge
    for task, y in (("binary", [1, -1, 1]), ("regression", [0.5, 1.0, -2.0])):
        pqr = PQR(n_features=3, k=2, task=task, warmup=1)
        pqr.learn_one(X[0], y[0])
        pqr.learn_many(X, y)
        pqr.score_one(([0], [1.0]))
        pqr.score_many(X)
    from core.mofm import MultiOutputPN
    from core.ordinal import OrdinalMcRank
    from core.separation import EllipsoidPerceptron, Perceptron, ShorPerceptron

    for model, labels in (
        (MultiOutputPN(n_features=3, classes=[0, 1, 2], n_basis=2), [0, 1, 2]),
        (
            OrdinalMcRank(
                base=MultiOutputPN(n_features=3, n_outputs=2, loss="logistic", n_basis=2),
                levels=[1, 2, 3],
            ),
            [1, 2, 3],
        ),
    ):
        model.learn_one(X[0], labels[0])
        model.learn_many(X, labels)
        model.predict_many(X)
        model.predict_proba_many(X)
        model.refit(X, labels)
    bases = (
        LinearPA(n_features=3),
        DoSClassifier(n_features=3, rank=1),
        Perceptron(n_features=3),
        EllipsoidPerceptron(n_features=3),
        ShorPerceptron(n_features=3),
    )
    for base in (*bases, *(Calibrated(model=base) for base in bases)):
        for model, labels in (
            (base, [1, -1, 1]),
            (OneVsOne(base=base, classes=[0, 1, 2]), [0, 1, 2]),
        ):
            averaged = Averaged(model=model, interval=2)
            averaged.learn_one(X[0], labels[0])
            averaged.learn_many(X, labels)
            averaged.score_one(([0], [1.0]))
            averaged.score_many(X)
            averaged.predict_many(X)
            if isinstance(base, Calibrated):  # the probabilities' kernels
                averaged.predict_proba_many(X)
    from core.drift import ADWIN, PageHinkley
    from core.sequential import PairedDifference

    for bound in (1.0, None):  # a model's comparisons, and its drift detectors
        PairedDifference(bound=bound).update_many(np.array([0.0, 1.0, -1.0]))
    for detector in (ADWIN(mode="up"), PageHinkley(mode="up")):
        detector.update_many(np.array([0.0, 1.0, 0.0]))


def make_store(settings: Settings):
    if settings.redis_url:
        return RedisStore(settings.redis_url, settings.redis_prefix, cluster=settings.redis_cluster)
    return LocalStore(settings.snapshot_dir)


def make_log(settings: Settings, store):
    """The feedback log beside the store: a Redis stream per model, or local segment files
    (None when ``feedback_log`` is off)."""
    if not settings.feedback_log:
        return None
    if isinstance(store, RedisStore):
        return RedisLog(
            store.client,
            settings.redis_prefix,
            settings.redis_wait_replicas,
            settings.redis_wait_timeout,
        )
    return FileLog(
        settings.log_dir or settings.snapshot_dir / ".log",
        settings.log_fsync,
        settings.log_archive_dir,
    )


def check_role(settings: Settings) -> None:
    """The api and learner roles share the log, snapshots and notifications through Redis."""
    if settings.role != "all" and not (settings.redis_url and settings.feedback_log):
        raise ValueError(
            f"LORENTZTRON_ROLE={settings.role} needs LORENTZTRON_REDIS_URL and the feedback "
            "log (LORENTZTRON_FEEDBACK_LOG=true)"
        )


def start_role(worker: SnapshotWorker, settings: Settings):
    """The learner's consumer/publisher or the api replica's loader (None for ``all``)."""
    if settings.role == "all":
        return None
    loop = Learner(worker, settings) if settings.role == "learner" else Replica(worker, settings)
    loop.start()
    return loop


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    check_role(settings)
    metrics = Metrics(
        settings.snapshot_interval, settings.metrics_top_n, frozenset(settings.metrics_models)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        tracing.setup()  # on only if the OTEL_EXPORTER_OTLP_* variables ask for it
        store = make_store(settings)
        journal = make_log(settings, store)
        cache = PredictionCache(settings.prediction_ttl, settings.prediction_cache_bytes)
        models = Models(settings, store, journal, cache, metrics)
        worker = SnapshotWorker(models, metrics, settings)
        executor = make_executor(settings.handler_threads)
        components = Components(settings, models, cache, metrics, worker, executor=executor)
        app.state.components = components
        # recovery and warm-up run in the background: the port opens at once
        startup = app.state.startup = Startup(components, app.state.history, warm_up, start_role)
        startup.start()
        lag = LoopLag(
            metrics.loop_lag, metrics.loop_stalls, settings.loop_stall, lambda: components.warm
        )
        lag.start()
        collections = CollectionTimer(metrics.gc_seconds)
        collections.install()
        try:
            yield
        finally:
            collections.remove()
            await lag.stop()
            await startup.stop()
            gc.unfreeze()
            if startup.role_loop is not None:
                await asyncio.to_thread(startup.role_loop.stop)
            await asyncio.to_thread(executor.shutdown)  # in-flight handlers finish
            await app.state.history.stop()
            await worker.stop()
            if journal is not None:
                journal.close()
            store.close()
            await asyncio.to_thread(tracing.shutdown)  # the spans not yet exported

    app = FastAPI(
        title="lorentztron",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served offline by service.http.routes.docs
        redoc_url=None,
        # the service's metrics and logs are its own (service.ops.metrics, the JSON access
        # log): FastAPI's OpenTelemetry layer would only ask, on every request, whether a
        # tracer, meter or logger provider has been configured (none is)
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.openapi = lambda: build_openapi(app)
    install_error_handlers(app)

    routers = (
        health.router,
        models.router,
        members.router,
        predict.router,
        feedback.router,
        snapshots.router,
        inference.router,
    )
    for router in (*routers, status.router, docs.router):
        app.include_router(router)
    app.mount(docs.ASSETS, docs.assets(), name="docs-assets")
    app.state.methods = method_table(
        [*app.routes, *(route for router in (*routers, status.router) for route in router.routes)]
    )
    if settings.fast_path:  # inside ServiceMiddleware, in front of FastAPI's router
        app.add_middleware(FastPath)
    app.add_middleware(Gate, wait=settings.startup_wait)
    app.add_middleware(
        ServiceMiddleware,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout,
    )
    app.state.metrics = metrics
    # the status page's history (tests may swap it for one that samples faster)
    app.state.history = History(metrics)
    return app
