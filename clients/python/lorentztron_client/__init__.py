"""A Python client of the lorentztron service: sync (:class:`Client`) and async
(:class:`AsyncClient`), over httpx alone. It is the distribution ``lorentztron-client``
(``pip install ./clients/python`` from a clone of the repository) and imports nothing of the
server: no fastapi, numba or numpy. Rows are lists of numbers or dicts; numpy arrays and
scipy.sparse matrices are taken too when those are installed (read through their methods,
never imported here). Inside the server's package, ``service.client`` re-exports it.

    from lorentztron_client import Client, ModelNotFound

    with Client("http://127.0.0.1:8000", key="my-write-key") as client:
        client.create("demo", kind="dos", n_features=3, params={"rank": 8},
                      classes=["ham", "spam"])
        answer = client.predict("demo", [[0.5, 1.0, -2.0]])       # rows, numpy, scipy.sparse
        answer["predictions"][0]["label"], answer["predictions"][0]["probability"]
        client.feedback("demo", [[0.5, 1.0, -2.0]], ["spam"])      # or prediction ids:
        client.feedback("demo", labels=["ham"], prediction_ids=[p["prediction_id"] ...])
        client.upload("demo", X, y)    # bulk: streamed svmlight (numeric labels) or NDJSON
        try:
            client.model("nope")
        except ModelNotFound as error:
            error.status, error.code, error.message

        client.add_challenger("demo", "c1", kind="dos", params={"rank": 16})
        client.challengers("demo")[0]["comparison"]["verdict"]    # better, worse, undecided
        client.predict("demo", X, member="c1", variant="averaged")  # in the shadow
        client.promote("demo", "c1")                               # c1 serves from now on
        client.set_policy("demo", serve="best", drift=None)        # only the fields given
        client.pause("demo"); client.resume("demo", discard=False)

    async with AsyncClient("http://127.0.0.1:8000") as client:   # the same methods, awaited
        await client.predict("demo", [[0.5, 1.0, -2.0]])

**Errors.** Every error answer raises a subclass of :class:`LorentztronError` with the
service's stable ``code`` (:data:`lorentztron_client.codes.CODES`): one class per code
(``ModelNotFound``, ``MemberNotFound``, ``UnknownLabel``, ...) under one class per kind of
refusal (``NotFound``, ``InvalidRequest``, ``Conflict``, ``Unavailable``, ...); no answer
at all raises :class:`TransportError`.

**Retries** happen only where they are safe: reads and predictions, and writes that carry an
``Idempotency-Key`` (the client makes one for every feedback request, upload part, create,
restore, challenger added, promotion, policy and learning change, and sends it again with
each retry, so the service applies the request once).
They retry connection failures, timeouts and the answers that say "try again" (503, 502,
504, ``idempotency_key_in_use``), ``retries`` times with exponential backoff; ``on_retry``
(an option of both clients) is called with a :class:`Retrying` before each retry.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from .codes import CODES


# -- errors -----------------------------------------------------------------------------------
class LorentztronError(Exception):
    """An error answer of the service (or, for :class:`TransportError`, no answer)."""

    status: int | None = None

    def __init__(self, message: str, code: str | None = None, details: Any = None, status=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = details
        if status is not None:
            self.status = status
        self.request_id: str | None = None


class TransportError(LorentztronError):
    """The service could not be reached or did not answer (after the retries)."""


def _camel(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


#: the class of each kind of refusal, by its name in :data:`CODES`, and its status
_KINDS = {
    "InvalidRequest": 422,
    "Unauthorized": 401,
    "Forbidden": 403,
    "NotFound": 404,
    "MethodNotAllowed": 405,
    "RequestTimeout": 408,
    "Conflict": 409,
    "TooLarge": 413,
    "UnsupportedMediaType": 415,
    "ClientClosed": 499,
    "Internal": 500,
    "Unavailable": 503,
}
KINDS: dict[str, type[LorentztronError]] = {
    name: type(name, (LorentztronError,), {"status": status, "__module__": __name__})
    for name, status in _KINDS.items()
}
#: the class of every stable error code
ERRORS: dict[str, type[LorentztronError]] = {}
for _code, (_kind, _meaning) in CODES.items():
    _base = KINDS[_kind]
    _name = _camel(_code)
    ERRORS[_code] = (
        _base
        if _name == _base.__name__
        else type(_name, (_base,), {"__doc__": _meaning, "__module__": __name__})
    )
globals().update({cls.__name__: cls for cls in (*KINDS.values(), *ERRORS.values())})
__all__ = [
    "AsyncClient",
    "Client",
    "LorentztronError",
    "Retrying",
    "TransportError",
    *sorted({cls.__name__ for cls in (*KINDS.values(), *ERRORS.values())}),
]


def error_of(response: httpx.Response) -> LorentztronError:
    """The exception of an error answer (its code's class; by status for other answers)."""
    try:
        error = response.json()["error"]
        code, message, details = error["code"], error["message"], error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = None, response.text[:500] or response.reason_phrase, None
    cls = ERRORS.get(code)
    if cls is None:
        kinds = [k for k in KINDS.values() if k.status == response.status_code]
        cls = kinds[0] if kinds else LorentztronError
    exception = cls(message, code, details, status=response.status_code)
    exception.request_id = response.headers.get("x-request-id")
    return exception


#: answers that say "try again"
_RETRY_STATUSES = {502, 503, 504}
_RETRY_CODES = {"idempotency_key_in_use"}


# -- requests ---------------------------------------------------------------------------------
@dataclass
class Call:
    """One request: what to send, whether it is safe to send again, how to read the answer."""

    method: str
    path: str
    json: Any = None
    content: Callable[[], Iterable[bytes] | bytes] | None = None  # made anew for each try
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] | None = None
    retry: bool = False
    read: Callable[[httpx.Response], Any] = lambda response: response.json()

    @property
    def rest(self) -> dict:
        """The request's other arguments for httpx."""
        return {"json": self.json, "headers": self.headers, "params": self.params}


