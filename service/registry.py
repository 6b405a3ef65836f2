"""Live models: name -> model, its lock, version, counters and progressive metrics.

Concurrency: each model has a readers-writer lock. Feedback (the single writer) holds it
exclusively for the whole batch, so concurrent feedback requests never interleave inside an
update; predictions share it, so they read a consistent model and run in parallel (the
kernels release the GIL). Everything a request needs is validated before the lock is taken.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from core.averaging import Averaged
from core.base import BinaryClassifier, Estimator
from core.dos import DoSClassifier
from core.features import CSRBatch, FeatureHasher, Row, batch_from_rows, dense_row, sparse_row
from core.linear import LinearPA
from core.multiclass import OneVsOne, OneVsRest
from service.errors import APIError
from service.schemas import CreateModel, Instance

#: kind -> (class, accepted params); hyperparameters are validated by the class itself.
KINDS: dict[str, tuple[type[BinaryClassifier], frozenset[str]]] = {
    "linear-pa": (LinearPA, frozenset({"mode", "C", "fit_intercept"})),
    "dos": (DoSClassifier, frozenset({"rank", "mode", "C", "init_scale", "seed"})),
}


class RWLock:
    """Many readers or one writer; a waiting writer blocks new readers (no starvation)."""

    def __init__(self):
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_read(self):
        with self._condition:
            while self._writer or self._writers_waiting:
                self._condition.wait()
            self._readers += 1

    def release_read(self):
        with self._condition:
            self._readers -= 1
            if self._readers == 0:
                self._condition.notify_all()

    def acquire_write(self):
        with self._condition:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._condition.wait()
            self._writers_waiting -= 1
            self._writer = True

    def release_write(self):
        with self._condition:
            self._writer = False
            self._condition.notify_all()

    def read(self):
        return _Held(self.acquire_read, self.release_read)

    def write(self):
        return _Held(self.acquire_write, self.release_write)


class _Held:
    def __init__(self, acquire, release):
        self._acquire, self._release = acquire, release

    def __enter__(self):
        self._acquire()

    def __exit__(self, *exc):
        self._release()


class Progressive:
    """Progressive-validation metrics: every example is scored before it is learned; we keep
    the cumulative accuracy and hinge loss and the same over the last ``window`` examples."""

    def __init__(self, window: int):
        self.window = window
        self.n = 0
        self.correct = 0
        self.loss_sum = 0.0
        self._recent_correct = np.zeros(window, dtype=bool)
        self._recent_loss = np.zeros(window)

    def update(self, correct: np.ndarray, losses: np.ndarray) -> None:
        k = correct.shape[0]
        if k == 0:
            return
        positions = (self.n + np.arange(k)) % self.window
        # a batch longer than the window keeps its last `window` examples
        self._recent_correct[positions[-self.window :]] = correct[-self.window :]
        self._recent_loss[positions[-self.window :]] = losses[-self.window :]
        self.n += k
        self.correct += int(np.count_nonzero(correct))
        self.loss_sum += float(np.sum(losses))

    def summary(self) -> dict[str, Any]:
        recent = min(self.n, self.window)
        return {
            "examples": self.n,
            "accuracy": self.correct / self.n if self.n else None,
            "hinge_loss": self.loss_sum / self.n if self.n else None,
            "recent_examples": recent,
            "recent_accuracy": float(np.mean(self._recent_correct[:recent])) if recent else None,
            "recent_hinge_loss": float(np.mean(self._recent_loss[:recent])) if recent else None,
        }


def build_estimator(spec: CreateModel, averaging_interval: int, max_floats: int) -> Averaged:
    """The estimator behind a model spec; raises APIError(422) naming the bad parameter."""
    cls, accepted = KINDS[spec.kind]
    unknown = sorted(set(spec.params) - accepted)
    if unknown:
        raise APIError(
            422,
            "invalid_params",
            f"unknown parameter(s) {unknown} for kind {spec.kind!r}; accepted: {sorted(accepted)}",
            {"field": "params"},
        )
    n_features = spec.input.size
    classes = spec.classes or [-1, 1]
    if len(set(classes)) != len(classes):
        raise APIError(422, "invalid_input", "classes must be distinct", {"field": "classes"})
    n_models = (
        1
        if len(classes) == 2
        else (len(classes) * (len(classes) - 1) // 2 if spec.multiclass == "ovo" else len(classes))
    )
    rank = spec.params.get("rank", 4) if spec.kind == "dos" else 0
    floats = (n_features + 1) * (2 * rank if spec.kind == "dos" else 1) * n_models * 2
    if isinstance(rank, int) and floats > max_floats:
        raise APIError(
            422,
            "model_too_large",
            f"the model would hold {floats} floats (live and "
            f"averaged), more than the limit {max_floats}",
            {"field": "input"},
        )
    try:
        base = cls(n_features=n_features, **spec.params)
        if len(classes) == 2:
            model: Estimator = base
        elif spec.multiclass == "ovo":
            model = OneVsOne(base=base, classes=list(classes))
        else:
            model = OneVsRest(base=base, classes=list(classes))
        averaging = spec.averaging
        return Averaged(
            model=model,
            interval=averaging.interval if averaging else averaging_interval,
            alignment=averaging.alignment if averaging else "paper",
        )
    except (TypeError, ValueError) as error:
        raise APIError(422, "invalid_params", str(error), {"field": "params"}) from None


def instance_row(instance: Instance, n_features: int) -> Row:
    """Validate one instance into a row (ValueError names the problem)."""
    if instance.x is not None:
        return dense_row(instance.x, n_features)
    if instance.indices is not None:
        return sparse_row(instance.indices, instance.values, n_features)
    return FeatureHasher(n_features).transform_one(instance.features)


def compact(row: Row) -> Row:
    """A row without its zeros (dense rows kept for feedback by prediction id)."""
    indices, values = row
    if indices.shape[0] and np.count_nonzero(values) < values.shape[0]:
        keep = np.flatnonzero(values)
        return indices[keep], values[keep]
    return indices, values


@dataclass
class LiveModel:
    """One named model: its estimator, lock, version and counters."""

    name: str
    spec: CreateModel
    estimator: Averaged
    metrics_window: int
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)
    version: int = 0
    predictions: int = 0
    last_snapshot_version: int | None = None
    last_snapshot_at: float | None = None
    lock: RWLock = field(default_factory=RWLock)

    def __post_init__(self):
        self.classes = list(self.spec.classes or [-1, 1])
        self.binary = len(self.classes) == 2
        self.n_features = self.spec.input.size
        self.progressive = Progressive(self.metrics_window)
        self.n_learned = 0
        self.n_aggressive = 0

    # -- labels ---------------------------------------------------------------------------
    def label_index(self, label, where: str) -> int:
        for k, known in enumerate(self.classes):
            if (
                type(label) is not bool
                and label == known
                and (isinstance(label, str) == isinstance(known, str))
            ):
                return k
        raise APIError(
            422,
            "unknown_label",
            f"{where}: unknown label {label!r}; the model's classes are {self.classes}",
            {"field": where},
        )

    # -- prediction -----------------------------------------------------------------------
    def predict_rows(self, rows: list[Row], variant: str) -> tuple[int, list, list]:
        """Labels and scores of validated rows, and the version they were computed at."""
        batch = batch_from_rows(rows)
        with self.lock.read():
            version = self.version
            scorer = self.estimator._scorer(variant)
            scores = scorer._score_batch(batch) if self.binary else None
            if self.binary:
                labels = [self.classes[1] if s > 0 else self.classes[0] for s in scores]
                score_list = scores.tolist()
            else:
                X = csr_of(batch, self.n_features)
                labels = scorer.predict_many(X).tolist()
                score_list = np.asarray(scorer.score_many(X)).tolist()
            self.predictions += len(rows)
        return version, labels, score_list

    # -- learning -------------------------------------------------------------------------
    def learn_rows(self, rows: list[Row], label_indices: np.ndarray) -> dict[str, Any]:
        """Learn validated rows in order (one writer); progressive metrics first."""
        return self.learn_batch(batch_from_rows(rows), label_indices)

    def learn_batch(self, batch: CSRBatch, label_indices: np.ndarray) -> dict[str, Any]:
        """Learn a validated batch in order (one writer), scoring each example before it is
        learned (progressive validation)."""
        rows = batch_rows(batch) if not self.binary else range(batch.n_rows)
        with self.lock.write():
            if self.binary:
                y = np.where(label_indices == 1, 1.0, -1.0)
                steps = self.estimator.learn_many(csr_of(batch, self.n_features), y)
                predicted_index = (steps.scores > 0).astype(np.int64)
                losses, aggressive = steps.losses, steps.aggressive
            else:
                predicted_index = np.empty(len(rows), dtype=np.int64)
                losses = np.empty(len(rows))
                aggressive = np.empty(len(rows), dtype=bool)
                for i, (row, k) in enumerate(zip(rows, label_indices, strict=True)):
                    step = self.estimator.learn_one(row, self.classes[k])
                    predicted_index[i] = self.classes.index(step.predicted)
                    losses[i] = step.loss
                    aggressive[i] = step.n_aggressive > 0
            if batch.n_rows:
                self.version += 1
            self.progressive.update(predicted_index == label_indices, losses)
            self.n_learned += batch.n_rows
            n_aggressive = int(np.count_nonzero(aggressive))
            self.n_aggressive += n_aggressive
            version = self.version
        return {
            "version": version,
            "predicted_index": predicted_index,
            "losses": losses,
            "aggressive": aggressive,
            "n_aggressive": n_aggressive,
        }

    # -- state ----------------------------------------------------------------------------
    def snapshot_state(self) -> tuple[int, dict]:
        with self.lock.read():
            return self.version, self.estimator.get_state()

    def restore(self, state: dict, version: int | None = None) -> int:
        """Load a state (checked first); the version moves on (or is set on start-up)."""
        with self.lock.write():
            self.estimator.set_state(state)
            self.version = self.version + 1 if version is None else version
            return self.version

    def parameter_norm(self) -> float:
        """Frobenius norm of the live model's parameters (no copy)."""
        with self.lock.read():
            total = sum(
                float(np.vdot(a, a))
                for _, a in self.estimator.live_.arrays()
                if a.dtype.kind == "f"
            )
        return float(np.sqrt(total))

    def info(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "name": self.name,
            "kind": spec.kind,
            "params": spec.params,
            "input": spec.input.model_dump(exclude_none=True),
            "classes": self.classes,
            "multiclass": None if self.binary else spec.multiclass,
            "averaging": {
                "interval": self.estimator.interval,
                "alignment": self.estimator.alignment,
            },
            "version": self.version,
            "created_at": self.created_at,
            "examples_learned": self.n_learned,
            "aggressive_updates": self.n_aggressive,
            "predictions": self.predictions,
            "last_snapshot_version": self.last_snapshot_version,
            "metrics": self.progressive.summary(),
        }


