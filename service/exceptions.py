"""Domain errors: what the service refuses, with a stable machine-readable code.

The domain (models, journal, lifecycle, worker) raises these and knows no HTTP status;
``service.http.errors`` maps each class to its status in one place. Every code a client can
receive is declared once in :data:`CODES` with its class and meaning: docs/api.md's list of
error codes and the OpenAPI description are checked against it.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refused request: a stable ``code`` (declared in :data:`CODES` for this class), a
    human ``message`` and optional ``details``.

    ``applied`` is True when the request changed the model before it failed, or may have
    (its record was logged, or may have been: a lost Redis reply): what it consumed
    (prediction ids) stays consumed. Otherwise nothing of it was applied."""

    def __init__(self, code: str, message: str, details: Any = None, applied: bool = False):
        declared = CODES.get(code)
        if declared is None or not issubclass(type(self), declared[0]):
            raise TypeError(f"{type(self).__name__} cannot carry the code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.applied = applied


class InvalidRequest(ServiceError):
    """The request is well formed but cannot be applied (bad values, labels, ids, params)."""


class NotFound(ServiceError):
    """What the request names does not exist (or no longer does)."""


class Conflict(ServiceError):
    """The request conflicts with the service's state or role."""


class MethodNotAllowed(ServiceError):
    """The path does not take this method."""


class TooLarge(ServiceError):
    """The request exceeds a size limit."""


class UnsupportedMediaType(ServiceError):
    """The body's Content-Type is not one the endpoint reads."""


class Unauthorized(ServiceError):
    """No bearer key where one is needed."""


class Forbidden(ServiceError):
    """A bearer key that is not allowed to do this."""


class Unavailable(ServiceError):
    """A dependency (the snapshot store, the feedback log) failed; try again."""


class RequestTimeout(ServiceError):
    """The request's body did not arrive in the time allowed."""


class ClientClosed(ServiceError):
    """The client went away before its request was read (answered to nobody)."""


class Internal(ServiceError):
    """An unexpected error (a bug): logged with its traceback."""


#: every code a client can receive: its class and what it means
CODES: dict[str, tuple[type[ServiceError], str]] = {
    "invalid_input": (InvalidRequest, "a value, a dimension, an index or a field is invalid"),
    "malformed_json": (InvalidRequest, "the body is not valid JSON"),
    "invalid_params": (InvalidRequest, "a model parameter is unknown or out of its range"),
    "invalid_label": (InvalidRequest, "a regression label is not a finite number"),
    "unknown_label": (InvalidRequest, "a label is not one of the model's classes"),
    "unknown_prediction_id": (InvalidRequest, "no pending prediction has this id"),
    "expired_prediction_id": (
        InvalidRequest,
        "the prediction id existed but expired (or was dropped under memory pressure)",
    ),
    "duplicate_prediction_id": (InvalidRequest, "a prediction id appears twice in a request"),
    "no_averaged_variant": (InvalidRequest, "the model's kind has no time-averaged variant"),
    "unlearnable_example": (
        InvalidRequest,
        "the model cannot learn an example (its score overflows float64)",
    ),
    "model_too_large": (InvalidRequest, "the model would exceed a size limit"),
    "kind_unavailable": (InvalidRequest, "the kind needs an optional extra that is missing"),
    "idempotency_key_reused": (
        InvalidRequest,
        "the Idempotency-Key was used with another request to this model (endpoint or body)",
    ),
    "unauthorized": (Unauthorized, "the endpoint needs a bearer key"),
    "forbidden": (Forbidden, "the key is not allowed to do this"),
    "model_not_found": (NotFound, "no model has this name"),
    "member_not_found": (NotFound, "the model has no member (challenger) of this name"),
    "snapshot_not_found": (NotFound, "the model has no snapshot of this version"),
    "not_found": (NotFound, "no such path"),
    "method_not_allowed": (MethodNotAllowed, "the path does not take this method"),
    "model_exists": (Conflict, "a model with this name exists"),
    "member_exists": (Conflict, "the model has a member (challenger) of this name"),
    "member_serves": (Conflict, "the member serves: promote another one before removing it"),
    "too_many_models": (Conflict, "the service holds its maximum number of models"),
    "memory_budget_exceeded": (
        Conflict,
        "the models would hold more memory than the budget (MAX_TOTAL_BYTES)",
    ),
    "wrong_role": (
        Conflict,
        "a snapshot, a restore or a change of members, policies or learning on an api replica",
    ),
    "snapshot_mismatch": (Conflict, "the snapshot was taken from another configuration"),
    "idempotency_key_in_use": (
        Conflict,
        "a request with this Idempotency-Key is being handled: retry when it is answered",
    ),
    "payload_too_large": (TooLarge, "the body is larger than the limit"),
    "batch_too_large": (TooLarge, "more instances or examples than one JSON request takes"),
    "unsupported_media_type": (UnsupportedMediaType, "the body's Content-Type is not read here"),
    "store_unavailable": (Unavailable, "the snapshot store failed"),
    "log_unavailable": (Unavailable, "the feedback log failed (see the feedback endpoint)"),
    "not_ready": (
        Unavailable,
        "the service is starting (models being restored): retry, or wait for /readyz",
    ),
    "request_timeout": (
        RequestTimeout,
        "the body was not received within `BODY_TIMEOUT` seconds (the connection is closed)",
    ),
    "client_closed": (ClientClosed, "the client disconnected before its body was read"),
    "internal_error": (Internal, "an unexpected error (a bug), logged with its traceback"),
}
