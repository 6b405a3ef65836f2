"""The OpenAPI description, true to the API: every error a route answers with its real
envelope (``ErrorResponse``) and codes, the request bodies the routes read themselves
(predict, feedback) as components, and ``CreateModel``'s ``params`` described per kind from
the kind catalogue's declarations (``service.model.kinds``)."""

from __future__ import annotations

import copy
from http import HTTPStatus

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from service.http.errors import codes_by_status
from service.http.schemas import ErrorResponse, Example, FeedbackRequest, PredictRequest
from service.model.kinds import KINDS, params_schema
from service.model.spec import CreateModel

REF = "#/components/schemas/{model}"
#: the models of the bodies that routes read themselves (added to the components)
BODIES: tuple[type[BaseModel], ...] = (CreateModel, PredictRequest, FeedbackRequest, Example)


def errors(*statuses: int, model: type[BaseModel] = ErrorResponse) -> dict:
    """The ``responses`` of a route that may answer these error statuses (``model``: the
    error body, the V2 protocol's under ``/v2``)."""
    by_status = codes_by_status()
    return {
        status: {
            "model": model,
            "description": f"{HTTPStatus(status).phrase}: "
            + ", ".join(f"`{code}`" for code in by_status[status]),
        }
        for status in statuses
    }


def json_body(model: type[BaseModel]) -> dict:
    """``openapi_extra`` of a route whose JSON body is ``model`` (read by the route)."""
    schema = {"$ref": REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def feedback_body() -> dict:
    """``openapi_extra`` of the feedback route: JSON, NDJSON or svmlight."""
    return {
        "requestBody": {
            "required": True,
            "description": "JSON (`application/json`, per-example results), NDJSON "
            "(`application/x-ndjson`, one example object per line) or svmlight text "
            "(`text/x-svmlight`: `label index:value ...` with 1-based indices and numeric "
            "labels). The whole body is validated before anything is learned.",
            "content": {
                "application/json": {"schema": {"$ref": REF.format(model="FeedbackRequest")}},
                "application/x-ndjson": {
                    "schema": {"type": "string"},
                    "example": '{"x": [0.0, 1.0], "label": 1}\n',
                },
                "text/x-svmlight": {"schema": {"type": "string"}, "example": "+1 3:0.5 17:1\n"},
            },
        }
    }


def create_model_schema(base: dict) -> dict:
    """``CreateModel`` as one alternative per kind: the kind's ``params`` (their ranges and
    defaults), and only the options the kind takes (time averaging, the ordinal reduction,
    the classes of binary-only kinds, PQR's regression task without classes)."""
    variants = []
    for kind in KINDS.values():
        for task in ("binary", "regression") if kind.name == "pqr" else (None,):
            variant = copy.deepcopy(base)
            variant.pop("examples", None)
            variant["title"] = f"CreateModel ({kind.name}{', ' + task if task else ''})"
            props = variant["properties"]
            props["kind"] = {"type": "string", "enum": [kind.name]}
            params = params_schema(kind)
            props["params"] = params
            if kind.family != "online" or not kind.cls.averageable:
                del props["averaging"]
            if not kind.margins:
                del props["calibration"]
            if kind.family != "multi-output":
                props["multiclass"] = {**props["multiclass"], "enum": ["ovo", "ovr"]}
            classes = _unique(props["classes"])
            if kind.family == "batch":
                classes = {**classes, "minItems": 2, "maxItems": 2}
            props["classes"] = {"anyOf": [classes, {"type": "null"}], "default": None}
            if task is not None:
                task_schema = params["properties"]["task"]
                params["properties"]["task"] = {**task_schema, "enum": [task]}
                if task == "regression":
                    params["required"] = ["task"]
                    # without params a PQR model is binary: the body matches one variant only
                    variant["required"] = [*variant.get("required", []), "params"]
                    del props["classes"]
            variants.append(variant)
    return {"title": "CreateModel", "description": base.get("description"), "oneOf": variants}


def _unique(classes: dict) -> dict:
    """The classes' array schema (its null branch aside), with distinct items."""
    branches = [b for b in classes.pop("anyOf", [classes]) if b.get("type") != "null"]
    classes.pop("default", None)  # (null: the null branch's, declared beside the branches)
    return {**classes, **branches[0], "uniqueItems": True}


_ERROR_422 = {
    "description": "Unprocessable Content: `invalid_input`",
    "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorResponse")}}},
}


def build_openapi(app: FastAPI) -> dict:
    """The app's OpenAPI document (cached on the app)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _, defs = models_json_schema([(m, "validation") for m in BODIES], ref_template=REF)
    components.update(defs.get("$defs", {}))
    components["CreateModel"] = create_model_schema(components["CreateModel"])
    for path in schema["paths"].values():  # FastAPI's 422 of path parameters
        for operation in path.values():
            answer = operation.get("responses", {}).get("422")
            if answer and "HTTPValidationError" in str(answer):
                operation["responses"]["422"] = copy.deepcopy(_ERROR_422)
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    app.openapi_schema = schema
    return schema
