"""Errors as JSON ``{"error": {"code", "message", "details"}}`` with stable codes.

Each kind of error has one plain function returning ``(status, body, headers)``; FastAPI's
exception handlers (``install_error_handlers``) and the fast path of the hot endpoints
(``service.fastpath``) both answer with them, so the two give the same responses.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

#: an error response: status, JSON body, extra headers (or None)
ErrorResponse = tuple[int, dict, dict | None]


class APIError(Exception):
    """An error with an HTTP status, a stable machine-readable code and a human message.

    ``applied`` is True when the request changed the model before it failed, or may have
    (its record was logged, or may have been: a lost Redis reply): what it consumed
    (prediction ids) stays consumed. Otherwise nothing of the request was applied, and the
    ids it named are given back."""

    def __init__(
        self, status: int, code: str, message: str, details: Any = None, applied: bool = False
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.applied = applied


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` when a streamed body passes the limit (answered with 413).

    An HTTPException, so that FastAPI re-raises it when it meets it while reading a body
    parameter (instead of turning it into a 400 "error parsing the body")."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body larger than {limit} bytes")
        self.limit = limit

    def __str__(self) -> str:
        return self.detail


def error_body(code: str, message: str, details: Any = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details}}


_HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def api_error(error: APIError) -> ErrorResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return error.status, error_body(error.code, error.message, error.details), headers


def validation_error(errors: list[dict]) -> ErrorResponse:
    """422 for request validation errors (FastAPI's ``RequestValidationError.errors()``):
    ``malformed_json`` if the body is not JSON, else ``invalid_input`` naming the first
    field."""
    details = [
        {
            "field": ".".join(str(part) for part in e.get("loc", ())),
            "message": e.get("msg"),
            "type": e.get("type"),
        }
        for e in errors
    ]
    if any(d["type"] == "json_invalid" for d in details):
        return 422, error_body("malformed_json", "the body is not valid JSON", details), None
    first = details[0] if details else {"field": "", "message": "invalid input"}
    message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
    return 422, error_body("invalid_input", message, details), None


def body_too_large(error: BodyTooLarge) -> ErrorResponse:
    return 413, error_body("payload_too_large", str(error), {"limit": error.limit}), None


def http_error(status: int, detail: Any) -> ErrorResponse:
    return status, error_body(_HTTP_CODES.get(status, "http_error"), str(detail)), None


def internal_error() -> ErrorResponse:
    return 500, error_body("internal_error", "internal server error"), None


def error_response(error: Exception) -> ErrorResponse | None:
    """The response to an error a request handler raised (None: unexpected, a 500)."""
    if isinstance(error, APIError):
        return api_error(error)
    if isinstance(error, RequestValidationError):
        return validation_error(error.errors())
    if isinstance(error, BodyTooLarge):
        return body_too_large(error)
    if isinstance(error, StarletteHTTPException):
        return http_error(error.status_code, error.detail)
    return None


def json_response(response: ErrorResponse) -> JSONResponse:
    status, body, headers = response
    return JSONResponse(body, status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError):
        return json_response(api_error(error))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError):
        return json_response(validation_error(error.errors()))

    @app.exception_handler(BodyTooLarge)
    async def _too_large(request: Request, error: BodyTooLarge):
        return json_response(body_too_large(error))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException):
        return json_response(http_error(error.status_code, error.detail))
