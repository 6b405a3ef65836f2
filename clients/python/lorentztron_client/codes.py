"""The service's stable error codes: the kind of refusal of each and what it means.

A copy of ``service.exceptions.CODES`` (class names instead of classes), so that the client
imports nothing of the server; tests/service/test_client.py checks that the two agree."""

#: every code a client can receive: the name of its kind of refusal and what it means
CODES: dict[str, tuple[str, str]] = {
    "invalid_input": ("InvalidRequest", "a value, a dimension, an index or a field is invalid"),
    "malformed_json": ("InvalidRequest", "the body is not valid JSON"),
    "invalid_params": ("InvalidRequest", "a model parameter is unknown or out of its range"),
    "invalid_label": ("InvalidRequest", "a regression label is not a finite number"),
    "unknown_label": ("InvalidRequest", "a label is not one of the model's classes"),
    "unknown_prediction_id": ("InvalidRequest", "no pending prediction has this id"),
    "expired_prediction_id": (
        "InvalidRequest",
        "the prediction id existed but expired (or was dropped under memory pressure)",
    ),
    "duplicate_prediction_id": ("InvalidRequest", "a prediction id appears twice in a request"),
    "no_averaged_variant": ("InvalidRequest", "the model's kind has no time-averaged variant"),
    "unlearnable_example": (
        "InvalidRequest",
        "the model cannot learn an example (its score overflows float64)",
    ),
    "model_too_large": ("InvalidRequest", "the model would exceed a size limit"),
    "kind_unavailable": ("InvalidRequest", "the kind needs an optional extra that is missing"),
    "idempotency_key_reused": (
        "InvalidRequest",
        "the Idempotency-Key was used with another request to this model (endpoint or body)",
    ),
    "unauthorized": ("Unauthorized", "the endpoint needs a bearer key"),
    "forbidden": ("Forbidden", "the key is not allowed to do this"),
    "model_not_found": ("NotFound", "no model has this name"),
    "member_not_found": ("NotFound", "the model has no member (challenger) of this name"),
    "snapshot_not_found": ("NotFound", "the model has no snapshot of this version"),
    "not_found": ("NotFound", "no such path"),
    "method_not_allowed": ("MethodNotAllowed", "the path does not take this method"),
    "model_exists": ("Conflict", "a model with this name exists"),
    "member_exists": ("Conflict", "the model has a member (challenger) of this name"),
    "member_serves": ("Conflict", "the member serves: promote another one before removing it"),
    "too_many_models": ("Conflict", "the service holds its maximum number of models"),
    "memory_budget_exceeded": (
        "Conflict",
        "the models would hold more memory than the budget (MAX_TOTAL_BYTES)",
    ),
    "wrong_role": (
        "Conflict",
        "a snapshot, a restore or a change of members, policies or learning on an api replica",
    ),
    "snapshot_mismatch": ("Conflict", "the snapshot was taken from another configuration"),
    "idempotency_key_in_use": (
        "Conflict",
        "a request with this Idempotency-Key is being handled: retry when it is answered",
    ),
    "payload_too_large": ("TooLarge", "the body is larger than the limit"),
    "batch_too_large": ("TooLarge", "more instances or examples than one JSON request takes"),
    "unsupported_media_type": ("UnsupportedMediaType", "the body's Content-Type is not read here"),
    "store_unavailable": ("Unavailable", "the snapshot store failed"),
    "log_unavailable": ("Unavailable", "the feedback log failed (see the feedback endpoint)"),
    "not_ready": (
        "Unavailable",
        "the service is starting (models being restored): retry, or wait for /readyz",
    ),
    "request_timeout": (
        "RequestTimeout",
        "the body was not received within `BODY_TIMEOUT` seconds (the connection is closed)",
    ),
    "client_closed": ("ClientClosed", "the client disconnected before its body was read"),
    "internal_error": ("Internal", "an unexpected error (a bug), logged with its traceback"),
}