@dataclass(frozen=True)
class _Retry:
    delay: float


@dataclass(frozen=True)
class Retrying:
    """A request about to be sent again (what ``on_retry`` gets): the request, this retry's
    number (from 1) of ``retries``, the seconds until it, and what failed: an error answer
    (``response``) or none at all (``error``). ``str()``: one line that says so."""

    call: Call
    attempt: int
    retries: int
    delay: float
    response: httpx.Response | None = None
    error: BaseException | None = None

    @property
    def reason(self) -> str:
        """What failed, in a few words: "connection refused", "timed out", "503
        service_unavailable"."""
        if self.response is not None:
            code = _code(self.response) or self.response.reason_phrase
            return f"{self.response.status_code} {code}".strip()
        text = str(self.error)
        if isinstance(self.error, httpx.ConnectError) and "refused" in text.lower():
            return "connection refused"
        if isinstance(self.error, httpx.TimeoutException):
            return "timed out"
        return text or type(self.error).__name__

    def __str__(self) -> str:
        return (
            f"{self.call.method} {self.call.path}: {self.reason}; retry {self.attempt} of "
            f"{self.retries} in {self.delay:.2f} s"
        )


def _no_content(response: httpx.Response) -> None:
    return None


class _Unset:
    """An argument not given (where None means something: ``drift=None`` removes it)."""

    def __repr__(self) -> str:
        return "<not given>"


_UNSET: Any = _Unset()


def _key() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


def _is_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def instances(X) -> list[dict]:
    """Instances of the service from rows: a scipy.sparse matrix (``indices`` + ``values``),
    a 2-D numpy array or lists of numbers (``x``), dicts of named features (``features``),
    or instance dicts as the service takes them (``x``, ``indices``/``values``, ``features``)."""
    if _is_sparse(X):
        X = X.tocsr()
        return [
            {
                "indices": X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                "values": X.data[X.indptr[i] : X.indptr[i + 1]].tolist(),
            }
            for i in range(X.shape[0])
        ]
    if hasattr(X, "tolist") and getattr(X, "ndim", 2) == 1:
        X = [X]  # one row
    found = []
    for row in X.tolist() if hasattr(X, "tolist") else X:
        if isinstance(row, dict):
            form = {"x", "indices", "values", "features"}
            found.append(row if set(row) & form else {"features": row})
        else:
            found.append({"x": [float(v) for v in row]})
    return found