def batch_rows(batch: CSRBatch) -> list[Row]:
    return [batch.row(i) for i in range(batch.n_rows)]


def csr_of(batch: CSRBatch, n_features: int) -> sp.csr_matrix:
    """A scipy view of a validated batch (no copy)."""
    return sp.csr_matrix(
        (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, n_features), copy=False
    )


@dataclass
class _Pending:
    model_uid: str
    row: Row
    expires_at: float
    nbytes: int


class PredictionCache:
    """Features of recent predictions, so feedback can name a ``prediction_id``.

    Bounded in time (TTL) and memory (bytes of the kept rows); the oldest entries go first.
    Thread-safe.
    """

    def __init__(self, ttl: float, max_bytes: int, clock=time.monotonic):
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[str, _Pending] = OrderedDict()
        self._lock = threading.RLock()
        self.nbytes = 0
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, model_uid: str, rows: list[Row]) -> list[str]:
        now = self.clock()
        ids = [uuid.uuid4().hex for _ in rows]
        with self._lock:
            for prediction_id, row in zip(ids, rows, strict=True):
                row = compact(row)
                nbytes = row[0].nbytes + row[1].nbytes + 64
                self._entries[prediction_id] = _Pending(model_uid, row, now + self.ttl, nbytes)
                self.nbytes += nbytes
            while self.nbytes > self.max_bytes and self._entries:
                self._drop(next(iter(self._entries)))
                self.evicted += 1
        return ids

    def peek(self, prediction_id: str, model_uid: str) -> Row:
        """The row of a pending prediction of this model, or APIError (422)."""
        with self._lock:
            entry = self._entries.get(prediction_id)
            if entry is None or entry.model_uid != model_uid:
                raise APIError(
                    422,
                    "unknown_prediction_id",
                    f"unknown prediction_id "
                    f"{prediction_id!r} for this model (ids live {self.ttl:g} s, "
                    "are answered once, and the oldest are dropped under memory "
                    "pressure)",
                )
            if entry.expires_at <= self.clock():
                self._drop(prediction_id)
                self.expired += 1
                raise APIError(
                    422, "expired_prediction_id", f"prediction_id {prediction_id!r} expired"
                )
            return entry.row

    def take(self, prediction_ids: list[str], model_uid: str) -> list[Row]:
        """The rows of these pending predictions, removed atomically: all or none (an id is
        answered once). APIError (422) names the first unknown, expired or repeated id."""
        with self._lock:
            if len(set(prediction_ids)) != len(prediction_ids):
                raise APIError(
                    422, "duplicate_prediction_id", "a prediction_id appears twice in the request"
                )
            rows = [self.peek(prediction_id, model_uid) for prediction_id in prediction_ids]
            for prediction_id in prediction_ids:
                self._drop(prediction_id)
        return rows

    def sweep(self) -> int:
        """Drop expired entries; returns how many."""
        now = self.clock()
        dropped = 0
        with self._lock:
            while self._entries:
                prediction_id, entry = next(iter(self._entries.items()))
                if entry.expires_at > now:
                    break
                self._drop(prediction_id)
                dropped += 1
            self.expired += dropped
        return dropped

    def forget_model(self, model_uid: str) -> None:
        with self._lock:
            for prediction_id in [k for k, e in self._entries.items() if e.model_uid == model_uid]:
                self._drop(prediction_id)

    def _drop(self, prediction_id: str) -> None:
        entry = self._entries.pop(prediction_id)
        self.nbytes -= entry.nbytes


class Registry:
    """The live models of one service process (created by the app's lifespan)."""

    def __init__(self, max_models: int):
        self.max_models = max_models
        self._models: dict[str, LiveModel] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._models)

    def names(self) -> list[str]:
        return sorted(self._models)

    def models(self) -> list[LiveModel]:
        with self._lock:
            return [self._models[name] for name in sorted(self._models)]

    def get(self, name: str) -> LiveModel:
        model = self._models.get(name)
        if model is None:
            raise APIError(404, "model_not_found", f"no model named {name!r}")
        return model

    def add(self, model: LiveModel) -> None:
        with self._lock:
            if model.name in self._models:
                raise APIError(409, "model_exists", f"a model named {model.name!r} exists")
            if len(self._models) >= self.max_models:
                raise APIError(409, "too_many_models", f"at most {self.max_models} models")
            self._models[model.name] = model

    def remove(self, name: str) -> LiveModel:
        with self._lock:
            model = self._models.pop(name, None)
        if model is None:
            raise APIError(404, "model_not_found", f"no model named {name!r}")
        return model
