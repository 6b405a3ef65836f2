"""CPU cost of each step of a request, measured in-process, one step at a time.

A sampling profile of a loaded server on a busy machine mixes the server's own costs with
the time its threads wait for a CPU. This script times the steps a request goes through
directly instead, with the CPU clock of the calling thread (or of the process, for the steps
that hand work to the thread pool), and keeps the fastest of several repeats, so that other
processes on the machine inflate the figures as little as possible:

- the whole ASGI app (middleware, logging, metrics, the fast path of the hot endpoints or
  FastAPI's routing and dependencies, thread-pool hop, handler, serialisation) called
  directly, without sockets, with the fast path on (the default) and off;
- the pieces: request parsing and validation (pydantic), feature validation, the model
  call (numba kernels), the prediction-id cache, the response model, the JSON access-log
  line, the Prometheus updates, one thread-pool round trip (anyio's and the service's),
  and HTTP/1.1 framing with h11 (what uvicorn's protocol does around it, without its
  event-loop plumbing);
- for bulk feedback: svmlight parsing, batch validation (and the two fused, as the service
  parses), and learning, with and without the time-averaging fold (``running_average`` over
  the whole state, every ``interval`` examples).

    python -m deploy.loadtest.cost_breakdown                       # DoS rank 16, 2^18 hashed
    python -m deploy.loadtest.cost_breakdown --json /tmp/costs.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import logging.config
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Literal

import anyio
import h11
import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response

from core.align import running_average
from core.datasets import parse_svmlight, svmlight_batch
from core.features import as_batch, batch_from_rows
from deploy.loadtest.loadgen.config import KINDS, LoadConfig
from deploy.loadtest.loadgen.workload import Workload
from service.config import Settings
from service.http.bodies import instance_row
from service.http.schemas import (
    FeedbackRequest,
    FeedbackResponse,
    PredictRequest,
    PredictResponse,
)
from service.http.threads import run_sync
from service.main import create_app


def timed(function, n: int, repeats: int, clock=time.thread_time) -> float:
    """Seconds per call: the fastest of ``repeats`` rounds of ``n`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(n):
            function()
        best = min(best, (clock() - start) / n)
    return best


async def timed_async(function, n: int, repeats: int, clock=time.process_time) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(n):
            await function()
        best = min(best, (clock() - start) / n)
    return best


async def asgi_call(app, method: str, path: str, body: bytes = b"", content_type: str = "") -> int:
    """One request through the ASGI app, without a server or sockets; returns the status."""
    path, _, query = path.partition("?")
    headers = [(b"host", b"127.0.0.1"), (b"content-length", str(len(body)).encode())]
    if content_type:
        headers.append((b"content-type", content_type.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    delivered = False
    status = []

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect: whoever waits is cancelled

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def h11_round_trip(request: bytes, response_body: bytes):
    """Server-side HTTP/1.1 framing of one request and its response with h11, on a
    keep-alive connection (what uvicorn's h11 protocol does, without its event loop)."""
    connection = h11.Connection(h11.SERVER)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(response_body)).encode()),
        (b"x-request-id", uuid.uuid4().hex.encode()),
    ]

    def run():
        connection.receive_data(request)
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA or isinstance(event, h11.EndOfMessage):
                break
        connection.send(h11.Response(status_code=200, headers=headers))
        connection.send(h11.Data(data=response_body))
        connection.send(h11.EndOfMessage())
        connection.start_next_cycle()

    return run


def http_request(path: str, body: bytes, content_type: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: */*\r\n"
        f"accept-encoding: gzip, deflate\r\nconnection: keep-alive\r\n"
        f"user-agent: python-httpx/0.28.1\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


# The predict route's shape (path parameter, body model, query parameter, two dependencies,
# a response model) in a bare FastAPI app doing no work, in three variants: sync dependencies
# and endpoint (as the service: four thread-pool hops), async ones (no hop), and async with a
# pre-serialised JSON response (no response-model pass). Module level, so that FastAPI can
# resolve the string annotations of this module.
Variant = Literal["live", "averaged"]


def _components(request: Request):
    return request.app


def _read(request: Request, components: Annotated[object, Depends(_components)]):
    return None


async def _async_components(request: Request):
    return request.app


async def _async_read(request: Request, components: Annotated[object, Depends(_async_components)]):
    return None


def _content() -> dict:
    prediction = {"label": 1, "score": 0.5, "probability": None}
    return {
        "model": "m",
        "version": 1,
        "member": "original",
        "variant": "live",
        "predictions": [prediction | {"prediction_id": uuid.uuid4().hex}],
    }


def _sync_route(
    name: str,
    body: PredictRequest,
    app: Annotated[object, Depends(_components)],
    variant: Variant = "live",
) -> dict:
    return _content()


async def _async_route(
    name: str,
    body: PredictRequest,
    app: Annotated[object, Depends(_async_components)],
    variant: Variant = "live",
) -> dict:
    return _content()


async def _raw_route(
    name: str,
    request: Request,
    app: Annotated[object, Depends(_async_components)],
    variant: Variant = "live",
) -> Response:
    PredictRequest.model_validate_json(await request.body())
    payload = PredictResponse.model_validate(_content()).model_dump_json()
    return Response(payload, media_type="application/json")


def route_shape_app() -> FastAPI:
    app = FastAPI()
    app.post("/sync/{name}", response_model=PredictResponse, dependencies=[Depends(_read)])(
        _sync_route
    )
    app.post("/async/{name}", response_model=PredictResponse, dependencies=[Depends(_async_read)])(
        _async_route
    )
    app.post("/raw/{name}", dependencies=[Depends(_async_read)])(_raw_route)
    return app


async def hops_of(function) -> float:
    """How many times one call hands work to a thread (anyio's pool, as FastAPI's sync
    dependencies and endpoints do, or the service's executor through
    ``loop.run_in_executor``)."""
    from anyio._backends._asyncio import AsyncIOBackend

    original = AsyncIOBackend.__dict__["run_sync_in_worker_thread"]
    loop = asyncio.get_running_loop()
    count = [0]

    async def counting(cls, *args, **kwargs):
        count[0] += 1
        return await original.__func__(cls, *args, **kwargs)

    def counting_executor(executor, function, *args):
        count[0] += 1
        return type(loop).run_in_executor(loop, executor, function, *args)

    AsyncIOBackend.run_sync_in_worker_thread = classmethod(counting)
    loop.run_in_executor = counting_executor
    try:
        await function()
    finally:
        AsyncIOBackend.run_sync_in_worker_thread = original
        del loop.run_in_executor
    return count[0] / 1e6  # put() reports microseconds


async def measure(args) -> dict:
    config = LoadConfig(
        mode="bulk",
        kind=args.kind,
        rank=args.rank,
        n_features=args.n_features,
        nnz=args.nnz,
        batch=args.batch,
        bulk_bodies=1,
        pool=512,
    )
    workload = Workload(config)
    results: dict[str, dict] = {}

    def put(group: str, name: str, seconds: float, per: str = "request") -> None:
        if per == "count":
            results.setdefault(group, {})[name] = {"count": round(1e6 * seconds)}
            print(f"  {group:<9} {name:<62} {1e6 * seconds:10.0f}", flush=True)
            return
        results.setdefault(group, {})[name] = {"us": round(1e6 * seconds, 2), "per": per}
        print(f"  {group:<9} {name:<62} {1e6 * seconds:10.1f} us/{per}", flush=True)

    with tempfile.TemporaryDirectory() as directory, open(os.devnull, "w") as null:
        app = create_app(Settings(snapshot_dir=directory, snapshot_interval=3600))
        # the JSON logging of `lorentztron serve`, writing to a null stream
        try:
            from service.ops.cli import configure_logging, configure_process

            logging.config.dictConfig(configure_logging("info"))
            configure_process(Settings())
        except ImportError:
            logging.basicConfig(level=logging.INFO)
        for handler in logging.getLogger("lorentztron").handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(null)
        async with app.router.lifespan_context(app):
            await _measure_app(app, workload, args, put)
        settings = Settings(
            snapshot_dir=directory + "/off", snapshot_interval=3600, fast_path=False
        )
        off = create_app(settings)
        async with off.router.lifespan_context(off):
            await _measure_routes(off, workload, args, put)
    return results


async def _measure_routes(app, workload: Workload, args, put) -> None:
    """The hot endpoints through FastAPI's routes (the setting fast_path off)."""
    spec = json.dumps(workload.model_spec("m")).encode()
    assert await asgi_call(app, "POST", "/v1/models", spec, "application/json") == 201
    print("whole ASGI app with the fast path off (FastAPI routing and dependencies):")
    for name, path, bodies in (
        ("POST predict, 1 instance, fast path off", "/v1/models/m/predict",
         workload.predict_bodies),
        ("POST feedback, 1 example (JSON), fast path off", "/v1/models/m/feedback",
         workload.feedback_bodies),
    ):  # fmt: skip
        k = [0]

        async def run(path=path, bodies=bodies, k=k):
            k[0] = (k[0] + 1) % len(bodies)
            status = await asgi_call(app, "POST", path, bodies[k[0]], "application/json")
            assert status == 200, status

        for _ in range(50):
            await run()
        put("app", name, await timed_async(run, args.n, args.repeats))


async def _measure_app(app, workload: Workload, args, put) -> None:
    n, repeats = args.n, args.repeats
    components = app.state.components
    spec = json.dumps(workload.model_spec("m")).encode()
    assert await asgi_call(app, "POST", "/v1/models", spec, "application/json") == 201
    live = components.models.get("m")
    k = [0]

    def call(method: str, path: str, bodies: list[bytes] | None, content_type: str = ""):
        async def run():
            body = b""
            if bodies:
                k[0] = (k[0] + 1) % len(bodies)
                body = bodies[k[0]]
            status = await asgi_call(app, method, path, body, content_type)
            assert status == 200, status

        return run

    json_type = "application/json"
    predict_call = call("POST", "/v1/models/m/predict", workload.predict_bodies, json_type)
    feedback_call = call("POST", "/v1/models/m/feedback", workload.feedback_bodies, json_type)
    healthz_call = call("GET", "/healthz", None)
    for _ in range(50):
        await predict_call()
        await feedback_call()

    print("whole ASGI app, called in-process (process CPU, thread pool included):")
    for name, function in (
        ("GET /healthz (sync route: framework + middleware floor)", healthz_call),
        ("POST predict, 1 instance", predict_call),
        ("POST feedback, 1 example (JSON)", feedback_call),
    ):
        put("app", name, await timed_async(function, n, repeats))
    for name, function in (
        ("GET /healthz", healthz_call),
        ("POST predict", predict_call),
        ("POST feedback (JSON)", feedback_call),
    ):
        put("app", f"thread-pool hops per request, {name}", await hops_of(function), "count")

    print("the predict route's shape in a bare FastAPI app, no work (process CPU):")
    shape = route_shape_app()
    body = workload.predict_bodies[0]
    for name, path in (
        ("sync dependencies + sync endpoint (as the service)", "/sync/m"),
        ("async dependencies + async endpoint", "/async/m"),
        ("async, pre-serialised JSON response, no response_model", "/raw/m"),
    ):

        async def shaped(path=path):
            assert await asgi_call(shape, "POST", path, body, json_type) == 200

        for _ in range(20):
            await shaped()
        put("fastapi", name, await timed_async(shaped, n, repeats))

    print("predict pieces (thread CPU unless said):")
    predict_body = workload.predict_bodies[0]
    instance = PredictRequest.model_validate_json(predict_body).instances[0]
    row = instance_row(instance, live.n_features)
    version, member, variant, labels, scores, _ = live.predict([row], "live")
    prediction = {"label": labels[0], "score": scores[0], "probability": None}
    content = {
        "model": "m",
        "version": version,
        "member": member,
        "variant": variant,
        "predictions": [prediction | {"prediction_id": uuid.uuid4().hex}],
    }
    entry = {
        "request_id": uuid.uuid4().hex,
        "method": "POST",
        "path": "/v1/models/m/predict",
        "endpoint": "/v1/models/{name}/predict",
        "status": 200,
        "ms": 1.234,
    }
    access = logging.getLogger("lorentztron.access")
    metrics = components.metrics

    def prometheus():  # as ServiceMiddleware and the predict handler do
        metrics.request_done("/v1/models/{name}/predict", "POST", 200, 0.001)
        metrics.predicted("m", 1)

    response_body = PredictResponse.model_validate(content).model_dump_json().encode()
    framing = h11_round_trip(
        http_request("/v1/models/m/predict?variant=live", predict_body, json_type),
        response_body,
    )
    pieces = (
        ("PredictRequest.model_validate_json (pydantic)",
         lambda: PredictRequest.model_validate_json(predict_body)),
        ("instance_row (feature validation)", lambda: instance_row(instance, live.n_features)),
        ("LiveModel.predict (norm check, read lock, DoS score kernel)",
         lambda: live.predict([row], "live")),
        ("PredictionCache.put (random id + compact)",
         lambda: components.cache.put(live.incarnation, [row])),
        ("PredictResponse validate + dump_json (response_model)",
         lambda: PredictResponse.model_validate(content).model_dump_json()),
        ("access log line (its fields to JsonFormatter + write)",
         lambda: access.info("%s %s", "POST", entry["path"], extra={"fields": entry})),
        ("Prometheus: 2 counters + 1 histogram", prometheus),
        ("HTTP/1.1 framing of request + response (h11)", framing),
    )  # fmt: skip
    for name, function in pieces:
        put("predict", name, timed(function, n, repeats))

    async def hop():
        await anyio.to_thread.run_sync(lambda: None)

    async def executor_hop():
        await run_sync(components.executor, lambda: None)

    put(
        "predict", "thread-pool round trip (anyio, process CPU)", await timed_async(hop, n, repeats)
    )
    put(
        "predict",
        "thread-pool round trip (service.http.threads: run_in_executor, process CPU)",
        await timed_async(executor_hop, n, repeats),
    )

    print("feedback pieces (thread CPU):")
    feedback_body = workload.feedback_bodies[0]
    example = FeedbackRequest.model_validate_json(feedback_body).examples[0]
    feedback_row = instance_row(example, live.n_features)
    # the label -> class index (or target) step; named label_index in older services
    target_of = getattr(live, "target", None) or live.label_index
    label = np.array([target_of(example.label, "label")])
    result = live.learn(batch_from_rows([feedback_row]), label)
    feedback_content = {
        "model": "m",
        "version": result["version"],
        "learned": 1,
        "aggressive": 0,
        "results": [{"predicted": 1, "loss": 0.5, "aggressive": True}],
    }
    pieces = (
        ("FeedbackRequest.model_validate_json (pydantic)",
         lambda: FeedbackRequest.model_validate_json(feedback_body)),
        ("instance_row + label to class index",
         lambda: (instance_row(example, live.n_features), target_of(example.label, "label"))),
        ("LiveModel.learn, 1 row (write lock, feedback log append + fsync, kernel)",
         lambda: live.learn(batch_from_rows([feedback_row]), label)),
        ("FeedbackResponse validate + dump_json (response_model)",
         lambda: FeedbackResponse.model_validate(feedback_content).model_dump_json()),
    )  # fmt: skip
    for name, function in pieces:
        put("feedback", name, timed(function, n, repeats))

    print(f"bulk pieces, one svmlight body of {args.batch:,} examples (thread CPU):")
    body = workload.bulk_bodies[0]
    rounds = max(1, repeats // 2)
    X, y = parse_svmlight(body, n_features=live.n_features, source="body")
    batch = as_batch(X, live.n_features)
    labels_index = (y > 0).astype(np.int64)
    estimator = live.estimator
    interval = estimator.interval

    def learn_without_folds():
        estimator.interval = 1 << 40
        try:
            live.learn(batch, labels_index)
        finally:
            estimator.interval = interval

    average = estimator.average_.get_state() if estimator.n_averaged_ else None

    def fold():
        return running_average(average, estimator.live_.get_state(), 2 if average else 1)

    per_example = (
        ("parse_svmlight", lambda: parse_svmlight(body, n_features=live.n_features)),
        ("as_batch (CSR validation)", lambda: as_batch(X, live.n_features)),
        ("svmlight_batch (parse + validation, the service's path)",
         lambda: svmlight_batch(body, live.n_features)),
        ("learn without averaging folds (DoS kernel)", learn_without_folds),
        ("learn with the service's averaging interval",
         lambda: live.learn(batch, labels_index)),
    )  # fmt: skip
    for name, function in per_example:
        put("bulk", name, timed(function, 1, rounds) / args.batch, "example")
    put("bulk", f"one averaging fold (get_state + running_average), every {interval:,}",
        timed(fold, 1, rounds), "fold")  # fmt: skip
    bulk_call = call("POST", "/v1/models/m/feedback", [body], "text/x-svmlight")
    put("bulk", "whole app, POST svmlight body (process CPU)",
        await timed_async(bulk_call, 1, rounds) / args.batch, "example")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=KINDS, default="dos")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--n-features", type=int, default=1 << 18)
    parser.add_argument("--nnz", type=int, default=30)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--n", type=int, default=300, help="calls per round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (the fastest counts)")
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    args = parser.parse_args(argv)
    print(
        f"model {args.kind} rank {args.rank}, {args.n_features:,} features, {args.nnz} "
        f"non-zeros; fastest of {args.repeats} rounds of {args.n} calls"
    )
    started = time.perf_counter()
    results = asyncio.run(measure(args))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        report = {"settings": vars(args) | {"json": str(args.json)}, "results": results}
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
