"""The hot endpoints without the framework: ``POST /v1/models/{name}/predict`` and
``POST /v1/models/{name}/feedback`` served by a small ASGI layer in front of FastAPI.

FastAPI spends more CPU on a single-example request than the model does: a scan of every
route's regular expression, then dependency solving (a ``Request`` object, the dependency
tree). This layer sits inside ``ServiceMiddleware`` (request ids, body limit, metrics and
access logs are unchanged) and answers these two endpoints itself, with the routes' own
code: it recognises them by a prefix test and one split of the path, sets
``scope["route"]`` to FastAPI's route object (metrics and logs name the same endpoint),
checks the key with the routes' dependency functions (``service.http.deps``), and awaits the
routes' ``serve`` (the same body validation by the schemas' ``TypeAdapter``s, the same
feedback groups). Errors are answered by ``service.http.errors``, as FastAPI's handlers do;
anything unexpected propagates to ``ServiceMiddleware`` (logged, JSON 500).

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
from service.http.routes import feedback, predict

PREFIX = "/v1/models/"
ENDPOINTS = {
    "predict": "/v1/models/{name}/predict",
    "feedback": "/v1/models/{name}/feedback",
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
    body = _encode(answer).encode("utf-8")
    extra = answer_headers(answer) or {}
    headers = [
        (key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in extra.items()
    ]
    headers += [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]
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


class FastPath:
    """ASGI layer answering the predict and feedback endpoints (see the module docstring);
    every other request goes to ``app``."""

    def __init__(self, app):
        self.app = app
        self._routes: dict[str, APIRoute] | None = None

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
        """The FastAPI routes of the two endpoints: what FastAPI puts in ``scope["route"]``."""
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
        route = self.routes()[action]
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {"name": name}
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
