"""Request bodies to validated batches, the same for FastAPI's routes and the fast path.

Create bodies are JSON (``CreateModel``); predict bodies are JSON (``PredictRequest``);
feedback bodies are JSON (``FeedbackRequest``, per-example results), NDJSON (one ``Example``
per line) or svmlight text. Bodies are validated by the schemas' pydantic ``TypeAdapter``s
(the very models the OpenAPI description is made of), then every row against the model's
input (dimension, indices, finite values), every label against its classes, and prediction
ids against the pending predictions, before anything is applied.

Every JSON body is parsed by pydantic's parser (``validate_json``, ``from_json``), whose depth
is bounded: a deeply nested body is ``malformed_json``, never a RecursionError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from core.datasets import SvmlightIndexError, svmlight_batch
from core.features import (
    CSRBatch,
    FeatureHasher,
    Row,
    batch_from_rows,
    dense_row,
    sparse_row,
)
from service.exceptions import InvalidRequest, ServiceError, TooLarge, UnsupportedMediaType
from service.http.errors import ECHO_CHARS, bounded, shown
from service.http.schemas import Example, FeedbackRequest, Instance, PredictRequest
from service.model.cache import PredictionCache
from service.model.live import LiveModel
from service.model.spec import NAME_PATTERN, CreateModel

NDJSON_TYPES = {"application/x-ndjson", "application/ndjson", "application/jsonl"}
SVMLIGHT_TYPES = {"text/x-svmlight", "application/x-svmlight", "text/plain"}

_CREATE = TypeAdapter(CreateModel)
_PREDICT = TypeAdapter(PredictRequest)
_FEEDBACK = TypeAdapter(FeedbackRequest)
_EXAMPLE = TypeAdapter(Example)
_VARIANT = TypeAdapter(Literal["live", "averaged"])
_MEMBER = re.compile(NAME_PATTERN.strip("^$"))


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_json(media: str) -> bool:
    """JSON bodies: ``application/json``, ``application/*+json``, or no Content-Type."""
    return media in ("", "application/json") or (
        media.startswith("application/") and media.endswith("+json")
    )


def _unsupported(content_type: str, accepted: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        "unsupported_media_type", f"unsupported Content-Type {shown(content_type)}; use {accepted}"
    )


def _validated(adapter: TypeAdapter, body: bytes, where: tuple = ("body",)):
    """The body validated by ``adapter``: RequestValidationError (FastAPI's locations,
    under ``body``) if it is not JSON or does not fit the schema."""
    try:
        return adapter.validate_json(body)
    except ValidationError as error:
        errors = [{**e, "loc": (*where, *e["loc"])} for e in error.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def json_document(body: bytes):
    """A JSON document of any shape (its depth bounded: ``malformed_json`` beyond it)."""
    try:
        return from_json(body)
    except ValueError as error:
        message = bounded(f"the body is not valid JSON: {error}", ECHO_CHARS)
        raise InvalidRequest("malformed_json", message) from None


def variant(value: str | None) -> str | None:
    """The ``?variant=`` of a predict request (None when absent: the one that serves)."""
    if value is None or value == "live" or value == "averaged":  # (without pydantic)
        return value
    try:
        return _VARIANT.validate_python(value)
    except ValidationError as error:
        errors = [{**e, "loc": ("query", "variant")} for e in error.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def member(value: str | None) -> str | None:
    """The ``?member=`` of a predict request (None when absent: the champion)."""
    if value is None or _MEMBER.fullmatch(value):
        return value
    raise RequestValidationError(
        [
            {
                "loc": ("query", "member"),
                "msg": "a member's name: 1 to 64 letters, digits, '_', '.', '-'",
                "type": "string_pattern_mismatch",
            }
        ]
    )


def create_request(content_type: str | None, body: bytes) -> CreateModel:
    if not is_json(media_type(content_type)):
        raise _unsupported(media_type(content_type), "application/json")
    return _validated(_CREATE, body)


def predict_request(content_type: str | None, body: bytes) -> PredictRequest:
    if not is_json(media_type(content_type)):
        raise _unsupported(media_type(content_type), "application/json")
    return _validated(_PREDICT, body)


def instance_row(instance: Instance, n_features: int) -> Row:
    """Validate one instance into a row (ValueError names the problem)."""
    if instance.x is not None:
        return dense_row(instance.x, n_features)
    if instance.indices is not None:
        return sparse_row(instance.indices, instance.values, n_features)
    return FeatureHasher(n_features).transform_one(instance.features)


def predict_rows(request: PredictRequest, live: LiveModel, max_batch: int) -> list[Row]:
    if len(request.instances) > max_batch:
        raise TooLarge("batch_too_large", f"at most {max_batch} instances")
    rows = []
    for i, instance in enumerate(request.instances):
        try:
            rows.append(instance_row(instance, live.n_features))
        except ValueError as error:
            raise InvalidRequest(
                "invalid_input", f"instances[{i}]: {error}", {"field": f"instances.{i}"}
            ) from None
    return rows


@dataclass(frozen=True)
class Prepared:
    """A feedback request parsed and validated, ready to be learned: its batch and targets
    (class indices or values), and the prediction ids it took from the cache (given back if
    it is refused before anything of it is applied)."""

    batch: CSRBatch
    targets: np.ndarray
    with_results: bool
    ids: list[str] = field(default_factory=list)
    taken: list = field(default_factory=list)

    def refused(self, cache: PredictionCache, error: BaseException) -> None:
        """Give the ids back when nothing of the request was applied."""
        if self.ids and isinstance(error, ServiceError) and not error.applied:
            cache.give_back(self.ids, self.taken)


def prepare_feedback(
    live: LiveModel, content_type: str | None, body: bytes, cache: PredictionCache, max_batch: int
) -> Prepared:
    """A feedback body, validated (4xx before anything is applied)."""
    kind = media_type(content_type)
    if is_json(kind):
        request = _validated(_FEEDBACK, body)
        if len(request.examples) > max_batch:
            raise TooLarge(
                "batch_too_large",
                f"at most {max_batch} examples per JSON request; use NDJSON or svmlight for "
                "bulk feedback",
            )
        return _examples(live, request.examples, True, cache)
    if kind in NDJSON_TYPES:
        return _examples(live, _ndjson(body), False, cache, where="line")
    if kind in SVMLIGHT_TYPES:
        return _svmlight(live, body)
    raise _unsupported(kind, "application/json, application/x-ndjson or text/x-svmlight")


def _ndjson(body: bytes) -> list[Example]:
    examples = []
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            examples.append(_EXAMPLE.validate_json(line))
        except ValidationError as error:
            first = error.errors(include_url=False)[0]
            where = bounded(".".join(str(p) for p in first["loc"]), ECHO_CHARS)
            code = "malformed_json" if first["type"] == "json_invalid" else "invalid_input"
            raise InvalidRequest(
                code,
                f"line {number}: {where + ': ' if where else ''}{bounded(first['msg'])}",
                {"line": number},
            ) from None
    if not examples:
        raise InvalidRequest("invalid_input", "the body holds no example")
    return examples


def _examples(
    live: LiveModel,
    examples: list[Example],
    with_results: bool,
    cache: PredictionCache,
    where: str = "examples",
) -> Prepared:
    rows: list = [None] * len(examples)
    targets = np.empty(len(examples), dtype=live.family.target_dtype)
    by_id: list[tuple[int, str]] = []
    for i, example in enumerate(examples):
        place = f"{where}.{i}" if where == "examples" else f"line {i + 1}"
        targets[i] = live.target(example.label, f"{place}.label")
        if example.prediction_id is not None:
            by_id.append((i, example.prediction_id))
            continue
        try:
            rows[i] = instance_row(example, live.n_features)
        except ValueError as error:
            raise InvalidRequest("invalid_input", f"{place}: {error}", {"field": place}) from None
    ids, taken = [pid for _, pid in by_id], []
    if by_id:
        taken = cache.take(ids, live.incarnation)
        for (i, _), entry in zip(by_id, taken, strict=True):
            rows[i] = entry.row
    return Prepared(batch_from_rows(rows), targets, with_results, ids, taken)


def _svmlight(live: LiveModel, body: bytes) -> Prepared:
    try:
        batch, y = svmlight_batch(body, live.n_features, source="body")
    except SvmlightIndexError as error:  # the first line with an index out of range
        raise InvalidRequest("invalid_input", str(error), error.details) from None
    except ValueError as error:
        raise InvalidRequest("invalid_input", str(error)) from None
    if batch.n_rows == 0:
        raise InvalidRequest("invalid_input", "the body holds no example")
    return Prepared(batch, live.family.numeric_targets(y), False)