def _labels(y) -> list:
    values = y.tolist() if hasattr(y, "tolist") else list(y)
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]


def _svmlight_lines(X, y, start: int, stop: int) -> Iterator[bytes]:
    """svmlight lines (1-based indices) of rows ``start:stop``, a few hundred at a time."""
    labels = _labels(y[start:stop])
    if _is_sparse(X):
        X = X.tocsr()
    for chunk in range(start, stop, 256):
        lines = []
        for i in range(chunk, min(chunk + 256, stop)):
            if _is_sparse(X):
                indices = X.indices[X.indptr[i] : X.indptr[i + 1]].tolist()
                values = X.data[X.indptr[i] : X.indptr[i + 1]].tolist()
            else:
                row = X[i].tolist() if hasattr(X[i], "tolist") else list(X[i])
                indices = [j for j, v in enumerate(row) if v != 0]
                values = [row[j] for j in indices]
            pairs = zip(indices, values, strict=True)
            features = " ".join(f"{j + 1}:{float(v)!r}" for j, v in pairs)
            lines.append(f"{labels[i - start]} {features}\n")
        yield "".join(lines).encode()


def _ndjson_lines(X, y, start: int, stop: int) -> Iterator[bytes]:
    rows = X[start:stop] if (_is_sparse(X) or hasattr(X, "shape")) else list(X)[start:stop]
    labels = _labels(y[start:stop])
    chunk = []
    for instance, label in zip(instances(rows), labels, strict=True):
        chunk.append(json.dumps({**instance, "label": label}, separators=(",", ":")) + "\n")
        if len(chunk) == 256:
            yield "".join(chunk).encode()
            chunk = []
    if chunk:
        yield "".join(chunk).encode()


