"""ASGI middleware: request ids, body-size limit and read timeout, latency metrics,
structured access logs and the JSON 500 of unexpected errors."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time

from service.http.errors import BodyTimeout, BodyTooLarge, error_body, in_form, internal_error

__all__ = ["BodyTimeout", "BodyTooLarge", "ServiceMiddleware"]

log = logging.getLogger("lorentztron.access")
errors_log = logging.getLogger("lorentztron")

# request ids: 128 random bits as 32 hex digits, like a uuid4's hex, from a generator seeded
# by the OS once (ids need to be unique, not secret: no system call per request)
_ids = random.Random(int.from_bytes(os.urandom(32), "big"))


def new_request_id() -> str:
    return f"{_ids.getrandbits(128):032x}"


class ServiceMiddleware:
    """One pass over every HTTP request: assigns ``X-Request-ID`` (or keeps the client's),
    refuses bodies over ``max_body_bytes`` (413, from Content-Length up front or while
    streaming) and bodies that take longer than ``body_timeout`` seconds to arrive (408 and
    the connection closed: the time counted is the time the app waits for the body, so a
    slow client cannot hold a connection, while a request waiting for the service is not
    charged), counts requests and observes latency by route template, and logs one JSON
    line per request (never the Authorization header). An exception that nothing handled
    is logged with its traceback and answered with a JSON 500 (``internal_error``). Its
    own answers take the form of the path's API (``service.http.errors.in_form``)."""

    def __init__(self, app, metrics, max_body_bytes: int, body_timeout: float):
        self.app = app
        self.metrics = metrics
        self.limit = max_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        status = {"code": 500}

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["started"] = True
                message.setdefault("headers", []).append(
                    (b"x-request-id", request_id.encode("latin-1"))
                )
            await send(message)

        path = scope["path"]
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await _send_json(
                send_with_id,
                413,
                in_form(
                    error_body(
                        "payload_too_large",
                        f"request body larger than {self.limit} bytes",
                        {"limit": self.limit},
                    ),
                    path,
                ),
            )
        else:
            received = 0
            # seconds left to wait for the rest of the body (None: the body is complete)
            left: float | None = self.body_timeout

            async def limited_receive():
                nonlocal received, left
                if left is None:  # the body is in (a wait for the disconnect, say)
                    return await receive()
                loop = asyncio.get_running_loop()
                waited = loop.time()
                try:
                    async with asyncio.timeout(left):
                        message = await receive()
                except TimeoutError:
                    raise BodyTimeout(self.body_timeout) from None
                left -= loop.time() - waited
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.limit:
                        raise BodyTooLarge(self.limit)
                    if not message.get("more_body", False):
                        left = None
                return message

            try:
                await self.app(scope, limited_receive, send_with_id)
            except Exception:
                errors_log.exception(
                    "unexpected error in %s %s (request %s)",
                    scope["method"],
                    path,
                    request_id,
                )
                if "started" in status:
                    raise  # the response is under way: nothing to answer
                status["code"], body, _ = internal_error()
                await _send_json(send_with_id, status["code"], in_form(body, path))
        elapsed = time.perf_counter() - started
        endpoint = getattr(scope.get("route"), "path", None) or _mount_template(scope)
        method = scope["method"]
        self.metrics.request_done(endpoint, method, status["code"], elapsed)
        if log.isEnabledFor(logging.INFO):
            fields = {
                "request_id": request_id,
                "method": method,
                "path": path,
                "endpoint": endpoint,
                "status": status["code"],
                "ms": round(elapsed * 1000, 3),
            }
            # the fields travel as such (service.ops.cli's JSON formatter merges them into the
            # line); the message is for any other handler
            log.info(
                "%s %s %s %.3f ms (request %s)",
                method,
                fields["path"],
                fields["status"],
                fields["ms"],
                request_id,
                extra={"fields": fields},
            )


def _mount_template(scope) -> str:
    """The endpoint label of a request no route answered: a mounted app's path template
    (``/docs/assets/{path}``, the documentation's scripts and styles: a ``Mount`` sets no
    ``route`` but moves its path from ``path`` to ``root_path``), else ``unmatched``."""
    if "endpoint" not in scope:  # (set by the route or mount that matched)
        return "unmatched"
    mounted = scope.get("root_path", "")[len(scope.get("app_root_path", "")) :]
    return f"{mounted}/{{path}}" if mounted else "unmatched"


async def _send_json(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
