"""The hot endpoints without the framework: ``POST /v1/models/{name}/predict`` and
``POST /v1/models/{name}/feedback`` served by a small ASGI layer in front of FastAPI.

FastAPI spends more CPU on a single-example request than the model does: a scan of every
route's regular expression, then dependency solving (a ``Request`` object, the dependency
tree, the parameter fields). This layer sits inside ``ServiceMiddleware`` (request ids,
body limit, metrics and access logs are unchanged) and answers these two endpoints itself:

- it recognises them by a prefix test and one split of the path, and sets
  ``scope["route"]`` to FastAPI's own route object, so metrics and logs name the same
  endpoint;
- it does what FastAPI does, in the same order, with the same functions: predict reads the
  body and parses JSON as FastAPI does for a JSON body parameter, checks the read key
  (``service.deps.check_read``), then validates ``?variant=`` and the body with FastAPI's
  own parameter functions over the route's fields (same errors, same 422); feedback checks
  the write key, finds the model, reads the body and dispatches on its Content-Type
  (``routes.feedback.handler_for``);
- it runs the very handlers of the routes (``routes.predict._predict``, the
  ``routes.feedback.Handler`` of the body's format) in the app's thread pool
  (``service.threads``), and answers errors with the functions of ``service.errors`` that
  FastAPI's exception handlers use. Anything unexpected propagates
  to ``ServiceMiddleware`` (logged, JSON 500), as from a FastAPI route.

Small feedback requests (bodies up to ``GROUP_BODY_BYTES``) of one model wait on the event
loop in arrival order and go to a handler thread in groups (``routes.feedback.handle_group``):
each request of a group is parsed, validated, logged and learned exactly as alone, with its
own answer, but the group costs one thread hop, one append to the feedback log (one write,
or one Redis round trip) and one fsync, and the next group is learned while that fsync
runs. Larger (bulk) bodies go alone, so that their parsing overlaps the learning before
them.

Every other request goes to FastAPI unchanged, and so does everything when the setting
``fast_path`` is off; the routes stay the OpenAPI description. The route tests run with the
fast path on and off.
"""

from __future__ import annotations

import asyncio
import collections
import email.message
import json

from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic_core import PydanticUndefined
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from service.deps import Components, check_read, check_write
from service.errors import error_response, json_response
from service.routes import feedback, predict
from service.threads import run_sync

PREFIX = "/v1/models/"
#: feedback bodies up to this size are handled in groups per model (larger ones alone)
GROUP_BODY_BYTES = 64 * 1024
#: at most this many requests per group
GROUP_REQUESTS = 64
ENDPOINTS = {
    "predict": "/v1/models/{name}/predict",
    "feedback": "/v1/models/{name}/feedback",
}


def header(scope: dict, name: bytes) -> str | None:
    """The first value of a (lower-case) request header, as Starlette's ``Headers.get``."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def read_body(receive) -> bytes:
    """The whole request body (``Request.body``)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()


_json_content_types: dict[str, bool] = {}


def is_json_content_type(value: str) -> bool:
    """FastAPI's test for a JSON body: ``application/json`` or ``application/*+json``."""
    known = _json_content_types.get(value)
    if known is None:
        message = email.message.Message()
        message["content-type"] = value
        subtype = message.get_content_subtype()
        known = message.get_content_maintype() == "application" and (
            subtype == "json" or subtype.endswith("+json")
        )
        if len(_json_content_types) < 256:  # clients send a handful of distinct values
            _json_content_types[value] = known
    return known