def _row_count(X) -> int:
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _rows_per_part(X, max_bytes: int) -> int:
    """How many rows keep a part's body under ``max_bytes`` (about 26 bytes a value)."""
    n = max(1, _row_count(X))
    if _is_sparse(X):
        values = X.nnz / n
    elif hasattr(X, "shape") and len(X.shape) == 2:
        values = X.shape[1]
    else:
        values = max(len(row) if not isinstance(row, dict) else 10 for row in list(X)[:100])
    return max(1, int(max_bytes // (26 * max(values, 1) + 40)))


class _Calls:
    """The requests of every endpoint (no I/O: the clients send them)."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8000",
        key: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        headers: dict[str, str] | None = None,
        max_batch: int = 10_000,
        on_retry: Callable[[Retrying], None] | None = None,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.url = url.rstrip("/")
        self.max_batch = max_batch
        self.retries = retries
        #: called before each retry (a :class:`Retrying`): a command line says it waits
        self.on_retry = on_retry
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = {"User-Agent": "lorentztron-client", **(headers or {})}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.timeout = timeout

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = response.headers.get("retry-after") if response is not None else None
        if after is not None and after.replace(".", "", 1).isdigit():
            return min(float(after), self.max_backoff)
        return min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)

    def _settle(self, call: Call, attempt: int, response, error):
        """After one try: the answer read, or its error raised, or ``_Retry`` (safe to send
        again, after a delay)."""
        if error is None and response.is_success:
            return call.read(response)
        if self._again(call, attempt, response):
            delay = self._delay(attempt, response)
            if self.on_retry is not None:
                self.on_retry(Retrying(call, attempt + 1, self.retries, delay, response, error))
            return _Retry(delay)
        if error is not None:
            raise TransportError(f"{call.method} {call.path}: {error!r}") from error
        raise error_of(response)

    def _again(self, call: Call, attempt: int, response: httpx.Response | None) -> bool:
        """Whether to send ``call`` again after this answer (None: no answer)."""
        if not call.retry or attempt >= self.retries:
            return False
        if response is None:
            return True
        if response.status_code in _RETRY_STATUSES:
            return True
        return response.status_code == 409 and _code(response) in _RETRY_CODES

    def _split(self, items: list, call_of):
        """The requests of ``items`` in parts of at most ``max_batch``, as a generator: send
        it each part's answer, throw it a part's error; it returns the answers in order. A
        refusal that names the service's smaller MAX_BATCH makes the parts that size (the
        part is sent again); any other error is raised."""
        answers, start = [], 0
        while True:
            part = items[start : start + self.max_batch]
            try:
                answers.append((yield call_of(part)))
            except LorentztronError as error:
                limit = _server_limit(error, len(part))
                if limit is None:
                    raise
                self.max_batch = limit
                continue
            start += len(part)
            if start >= len(items):
                return answers

    # -- the endpoints ----------------------------------------------------------------------
    def _create(
        self,
        name: str,
        kind: str,
        n_features: int | None = None,
        hashed: int | None = None,
        params: dict | None = None,
        classes: list | None = None,
        **options,
    ) -> Call:
        """Create a model (``options``: ``multiclass``, ``averaging``, ``calibration``, as
        in ``POST /v1/models``); returns its info."""
        size = {"n_features": n_features} if hashed is None else {"hashed": hashed}
        body = {"name": name, "kind": kind, "params": params or {}, "input": size, **options}
        if classes is not None:
            body["classes"] = list(classes)
        return Call("POST", "/v1/models", json=body, headers=_key(), retry=True)

    def _models(self, after: str | None, page: int) -> Call:
        """A page of the models' infos after the name ``after``: ``{"models", "next"}``."""
        params = {"limit": str(page)} if after is None else {"limit": str(page), "after": after}
        return Call("GET", "/v1/models", params=params, retry=True)

    def _model(self, name: str) -> Call:
        """One model's info: config, counters, version, progressive metrics."""
        return Call("GET", f"/v1/models/{name}", retry=True)

    def _delete(self, name: str) -> Call:
        """Delete a model and its snapshots."""
        return Call("DELETE", f"/v1/models/{name}", read=_no_content)

    def _predict(self, name: str, X, variant: str | None = None, member: str | None = None) -> Call:
        """One predict request of all the rows ``X`` (``predict`` splits them into requests of
        at most ``max_batch`` rows)."""
        return self._predict_call(name, instances(X), variant, member)

    def _predict_call(
        self, name: str, rows: list[dict], variant: str | None, member: str | None
    ) -> Call:
        body = {"instances": rows}
        params = {"variant": variant, "member": member}
        params = {k: v for k, v in params.items() if v is not None} or None
        return Call("POST", f"/v1/models/{name}/predict", json=body, params=params, retry=True)

    def _feedback_examples(self, X=None, labels=None, prediction_ids=None) -> list[dict]:
        """The examples of a feedback request: labelled rows ``X`` or prediction ids."""
        if (X is None) == (prediction_ids is None):
            raise ValueError("give either rows X or prediction_ids, with the labels")
        labels = _labels(labels)
        if X is not None:
            return [
                {**instance, "label": label}
                for instance, label in zip(instances(X), labels, strict=True)
            ]
        return [
            {"prediction_id": pid, "label": label}
            for pid, label in zip(prediction_ids, labels, strict=True)
        ]

    def _feedback_call(self, name: str, examples: list[dict]) -> Call:
        """One feedback request of ``examples``, with an idempotency key of its own (a retry
        is learned once)."""
        path = f"/v1/models/{name}/feedback"
        return Call("POST", path, json={"examples": examples}, headers=_key(), retry=True)

    def _add_challenger(
        self,
        name: str,
        challenger: str,
        kind: str,
        params: dict | None = None,
        averaging: dict | None = None,
        calibration: str | None = None,
        **options,
    ) -> Call:
        """Add the challenger ``challenger``: another kind or other parameters that learn
        the model's feedback beside the member that serves, from the next example on
        (``averaging`` as in ``create``, say ``{"interval": 500}``; ``options``:
        ``multiclass``). Returns its info."""
        body = {"name": challenger, "kind": kind, "params": params or {}, **options}
        if averaging is not None:
            body["averaging"] = averaging
        if calibration is not None:
            body["calibration"] = calibration
        path = f"/v1/models/{name}/challengers"
        return Call("POST", path, json=body, headers=_key(), retry=True)

    def _challengers(self, name: str) -> Call:
        """The challengers' info: each one's progressive metrics per variant and its
        comparison with what serves on the same examples."""
        path = f"/v1/models/{name}/challengers"
        return Call("GET", path, retry=True, read=lambda r: r.json()["challengers"])

    def _remove_challenger(self, name: str, challenger: str) -> Call:
        """Take a challenger out (``MemberServes`` for the member that serves)."""
        path = f"/v1/models/{name}/challengers/{challenger}"
        return Call("DELETE", path, read=_no_content)

    def _promote(self, name: str, challenger: str, variant: str | None = None) -> Call:
        """The challenger (its ``variant``; default live) serves from now on; the member that
        served stays as a challenger (promote it back to undo). Returns the model's info."""
        body = {"challenger": challenger}
        if variant is not None:
            body["variant"] = variant
        path = f"/v1/models/{name}/promote"
        return Call("POST", path, json=body, headers=_key(), retry=True)

    def _set_policy(
        self, name: str, *, promotion: Any = _UNSET, serve: Any = _UNSET, drift: Any = _UNSET
    ) -> Call:
        """New policies (``PATCH /v1/models/{name}``); only the ones given are sent:
        ``promotion`` (``{"auto", "confidence", "min_examples"}``), ``serve`` (``"fixed"``
        or ``"best"``), ``drift`` (``{"detector", "params", "on_drift"}``, or None to remove
        the detector). Returns the model's info."""
        given = {"promotion": promotion, "serve": serve, "drift": drift}
        body = {field: value for field, value in given.items() if value is not _UNSET}
        if not body:
            raise ValueError("give at least one of promotion, serve, drift")
        return Call("PATCH", f"/v1/models/{name}", json=body, headers=_key(), retry=True)

    def _set_learning(self, name: str, paused: bool, discard: bool = False) -> Call:
        """Pause learning (feedback is still logged and acknowledged, predictions go on) or
        resume it: the backlog is learned in order first, or dropped with ``discard``.
        Returns the model's info (its ``learning``: ``{"paused", "backlog"}``)."""
        body = {"paused": paused}
        if discard:
            body["discard"] = True
        path = f"/v1/models/{name}/learning"
        return Call("POST", path, json=body, headers=_key(), retry=True)

    def _pause(self, name: str) -> Call:
        """Pause learning (``set_learning(name, paused=True)``)."""
        return self._set_learning(name, True)

    def _resume(self, name: str, discard: bool = False) -> Call:
        """Resume learning: the backlog is learned in order first, or dropped with
        ``discard`` (``set_learning(name, paused=False, discard=discard)``)."""
        return self._set_learning(name, False, discard)

    def _snapshot(self, name: str) -> Call:
        """Write a snapshot of the model now."""
        return Call("POST", f"/v1/models/{name}/snapshots", retry=True)

    def _snapshots(self, name: str) -> Call:
        """The model's snapshots, oldest first."""
        path = f"/v1/models/{name}/snapshots"
        return Call("GET", path, retry=True, read=lambda r: r.json()["snapshots"])

    def _restore(self, name: str, version: int) -> Call:
        """Serve snapshot ``version``'s state from the next version on (restored once)."""
        path = f"/v1/models/{name}/snapshots/{version}/restore"
        return Call("POST", path, headers=_key(), retry=True)

    def _export(self, name: str) -> Call:
        """The model as a safetensors file (bytes): ``import_model`` reads it back."""
        path = f"/v1/models/{name}/export"
        return Call("GET", path, retry=True, read=lambda r: r.content)

    def _import_model(self, data: bytes, name: str) -> Call:
        """Create the model ``name`` from a safetensors file (``export``, ``lorentztron
        learn``). Returns its info."""
        headers = {"content-type": "application/vnd.safetensors", **_key()}
        path = f"/v1/models/{name}"
        return Call("PUT", path, content=lambda: data, headers=headers, retry=True)

    def _health(self) -> Call:
        """``/healthz``: the process answers."""
        return Call("GET", "/healthz", retry=True)

    def _ready(self) -> Call:
        """``/readyz`` (raises Unavailable while not ready)."""
        return Call("GET", "/readyz", retry=False)

    def _upload_parts(
        self, name: str, X, y, format: str = "auto", max_bytes: int = 8 << 20
    ) -> Iterator[tuple[int, int, Call]]:
        """The parts of a bulk upload: (first row, end row, request), each part a body of at
        most about ``max_bytes`` streamed as svmlight (numeric labels) or NDJSON, with its
        own idempotency key."""
        n = _row_count(X)
        if len(y) != n:
            raise ValueError(f"{n} rows but {len(y)} labels")
        if format == "auto":
            numeric = all(isinstance(v, int | float) for v in _labels(y))
            format = "svmlight" if numeric and (_is_sparse(X) or hasattr(X, "shape")) else "ndjson"
        if format not in ("svmlight", "ndjson"):
            raise ValueError(f"format must be auto, svmlight or ndjson, not {format!r}")
        lines, media = (
            (_svmlight_lines, "text/x-svmlight")
            if format == "svmlight"
            else (_ndjson_lines, "application/x-ndjson")
        )
        step = _rows_per_part(X, max_bytes)
        for start in range(0, n, step):
            stop = min(n, start + step)
            yield (
                start,
                stop,
                Call(
                    "POST",
                    f"/v1/models/{name}/feedback",
                    content=lambda start=start, stop=stop: lines(X, y, start, stop),
                    headers={"content-type": media, **_key()},
                    retry=True,
                ),
            )


def _code(response: httpx.Response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def _server_limit(error: LorentztronError, sent: int) -> int | None:
    """The server's MAX_BATCH from its ``batch_too_large`` refusal of ``sent`` rows (its
    ``details``, or its message "at most N instances"), if that is fewer than ``sent``."""
    if error.code != "batch_too_large":
        return None
    details = error.details if isinstance(error.details, dict) else {}
    limit = details.get("max_batch")
    if not isinstance(limit, int):
        found = re.search(r"at most (\d+)", error.message or "")
        limit = int(found.group(1)) if found else None
    return limit if limit is not None and 0 < limit < sent else None


def _joined(answers: list[dict]) -> dict:
    """One predict answer from the answers of its parts, in order: their predictions joined;
    the model, member and variant of the first part (a model's member or variant that
    changes between parts changes those); its ``version`` the first part's, and with more
    than one part ``versions``, each part's."""
    if len(answers) == 1:
        return answers[0]
    joined = dict(answers[0])
    joined["predictions"] = [p for answer in answers for p in answer["predictions"]]
    joined["versions"] = [answer["version"] for answer in answers]
    return joined


def _learned(answers: list[dict]) -> dict:
    """One feedback answer from the answers of its parts, in order: the counts summed,
    the per-example ``results`` joined, the ``version`` the last part's (the model's after
    every example), and with more than one part ``versions``, each part's."""
    if len(answers) == 1:
        return answers[0]
    joined = dict(answers[-1])
    for count in ("learned", "aggressive", "logged"):
        if any(count in answer for answer in answers):
            joined[count] = sum(answer.get(count) or 0 for answer in answers)
    results = [answer.get("results") for answer in answers]
    joined["results"] = None if None in results else [r for part in results for r in part]
    joined["versions"] = [answer["version"] for answer in answers]
    return joined


def _summary(answers: list[dict], rows: int) -> dict:
    """One answer for a whole upload."""
    return {
        "requests": len(answers),
        "examples": rows,
        "learned": sum(a.get("learned", 0) for a in answers),
        "logged": sum(a.get("logged") or 0 for a in answers),
        "aggressive": sum(a.get("aggressive", 0) for a in answers),
        "version": answers[-1]["version"] if answers else None,
    }


ENDPOINTS = (
    "create",
    "model",
    "delete",
    "add_challenger",
    "challengers",
    "remove_challenger",
    "promote",
    "set_policy",
    "set_learning",
    "pause",
    "resume",
    "snapshot",
    "snapshots",
    "restore",
    "export",
    "import_model",
    "health",
    "ready",
)


class Client(_Calls):
    """The service's client (module docstring); a context manager, or ``close()`` it."""

    def __init__(self, url: str = "http://127.0.0.1:8000", key: str | None = None, **options):
        super().__init__(url, key, **options)
        self.http = httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout)

    def send(self, call: Call):
        """Send a request, retried where safe; its answer read, or its error raised."""
        for attempt in itertools.count():
            response = error = None
            try:
                content = call.content() if call.content is not None else None
                response = self.http.request(call.method, call.path, content=content, **call.rest)
            except httpx.TransportError as failure:
                error = failure
            outcome = self._settle(call, attempt, response, error)
            if not isinstance(outcome, _Retry):
                return outcome
            time.sleep(outcome.delay)

    def _sent(self, requests) -> list:
        """The answers of ``_split``'s requests, each sent in turn."""
        call = next(requests)
        while True:
            try:
                answer = self.send(call)
            except LorentztronError as error:
                step = partial(requests.throw, error)
            else:
                step = partial(requests.send, answer)
            try:
                call = step()
            except StopIteration as stop:
                return stop.value

    def predict(self, name: str, X, variant: str | None = None, member: str | None = None):
        """Labels, scores, probabilities and prediction ids of rows ``X`` (lists, dicts, numpy
        arrays, scipy.sparse matrices), from the ``variant`` (live or averaged; default: the
        one that serves) of the member that serves, or of the challenger ``member`` (scored
        in the shadow: nothing it answers is learned or compared). The answer names the
        ``member`` and ``variant`` that scored. Rows beyond ``max_batch`` (the client's
        option, default the service's default MAX_BATCH, 10000) go in further requests,
        their answers joined in order; a service with a smaller MAX_BATCH says so in its
        refusal, and the client then sends parts of that size."""
        rows = instances(X)
        answers = self._sent(
            self._split(rows, lambda part: self._predict_call(name, part, variant, member))
        )
        return _joined(answers)

    def models(self, page: int = 1000) -> list:
        """Every model's info, by name: ``page`` a request (at most 1,000: the service's
        largest page), each asking for the models after the last one's ``next``."""
        found, after = [], None
        while True:
            answer = self.send(self._models(after, page))
            found += answer["models"]
            after = answer.get("next")
            if after is None:
                return found

    def feedback(self, name: str, X=None, labels=None, prediction_ids=None):
        """Learn labelled rows ``X`` (or earlier predictions by ``prediction_ids``), in
        order, each scored first; per-example results. Each request carries an idempotency
        key, so a retry is learned once. Examples beyond ``max_batch`` go in further
        requests, in order, their answers joined (``learned``, ``aggressive`` and
        ``logged`` summed, ``results`` joined, ``version`` the last part's, ``versions``
        each part's); a service with a smaller MAX_BATCH says so in its refusal, and the
        client then sends parts of that size. A part refused otherwise raises its error:
        the parts before it are learned."""
        examples = self._feedback_examples(X, labels, prediction_ids)
        answers = self._sent(self._split(examples, lambda part: self._feedback_call(name, part)))
        return _learned(answers)

    def upload(
        self, name: str, X, y, format: str = "auto", max_bytes: int = 8 << 20, progress=None
    ):
        """Learn many labelled rows (numpy arrays, scipy.sparse matrices, lists) as bulk
        feedback: streamed parts of at most about ``max_bytes``, each sent once (an
        idempotency key per part). ``progress(done, total)`` is called after each part.
        Returns ``{"requests", "examples", "learned", "logged", "aggressive", "version"}``."""
        answers, total = [], _row_count(X)
        for _, stop, call in self._upload_parts(name, X, y, format, max_bytes):
            answers.append(self.send(call))
            if progress is not None:
                progress(stop, total)
        return _summary(answers, total)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient(_Calls):
    """:class:`Client` for asyncio: the same methods, to be awaited."""

    def __init__(self, url: str = "http://127.0.0.1:8000", key: str | None = None, **options):
        super().__init__(url, key, **options)
        self.http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout)

    async def send(self, call: Call):
        """Send a request, retried where safe; its answer read, or its error raised."""
        for attempt in itertools.count():
            response = error = None
            try:
                content = call.content() if call.content is not None else None
                if content is not None and not isinstance(content, bytes):
                    content = _AsyncBody(content)
                response = await self.http.request(
                    call.method, call.path, content=content, **call.rest
                )
            except httpx.TransportError as failure:
                error = failure
            outcome = self._settle(call, attempt, response, error)
            if not isinstance(outcome, _Retry):
                return outcome
            await asyncio.sleep(outcome.delay)

    async def models(self, page: int = 1000) -> list:
        """:meth:`Client.models`, awaited."""
        found, after = [], None
        while True:
            answer = await self.send(self._models(after, page))
            found += answer["models"]
            after = answer.get("next")
            if after is None:
                return found

    async def _sent(self, requests) -> list:
        """:meth:`Client._sent`, awaited."""
        call = next(requests)
        while True:
            try:
                answer = await self.send(call)
            except LorentztronError as error:
                step = partial(requests.throw, error)
            else:
                step = partial(requests.send, answer)
            try:
                call = step()
            except StopIteration as stop:
                return stop.value

    async def predict(self, name: str, X, variant: str | None = None, member: str | None = None):
        """:meth:`Client.predict`, awaited."""
        rows = instances(X)
        answers = await self._sent(
            self._split(rows, lambda part: self._predict_call(name, part, variant, member))
        )
        return _joined(answers)

    async def feedback(self, name: str, X=None, labels=None, prediction_ids=None):
        """:meth:`Client.feedback`, awaited."""
        examples = self._feedback_examples(X, labels, prediction_ids)
        answers = await self._sent(
            self._split(examples, lambda part: self._feedback_call(name, part))
        )
        return _learned(answers)

    async def upload(
        self, name: str, X, y, format: str = "auto", max_bytes: int = 8 << 20, progress=None
    ):
        """:meth:`Client.upload`, awaited."""
        answers, total = [], _row_count(X)
        for _, stop, call in self._upload_parts(name, X, y, format, max_bytes):
            answers.append(await self.send(call))
            if progress is not None:
                progress(stop, total)
        return _summary(answers, total)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class _AsyncBody:
    """A sync iterator of body chunks as an async one (httpx.AsyncClient streams those)."""

    def __init__(self, chunks: Iterable[bytes]):
        self.chunks = iter(chunks)

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        try:
            return next(self.chunks)
        except StopIteration:
            raise StopAsyncIteration from None


def _endpoint(name: str, asynchronous: bool):
    """A client method that sends what ``_Calls._<name>`` builds."""
    build = getattr(_Calls, "_" + name)
    if asynchronous:

        async def method(self, *args, **kwargs):
            return await self.send(build(self, *args, **kwargs))
    else:

        def method(self, *args, **kwargs):
            return self.send(build(self, *args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = build.__doc__
    method.__wrapped__ = build  # (its signature, for help())
    return method


for _name in ENDPOINTS:
    setattr(Client, _name, _endpoint(_name, asynchronous=False))
    setattr(AsyncClient, _name, _endpoint(_name, asynchronous=True))
