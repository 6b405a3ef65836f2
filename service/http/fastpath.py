"""The hot endpoints without the framework: ``POST /v1/models/{name}/predict``,
``POST /v1/models/{name}/feedback`` and the Open Inference Protocol's ``POST
/v2/models/{name}/infer`` (and ``/versions/{version}/infer``) served by a small ASGI layer in
front of FastAPI.

FastAPI spends more CPU on a single-example request than the model does: a scan of every
route's regular expression, then dependency solving (a ``Request`` object, the dependency
tree). This layer sits inside ``ServiceMiddleware`` (request ids, body limit, metrics and
access logs are unchanged) and answers these endpoints itself, with the routes' own
code: it recognises them by a prefix test and one split of the path, sets
``scope["route"]`` to FastAPI's route object (metrics and logs name the same endpoint),
checks the key with the routes' dependency functions (``service.http.deps``), and awaits the
routes' ``serve`` (the same body validation by the schemas' ``TypeAdapter``s, the same
feedback groups, the same V2 tensors). Errors are answered by ``service.http.errors``, as
FastAPI's handlers do (in V2's form under ``/v2``); anything unexpected propagates to
``ServiceMiddleware`` (logged, JSON 500).

Every other request goes to FastAPI unchanged, and so does everything when the setting
``fast_path`` is off; the routes stay the OpenAPI description. The route tests run with the
fast path on and off.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect

from service.durability.idempotency import answer_headers
from service.http.deps import Components, check_read, check_write
from service.http.errors import error_response, json_response
from service.http.routes import feedback, inference, predict

PREFIX = "/v1/models/"
V2_PREFIX = "/v2/models/"
ENDPOINTS = {
    "predict": "/v1/models/{name}/predict",
    "feedback": "/v1/models/{name}/feedback",
    "infer": "/v2/models/{name}/infer",
    "infer_version": "/v2/models/{name}/versions/{version}/infer",
}


#: what starlette's JSONResponse renders with (one encoder, not one per answer)
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def query_value(query: bytes, name: str) -> str | None:
    """The last value of ``name`` in a query string, as ``QueryParams(query).get(name)``."""
    value = None
    if query:
        for key, item in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if key == name:
                value = item
    return value


async def send_json(send, answer: dict) -> None:
    """A 200 with ``answer`` as JSON: the bytes and headers of ``JSONResponse(answer,
    headers=answer_headers(answer))``, without building the response object."""
    await send_body(
        send, _encode(answer).encode("utf-8"), b"application/json", answer_headers(answer)
    )


async def send_body(send, body: bytes, content_type: bytes, extra: dict | None = None) -> None:
    """A 200 with ``body``: the headers of starlette's ``Response(body, media_type=...,
    headers=extra)`` for a media type without a charset (``extra``, then the length and type)."""
    headers = [
        (key.lower().encode("latin-1"), value.encode("latin-1"))
        for key, value in (extra or {}).items()
    ]
    headers += [(b"content-length", b"%d" % len(body)), (b"content-type", content_type)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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


def v2_version(action: str) -> str | None:
    """The version of a V2 path's rest ``versions/{version}/infer`` (None: not that path)."""
    if action.startswith("versions/") and action.endswith("/infer"):
        version = action[len("versions/") : -len("/infer")]
        if version and "/" not in version:
            return version
    return None


class FastPath:
    """ASGI layer answering the predict, feedback and V2 infer endpoints (see the module
    docstring); every other request goes to ``app``."""

    def __init__(self, app):
        self.app = app
        self._routes: dict[str, APIRoute] | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path = scope["path"]
            if path.startswith(PREFIX):
                name, _, action = path[len(PREFIX) :].partition("/")
                if name and (action == "predict" or action == "feedback"):
                    await self._serve(scope, receive, send, name, action)
                    return
            elif path.startswith(V2_PREFIX):
                name, _, action = path[len(V2_PREFIX) :].partition("/")
                if name and action == "infer":
                    await self._infer(scope, receive, send, name, None)
                    return
                version = v2_version(action)
                if name and version:
                    await self._infer(scope, receive, send, name, version)
                    return
        await self.app(scope, receive, send)

    def routes(self) -> dict[str, APIRoute]:
        """The FastAPI routes of the endpoints: what FastAPI puts in ``scope["route"]``."""
        if self._routes is None:
            routers = (predict.router, feedback.router, inference.router)
            found = {
                action: route
                for router in routers
                for route in router.routes
                for action, path in ENDPOINTS.items()
                if isinstance(route, APIRoute) and route.path == path and "POST" in route.methods
            }
            if set(found) != set(ENDPOINTS):
                raise RuntimeError(f"no routes for {sorted(set(ENDPOINTS) - set(found))}")
            self._routes = found
        return self._routes

    def _enter(self, scope, action: str, path_params: dict) -> None:
        """``scope`` as FastAPI's router leaves it for the route of ``action``."""
        route = self.routes()[action]
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = path_params

    async def _infer(self, scope, receive, send, name: str, version: str | None) -> None:
        if version is None:
            self._enter(scope, "infer", {"name": name})
        else:
            self._enter(scope, "infer_version", {"name": name, "version": version})
        components: Components = scope["app"].state.components
        headers = Headers(scope=scope)
        try:
            check_read(components.settings, headers.get("authorization", ""))
            body, head_length = await inference.serve(
                components, name, version, headers, lambda: read_body(receive)
            )
        except Exception as error:
            response = error_response(error)
            if response is None:
                raise
            await json_response(response, scope["path"])(scope, receive, send)
            return
        if head_length is None:
            await send_body(send, body, b"application/json")
        else:
            extra = {"Inference-Header-Content-Length": str(head_length)}
            await send_body(send, body, b"application/octet-stream", extra)

    async def _serve(self, scope, receive, send, name: str, action: str) -> None:
        self._enter(scope, action, {"name": name})
        components: Components = scope["app"].state.components
        headers = Headers(scope=scope)
        authorization = headers.get("authorization", "")
        try:
            if action == "predict":
                check_read(components.settings, authorization)
                query = scope["query_string"]
                answer = await predict.serve(
                    components,
                    name,
                    query_value(query, "variant"),
                    headers,
                    lambda: read_body(receive),
                    query_value(query, "member"),
                )
            else:
                check_write(components.settings, authorization)
                answer = await feedback.serve(components, name, headers, lambda: read_body(receive))
        except Exception as error:
            response = error_response(error)
            if response is None:
                raise
            await json_response(response)(scope, receive, send)
            return
        await send_json(send, answer)
