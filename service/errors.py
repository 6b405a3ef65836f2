"""Errors as JSON ``{"error": {"code", "message", "details"}}`` with stable codes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class APIError(Exception):
    """An error with an HTTP status, a stable machine-readable code and a human message."""

    def __init__(self, status: int, code: str, message: str, details: Any = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError):
        return JSONResponse(
            error_body(error.code, error.message, error.details),
            error.status,
            headers=_auth_header(error.status),
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError):
        details = [
            {
                "field": ".".join(str(part) for part in e.get("loc", ())),
                "message": e.get("msg"),
                "type": e.get("type"),
            }
            for e in error.errors()
        ]
        if any(d["type"] == "json_invalid" for d in details):
            return JSONResponse(
                error_body("malformed_json", "the body is not valid JSON", details), 422
            )
        first = details[0] if details else {"field": "", "message": "invalid input"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        return JSONResponse(error_body("invalid_input", message, details), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException):
        code = _HTTP_CODES.get(error.status_code, "http_error")
        return JSONResponse(error_body(code, str(error.detail)), error.status_code)


def _auth_header(status: int) -> dict | None:
    return {"WWW-Authenticate": "Bearer"} if status == 401 else None