class FastPath:
    """ASGI layer answering the predict and feedback endpoints (see the module docstring);
    every other request goes to ``app``."""

    def __init__(self, app):
        self.app = app
        self._routes: dict[str, APIRoute] | None = None
        self._queues: dict[str, _FeedbackQueue] = {}

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].startswith(PREFIX)
            and not scope.get("root_path")
        ):
            name, _, action = scope["path"][len(PREFIX) :].partition("/")
            if name and action in ENDPOINTS:
                await self._serve(scope, receive, send, name, action)
                return
        await self.app(scope, receive, send)

    def routes(self) -> dict[str, APIRoute]:
        """The FastAPI routes of the two endpoints: what FastAPI puts in ``scope["route"]``
        (the routers' own ``APIRoute`` objects, included without prefix or dependencies)."""
        if self._routes is None:
            found = {
                action: route
                for route in (*predict.router.routes, *feedback.router.routes)
                for action, path in ENDPOINTS.items()
                if isinstance(route, APIRoute) and route.path == path and "POST" in route.methods
            }
            if set(found) != set(ENDPOINTS):
                raise RuntimeError(f"no routes for {sorted(set(ENDPOINTS) - set(found))}")
            self._routes = found
        return self._routes

    async def _serve(self, scope, receive, send, name: str, action: str) -> None:
        app = scope["app"]
        route = self.routes()[action]
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {"name": name}
        components: Components = app.state.components
        try:
            if action == "predict":
                response = await self._predict(scope, receive, components, route, name)
            else:
                response = await self._feedback(scope, receive, components, name)
        except Exception as error:
            answer = error_response(error)
            if answer is None:
                raise
            response = json_response(answer)
        await response(scope, receive, send)

    async def _predict(
        self, scope, receive, components: Components, route: APIRoute, name: str
    ) -> JSONResponse:
        # the body first, as FastAPI reads a body parameter before solving dependencies
        body = PydanticUndefined
        try:
            data = await read_body(receive)
            if data:
                content_type = header(scope, b"content-type")
                if content_type and is_json_content_type(content_type):
                    body = json.loads(data)
                else:
                    body = data
        except json.JSONDecodeError as error:
            raise RequestValidationError(
                [
                    {
                        "type": "json_invalid",
                        "loc": ("body", error.pos),
                        "msg": "JSON decode error",
                        "input": {},
                        "ctx": {"error": error.msg},
                    }
                ]
            ) from error
        except HTTPException:
            raise
        except Exception as error:
            raise HTTPException(400, "There was an error parsing the body") from error
        check_read(components.settings, header(scope, b"authorization") or "")
        dependant = route.dependant
        query, errors = request_params_to_args(
            dependant.query_params, QueryParams(scope["query_string"])
        )
        values, body_errors = await request_body_to_args(
            body_fields=dependant.body_params,
            received_body=body,
            embed_body_fields=route._embed_body_fields,
        )
        errors += body_errors
        if errors:
            raise RequestValidationError(errors)
        result = await run_sync(
            components.executor,
            predict._predict,
            components,
            name,
            values["body"],
            query["variant"],
        )
        return JSONResponse(result)

    async def _feedback(self, scope, receive, components: Components, name: str) -> JSONResponse:
        check_write(components.settings, header(scope, b"authorization") or "")
        live = components.registry.get(name)
        body = await read_body(receive)
        handler = feedback.handler_for(header(scope, b"content-type") or "")
        if len(body) > GROUP_BODY_BYTES:  # bulk: its parsing overlaps the learning before it
            return JSONResponse(
                await run_sync(components.executor, handler, components, live, body)
            )
        # small requests of a model wait here in arrival order and go to a handler thread
        # in groups (routes.feedback.handle_group): one thread hop and one log fsync per group
        queue = self._queue(live.uid)
        answer = asyncio.get_running_loop().create_future()
        queue.waiting.append((handler, live, body, answer))
        if not queue.busy:
            queue.start(components)
        return JSONResponse(await answer)

    def _queue(self, uid: str) -> _FeedbackQueue:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(uid)
        if queue is None or queue.loop is not loop:
            if len(self._queues) >= 1024:  # forget idle queues (of deleted models, say)
                self._queues = {k: q for k, q in self._queues.items() if q.busy or q.waiting}
            queue = self._queues[uid] = _FeedbackQueue(loop)
        return queue


class _FeedbackQueue:
    """The small feedback requests of one model waiting for a handler thread. One group is
    being learned at a time (the model has one writer anyway, and handler threads queued on
    its lock would all wake up at every release); the requests that arrive meanwhile form
    the next group, started as soon as the current one is learned, while its log records
    are still being made durable."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiting: collections.deque = collections.deque()
        self.busy = False

    def start(self, components: Components) -> None:
        """Send the waiting requests (at most ``GROUP_REQUESTS``) to a handler thread."""
        group = [self.waiting.popleft() for _ in range(min(len(self.waiting), GROUP_REQUESTS))]
        self.busy = True
        released = False

        def release() -> None:  # on the loop: the group is learned, the next one may go
            nonlocal released
            if not released:
                released = True
                self.busy = False
                if self.waiting:
                    self.start(components)

        def learned() -> None:  # in the handler thread
            self.loop.call_soon_threadsafe(release)

        def done(future: asyncio.Future) -> None:
            release()  # (if the thread failed before it was learned)
            if future.cancelled():  # (the loop is closing)
                for *_, answer in group:
                    answer.cancel()
                return
            if future.exception() is not None:
                outcomes = [(False, future.exception())] * len(group)
            else:
                outcomes = future.result()
            for (*_, answer), (ok, value) in zip(group, outcomes, strict=True):
                if answer.done():  # its client went away
                    continue
                if ok:
                    answer.set_result(value)
                else:
                    answer.set_exception(value)

        requests = [(handler, live, body) for handler, live, body, _ in group]
        try:
            running = self.loop.run_in_executor(
                components.executor, feedback.handle_group, components, requests, learned
            )
        except Exception as error:  # the pool is shut down: no thread will answer
            failed = self.loop.create_future()
            failed.set_exception(error)
            done(failed)
            return
        running.add_done_callback(done)
