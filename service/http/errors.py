"""Errors as HTTP answers: ``{"error": {"code", "message", "details"}}`` with stable codes.

The one place that knows HTTP statuses: each domain error class (``service.exceptions``) has
its status here, and the framework's own errors (validation, unknown paths and methods,
oversized bodies) get the same envelope. FastAPI's exception handlers
(``install_error_handlers``) and the fast path (``service.http.fastpath``) answer through
``error_response``, so the two give the same responses.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import compile_path

from service.exceptions import (
    CODES,
    ClientClosed,
    Conflict,
    Forbidden,
    Internal,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    RequestTimeout,
    ServiceError,
    TooLarge,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
)

#: an error response: status, JSON body, extra headers (or None)
ErrorResponse = tuple[int, dict, dict | None]

#: the HTTP status of each class of domain error (499: nginx's "client closed request")
STATUS: dict[type[ServiceError], int] = {
    InvalidRequest: 422,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    MethodNotAllowed: 405,
    RequestTimeout: 408,
    Conflict: 409,
    TooLarge: 413,
    UnsupportedMediaType: 415,
    ClientClosed: 499,
    Internal: 500,
    Unavailable: 503,
}


def status_of(code: str) -> int:
    """The HTTP status of an error code."""
    return STATUS[CODES[code][0]]


def codes_by_status() -> dict[int, list[str]]:
    """Every error code a client can receive, by HTTP status (docs/api.md, OpenAPI)."""
    found: dict[int, list[str]] = {}
    for code in CODES:
        found.setdefault(status_of(code), []).append(code)
    return found


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` when a streamed body passes the limit (answered with 413).

    An HTTPException, so that FastAPI re-raises it when it meets it while reading a body
    parameter (instead of turning it into a 400 "error parsing the body")."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body larger than {limit} bytes")
        self.limit = limit

    def __str__(self) -> str:
        return self.detail


class BodyTimeout(StarletteHTTPException):
    """Raised from ``receive`` when a body is not received within the time allowed
    (answered with 408 and the connection closed). An HTTPException, as ``BodyTooLarge``."""

    def __init__(self, timeout: float):
        super().__init__(408, f"the request body was not received within {timeout:g} s")
        self.timeout = timeout

    def __str__(self) -> str:
        return self.detail


#: most characters of a request's own text that an error message quotes (a field name, a
#: value): an error answer stays small whatever the request held
ECHO_CHARS = 200
#: most entries of a validation error's ``details`` (the first ones; the message names the first)
MAX_DETAILS = 20


def shown(value: Any, limit: int = ECHO_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages that quote the input
    (the repr of a huge value is not built whole: its type is enough past the limit)."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return repr(value[:limit]) + f"... ({len(value)} characters)"
    if isinstance(value, list | dict | tuple) and len(value) > limit:
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def bounded(text: str, limit: int = 4 * ECHO_CHARS) -> str:
    """A message cut to ``limit`` characters (the last guard: messages quote ``shown``)."""
    return text if len(text) <= limit else text[:limit] + "..."


def error_body(code: str, message: str, details: Any = None) -> dict:
    return {"error": {"code": code, "message": bounded(message), "details": details}}


def service_error(error: ServiceError) -> ErrorResponse:
    status = STATUS[next(c for c in type(error).__mro__ if c in STATUS)]
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return status, error_body(error.code, error.message, error.details), headers


def validation_error(errors: list[dict]) -> ErrorResponse:
    """422 for request validation errors (pydantic's ``errors()``): ``malformed_json`` if the
    body is not JSON, else ``invalid_input`` naming the first field. The offending ``input``
    that pydantic keeps with each error is never echoed, and the fields (which hold the keys
    of the request's objects) and messages are cut to ``ECHO_CHARS``: a 16 MB key or value
    gets a small answer."""
    details = [
        {
            "field": bounded(".".join(str(part) for part in e.get("loc", ())), ECHO_CHARS),
            "message": bounded(str(e.get("msg")), ECHO_CHARS),
            "type": e.get("type"),
        }
        for e in errors[:MAX_DETAILS]
    ]
    if any(d["type"] == "json_invalid" for d in details):
        return 422, error_body("malformed_json", "the body is not valid JSON", details), None
    first = details[0] if details else {"field": "", "message": "invalid input"}
    message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
    return 422, error_body("invalid_input", message, details), None


def body_too_large(error: BodyTooLarge) -> ErrorResponse:
    return 413, error_body("payload_too_large", str(error), {"limit": error.limit}), None


def body_timeout(error: BodyTimeout) -> ErrorResponse:
    """408, and the connection closed (the rest of the body is never read)."""
    details = {"timeout": error.timeout}
    return 408, error_body("request_timeout", str(error), details), {"Connection": "close"}


_HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def http_error(error: StarletteHTTPException) -> ErrorResponse:
    """The framework's own errors (unknown path, method not allowed: with its ``Allow``), as
    the domain error of their code."""
    code = _HTTP_CODES.get(error.status_code, "invalid_input")
    status, body, headers = service_error(CODES[code][0](code, str(error.detail)))
    return status, body, {**(headers or {}), **(error.headers or {})} or None


def internal_error() -> ErrorResponse:
    """An unexpected error (a bug, logged with its traceback by the middleware)."""
    return service_error(Internal("internal_error", "internal server error"))


def error_response(error: Exception) -> ErrorResponse | None:
    """The response to an error a request handler raised (None: unexpected, a 500)."""
    if isinstance(error, ServiceError):
        return service_error(error)
    if isinstance(error, RequestValidationError):
        return validation_error(error.errors())
    if isinstance(error, BodyTooLarge):
        return body_too_large(error)
    if isinstance(error, BodyTimeout):
        return body_timeout(error)
    if isinstance(error, StarletteHTTPException):
        return http_error(error)
    if isinstance(error, ClientDisconnect):  # answered to nobody; counted as 499, not 5xx
        return service_error(ClientClosed("client_closed", "the client went away mid-request"))
    return None


def in_form(body: dict, path: str) -> dict:
    """An error body in the form of the API ``path`` belongs to: under ``/v2/`` (the Open
    Inference Protocol) ``{"error": message}``, with the code beside it."""
    if path.startswith("/v2/") or path == "/v2":
        return {"error": body["error"]["message"], "code": body["error"]["code"]}
    return body


def json_response(response: ErrorResponse, path: str = "") -> JSONResponse:
    """The error as a JSON response, in the form of its path's API (``in_form``)."""
    status, body, headers = response
    return JSONResponse(in_form(body, path), status, headers=headers)


def method_table(routes) -> list[tuple[re.Pattern, frozenset[str]]]:
    """(path regex, methods) of routes (APIRoute / Route objects), for a 405's ``Allow``."""
    return [
        (compile_path(route.path)[0], frozenset(route.methods))
        for route in routes
        if getattr(route, "methods", None)
    ]


def allowed_methods(table, path: str) -> list[str]:
    """Every method the routes take on ``path``."""
    return sorted({m for regex, methods in table if regex.match(path) for m in methods})


def install_error_handlers(app: FastAPI) -> None:
    async def handler(request: Request, error: Exception):
        status, body, headers = error_response(error)
        if status == 405:  # every method of the path, not only the first route's
            table = request.app.state.methods
            headers = {"Allow": ", ".join(allowed_methods(table, request.url.path))}
        return json_response((status, body, headers), request.url.path)

    for kind in (ServiceError, RequestValidationError, StarletteHTTPException, ClientDisconnect):
        app.add_exception_handler(kind, handler)
