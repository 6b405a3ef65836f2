"""Schemathesis hooks of ``test_openapi``'s run: the feedback route's text bodies (NDJSON,
svmlight) are sent as the strings the schema generates; a value of another type (negative
testing) cannot be a text body, and is sent as bytes that no text body can be (a NUL). A
model file (``PUT /v1/models/{name}``) is sent as the bytes of what was generated."""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson", "text/x-svmlight")
def text(ctx, value):
    if isinstance(value, str):
        return value.encode()
    return b"\x00" + json.dumps(value).encode()


@schemathesis.serializer("application/vnd.safetensors")
def model_file(ctx, value):
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()
