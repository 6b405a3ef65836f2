"""Live models: name -> model, its lock, version, counters and progressive metrics.

Concurrency: each model has a readers-writer lock. Feedback (the single writer) holds it
exclusively for the whole batch, so concurrent feedback requests never interleave inside an
update; predictions share it, so they read a consistent model and run in parallel (the
kernels release the GIL). Everything a request needs is validated before the lock is taken.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from core.averaging import Averaged
from core.base import BinaryClassifier, Estimator
from core.dos import DoSClassifier
from core.features import (
    CSRBatch,
    FeatureHasher,
    Row,
    batch_from_rows,
    dense_row,
    first_overflowing_row,
    sparse_row,
    squared_norm,
)
from core.linear import LinearPA
from core.mofm import MultiOutputPN, Reservoir
from core.multiclass import OneVsOne, OneVsRest, OrdinalMcRank
from core.pqr import PQR
from core.separation import (
    EllipsoidalClassifier,
    EllipsoidPerceptron,
    Perceptron,
    ShorPerceptron,
)
from service.errors import APIError
from service.feedback_log import (
    FeedbackLog,
    LogCorrupt,
    LogUnavailable,
    Position,
    decode_record,
    encode_record,
)
from service.schemas import CreateModel, Instance

log = logging.getLogger("lorentztron")

#: kind -> (class, accepted params); hyperparameters are validated by the class itself.
KINDS: dict[str, tuple[type[BinaryClassifier], frozenset[str]]] = {
    "linear-pa": (LinearPA, frozenset({"mode", "C", "fit_intercept"})),
    "dos": (DoSClassifier, frozenset({"rank", "mode", "C", "init_scale", "seed"})),
    "pqr": (
        PQR,
        frozenset({"k", "task", "optimizer", "alpha", "beta", "l1", "l2", "separation", "warmup"}),
    ),
    "mofm": (
        MultiOutputPN,
        frozenset(
            {
                "activation",
                "loss",
                "penalty",
                "n_basis",
                "tau",
                "corrective",
                "refit_iter",
                "refine_iter",
                "tol",
                "gram",
                "optimizer",
                "learning_rate",
                "seed",
                *(f"reservoir_{name}" for name in ("size", "policy", "refit_every")),
            }
        ),
    ),
    "perceptron": (Perceptron, frozenset({"fit_intercept"})),
    "ellipsoid-perceptron": (
        EllipsoidPerceptron,
        frozenset({"rho", "on_unseparable", "safeguard", "fit_intercept"}),
    ),
    "shor-perceptron": (
        ShorPerceptron,
        frozenset({"dilation", "step", "step_growth", "fit_intercept"}),
    ),
    "ellipsoidal": (
        EllipsoidalClassifier,
        frozenset(
            {
                "n_components",
                "gsk_bias",
                "solver",
                "max_ratio",
                "separable_tol",
                "reservoir_size",
                "reservoir_refit_every",
            }
        ),
    ),
}

#: batch kinds: feedback fills a window of recent examples, the worker fits the model on it
#: (from scratch) every ``reservoir_refit_every`` examples; predictions use the last fit
BATCH_KINDS = frozenset({"ellipsoidal"})

#: kinds that are one multi-output model over all classes (no binary reduction, no time
#: average: their refits replace the state wholesale)
NATIVE_MULTICLASS = frozenset({"mofm"})
#: the service's own parameters of mofm models (the reservoir the worker refits on)
RESERVOIR_DEFAULTS = {
    "reservoir_size": 10_000,
    "reservoir_policy": "window",
    "reservoir_refit_every": 0,
}


def reservoir_params(spec: CreateModel) -> dict:
    """size, policy and refit_every (examples between two refits; 0: never) of a mofm spec,
    or of a batch kind (default: a window of 500, refitted every 100 examples)."""
    defaults = (
        {"reservoir_size": 500, "reservoir_policy": "window", "reservoir_refit_every": 100}
        if spec.kind in BATCH_KINDS
        else RESERVOIR_DEFAULTS
    )
    params = {**defaults, **{k: v for k, v in spec.params.items() if k in defaults}}
    return {k.removeprefix("reservoir_"): v for k, v in params.items()}


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
    """Progressive-validation metrics: every example is scored before it is learned. Keeps
    the accuracy (classification), the mean loss of the model (hinge for passive-aggressive
    models, log loss for PQR's binary task, squared loss for regression) and the RMSE
    (regression), cumulative and over the last ``window`` examples."""

    def __init__(self, window: int, loss: str, regression: bool = False):
        self.window = window
        self.loss = loss
        self.regression = regression
        self.n = 0
        self.correct = 0
        self.loss_sum = 0.0
        self.squared_sum = 0.0
        self._recent = np.zeros((3, window))  # correct, loss, squared error

    def update(self, correct: Sequence, losses: Sequence, squared: Sequence | None = None) -> None:
        """Account for examples scored before they were learned (arrays, or lists for a
        single example)."""
        k = len(losses)
        if k == 0:
            return
        if k == 1:  # the common single example, in plain Python
            position = self.n % self.window
            hit, loss = bool(correct[0]), float(losses[0])
            error = 0.0 if squared is None else float(squared[0])
            self._recent[0, position] = hit
            self._recent[1, position] = loss
            self._recent[2, position] = error
            self.n += 1
            self.correct += hit
            self.loss_sum += loss
            self.squared_sum += error
            return
        squared = np.zeros(k) if squared is None else squared
        positions = (self.n + np.arange(k)) % self.window
        # a batch longer than the window keeps its last `window` examples
        tail = slice(-self.window, None)
        self._recent[0, positions[tail]] = correct[tail]
        self._recent[1, positions[tail]] = losses[tail]
        self._recent[2, positions[tail]] = squared[tail]
        self.n += k
        self.correct += int(np.count_nonzero(correct))
        self.loss_sum += float(np.sum(losses))
        self.squared_sum += float(np.sum(squared))

    def summary(self) -> dict[str, Any]:
        recent = min(self.n, self.window)
        correct, loss, squared = (
            self._recent[:, :recent].mean(axis=1) if recent else (None, None, None)
        )
        classification = not self.regression
        return {
            "examples": self.n,
            "loss_kind": self.loss,
            "accuracy": self.correct / self.n if self.n and classification else None,
            "loss": self.loss_sum / self.n if self.n else None,
            "rmse": float(np.sqrt(self.squared_sum / self.n))
            if self.n and self.regression
            else None,
            "recent_examples": recent,
            "recent_accuracy": float(correct) if recent and classification else None,
            "recent_loss": float(loss) if recent else None,
            "recent_rmse": float(np.sqrt(squared)) if recent and self.regression else None,
        }


def build_estimator(spec: CreateModel, averaging_interval: int, max_floats: int) -> Estimator:
    """The estimator behind a model spec; raises APIError(422) naming the bad parameter.

    Passive-aggressive kinds are wrapped in ``Averaged`` (live + aligned time average); PQR,
    whose FTRL state is not a weight vector, is served live only."""
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
    regression = is_regression(spec)
    if regression and spec.classes is not None:
        raise APIError(
            422, "invalid_input", "a regression model takes no classes", {"field": "classes"}
        )
    if not cls.averageable and spec.averaging is not None:
        raise APIError(
            422,
            "invalid_input",
            f"kind {spec.kind!r} cannot be time-averaged",
            {"field": "averaging"},
        )
    classes = [] if regression else (spec.classes or [-1, 1])
    if len(set(classes)) != len(classes):
        raise APIError(422, "invalid_input", "classes must be distinct", {"field": "classes"})
    if spec.kind in NATIVE_MULTICLASS:
        return _native_estimator(spec, classes, max_floats)
    if spec.kind in BATCH_KINDS:
        return _batch_estimator(spec, cls, classes, max_floats)
    if spec.multiclass == "ordinal":
        raise APIError(
            422,
            "invalid_input",
            f"the ordinal reduction needs a multi-output kind (mofm), not {spec.kind!r}",
            {"field": "multiclass"},
        )
    n_models = (
        1
        if len(classes) <= 2
        else (len(classes) * (len(classes) - 1) // 2 if spec.multiclass == "ovo" else len(classes))
    )
    floats = _floats_per_model(spec, n_features) * n_models * (2 if cls.averageable else 1)
    _check_floats(floats, max_floats)
    try:
        base = cls(n_features=n_features, **spec.params)
        if len(classes) <= 2:
            model: Estimator = base
        elif spec.multiclass == "ovo":
            model = OneVsOne(base=base, classes=list(classes))
        else:
            model = OneVsRest(base=base, classes=list(classes))
        if not cls.averageable:
            return model
        averaging = spec.averaging
        return Averaged(
            model=model,
            interval=averaging.interval if averaging else averaging_interval,
            alignment=averaging.alignment if averaging else "paper",
        )
    except (TypeError, ValueError) as error:
        raise APIError(422, "invalid_params", str(error), {"field": "params"}) from None


def _batch_estimator(spec: CreateModel, cls, classes: list, max_floats: int) -> Estimator:
    """A batch model (the ellipsoidal classifier): binary, fitted by the worker on a window of
    recent feedback. Its SDP needs cvxpy (``pip install 'lorentztron[separation]'``)."""
    if len(classes) != 2:
        raise APIError(
            422,
            "invalid_input",
            f"kind {spec.kind!r} is a binary classifier: give two classes",
            {"field": "classes"},
        )
    n_features = spec.input.size
    if (n_features + 1) ** 2 > max_floats or n_features > 1000:
        raise APIError(
            422,
            "model_too_large",
            f"kind {spec.kind!r} solves an SDP over (n+1)x(n+1) matrices: at most 1000 "
            "features (reduce them with n_components)",
            {"field": "input"},
        )
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        raise APIError(
            422,
            "kind_unavailable",
            f"kind {spec.kind!r} needs cvxpy: install the 'separation' extra",
        ) from None
    try:
        _check_reservoir(spec, minimum_refit_every=1)
        return cls(n_features=n_features, **_model_params(spec))
    except (TypeError, ValueError) as error:
        raise APIError(422, "invalid_params", str(error), {"field": "params"}) from None


def _native_estimator(spec: CreateModel, classes: list, max_floats: int) -> Estimator:
    """A mofm model: one multi-output network over the classes, or the ordinal McRank
    reduction over the levels (binary logistic outputs P(y <= level))."""
    if spec.averaging is not None:
        raise APIError(
            422,
            "invalid_input",
            f"kind {spec.kind!r} is not time-averaged (its refits replace the state)",
            {"field": "averaging"},
        )
    params = _model_params(spec)
    n_basis = params.get("n_basis", 16)
    n_basis = n_basis if isinstance(n_basis, int) and n_basis > 0 else 1
    floats = 2 * n_basis * (spec.input.size + 1 + len(classes)) + n_basis
    _check_floats(floats, max_floats)
    try:
        _check_reservoir(spec, minimum_refit_every=0)
        if spec.multiclass == "ordinal":
            if any(isinstance(c, str) for c in classes) or list(classes) != sorted(classes):
                raise ValueError("ordinal levels must be increasing numbers")
            if params.setdefault("loss", "logistic") != "logistic":
                raise ValueError("the ordinal reduction learns binary logistic outputs")
            base = MultiOutputPN(n_features=spec.input.size, n_outputs=len(classes) - 1, **params)
            return OrdinalMcRank(base=base, levels=list(classes))
        return MultiOutputPN(n_features=spec.input.size, classes=list(classes), **params)
    except (TypeError, ValueError) as error:
        raise APIError(422, "invalid_params", str(error), {"field": "params"}) from None


def _check_floats(floats: int, max_floats: int) -> None:
    """APIError 422 before anything is allocated if the model would be too large."""
    if floats > max_floats:
        raise APIError(
            422,
            "model_too_large",
            f"the model would hold {floats} floats, more than the limit {max_floats}",
            {"field": "input"},
        )


def _model_params(spec: CreateModel) -> dict:
    """The spec's params without the service's own ``reservoir_*`` ones."""
    return {k: v for k, v in spec.params.items() if not k.startswith("reservoir_")}


def _check_reservoir(spec: CreateModel, minimum_refit_every: int) -> None:
    """ValueError unless the reservoir params are valid: a window (a refit runs off the lock
    and then learns what arrived meanwhile: only a window knows which examples those are,
    core.mofm.Reservoir) of a valid size, refitted every ``minimum_refit_every`` or more
    examples."""
    reservoir = reservoir_params(spec)
    Reservoir(reservoir["size"], spec.input.size, policy=reservoir["policy"])
    if reservoir["policy"] != "window":
        raise ValueError("reservoir_policy must be 'window' in the service")
    every = reservoir["refit_every"]
    if isinstance(every, bool) or not isinstance(every, int) or every < minimum_refit_every:
        raise ValueError(
            f"reservoir_refit_every must be an integer >= {minimum_refit_every}, got {every!r}"
        )


def _floats_per_model(spec: CreateModel, n_features: int) -> int:
    """Learned floats of one binary model, checked before anything is allocated."""
    params = spec.params
    if spec.kind == "dos":
        rank = params.get("rank", 4)
        return (n_features + 1) * 2 * (rank if isinstance(rank, int) and rank > 0 else 1)
    if spec.kind == "pqr":
        k = params.get("k", 10)
        k = k if isinstance(k, int) and k >= 0 else 0
        return 2 * (n_features + 1 + k * (k + 1) // 2) + 2 * n_features
    return n_features + 1


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


class Capture(NamedTuple):
    """A consistent view of a model for a snapshot."""

    version: int
    state: dict
    log_position: Position
    records: int  # log records learned since the previous snapshot, when captured


@dataclass
class LiveModel:
    """One named model: its estimator, lock, version and counters.

    Classification models map their ``classes`` to the estimator's labels (two classes: -1 /
    +1 for the first / second; more: the multi-class reduction's own labels); regression
    models (PQR with ``task="regression"``) take real-valued labels.
    """

    name: str
    spec: CreateModel
    estimator: Estimator
    metrics_window: int
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)
    version: int = 0
    predictions: int = 0
    last_snapshot_version: int | None = None
    last_snapshot_at: float | None = None
    lock: RWLock = field(default_factory=RWLock)
    #: where accepted feedback is appended before it is learned (None: no log)
    journal: FeedbackLog | None = None
    #: the log position of the last record learned (None: none yet)
    log_position: Position = None
    #: True when only appending to the log (the ``api`` role: a learner process learns)
    log_only: bool = False

    def __post_init__(self):
        self.regression = is_regression(self.spec)
        self.classes = [] if self.regression else list(self.spec.classes or [-1, 1])
        #: one multi-output model over the classes (mofm; ordinal: over the levels)
        self.native = self.spec.kind in NATIVE_MULTICLASS
        self.ordinal = is_ordinal(self.spec)
        self.binary = len(self.classes) == 2 and not self.native
        self.averaged = isinstance(self.estimator, Averaged)
        # calibrated probabilities: PQR's logistic task (binary models only); mofm's softmax
        # and logistic losses (one probability per class, or per level)
        mofm_loss = self.spec.params.get("loss", "logistic" if self.ordinal else "softmax")
        self.probabilistic = (self.spec.kind == "pqr" and self.binary) or (
            self.native and mofm_loss in ("softmax", "logistic")
        )
        self.n_features = self.spec.input.size
        loss = (
            "zero_one"
            if self.spec.kind in BATCH_KINDS
            else mofm_loss
            if self.native
            else "squared"
            if self.regression
            else ("log" if self.spec.kind == "pqr" else "hinge")
        )
        self.progressive = Progressive(self.metrics_window, loss, self.regression or self.ordinal)
        #: batch kinds: learned by the worker's fits on the reservoir, not by feedback
        self.batch = self.spec.kind in BATCH_KINDS
        #: mofm and batch kinds: the recent examples the worker refits on (None: no refits)
        reservoir = reservoir_params(self.spec) if self.native or self.batch else None
        self.refit_every = reservoir["refit_every"] if reservoir else 0
        self.reservoir = (
            Reservoir(reservoir["size"], self.n_features, policy=reservoir["policy"])
            if self.refit_every
            else None
        )
        self.refits = 0
        self.examples_since_refit = 0
        #: reused by snapshot_state (see there); held from a capture until it is encoded
        self._snapshot_buffers: dict[str, np.ndarray] = {}
        self.snapshot_lock = threading.Lock()
        self.n_learned = 0
        self.n_aggressive = 0
        self.records_since_snapshot = 0
        self.log_failures = 0
        # set when an append failed with an unknown outcome: read the log before the next one
        self._log_uncertain = False

    # -- labels ---------------------------------------------------------------------------
    def target(self, label, where: str) -> float:
        """The class index of a label (classification) or the value (regression)."""
        if self.regression:
            if isinstance(label, bool) or not isinstance(label, int | float):
                raise APIError(
                    422,
                    "invalid_label",
                    f"{where}: a regression label must be a number, got {label!r}",
                    {"field": where},
                )
            return float(label)
        for k, known in enumerate(self.classes):
            if (
                type(label) is not bool
                and label == known
                and isinstance(label, str) == isinstance(known, str)
            ):
                return k
        raise APIError(
            422,
            "unknown_label",
            f"{where}: unknown label {label!r}; the model's classes are {self.classes}",
            {"field": where},
        )

    def scorer(self, variant: str) -> Estimator:
        if self.averaged:
            return self.estimator.scorer(variant)
        if variant == "averaged":
            raise APIError(
                422,
                "no_averaged_variant",
                f"kind {self.spec.kind!r} has no "
                "time-averaged variant (its state is not a weight vector)",
            )
        return self.estimator

    @property
    def live(self) -> Estimator:
        return self.estimator.live_ if self.averaged else self.estimator

    # -- prediction -----------------------------------------------------------------------
    def predict_rows(self, rows: list[Row], variant: str) -> tuple[int, list, list, list]:
        """Labels, scores and probabilities of validated rows, and the model version."""
        batch = batch_from_rows(rows)
        with self.lock.read():
            version = self.version
            scorer = self.scorer(variant)
            if self.regression or self.binary:
                scores = scorer.score_batch(batch)
                labels = (
                    scores.tolist()
                    if self.regression
                    else [self.classes[1] if s > 0 else self.classes[0] for s in scores]
                )
                score_list = scores.tolist()
            else:
                X = csr_of(batch, self.n_features)
                labels = scorer.predict_many(X).tolist()
                score_list = np.asarray(scorer.score_many(X)).tolist()
                if self.native and self.probabilistic:
                    probabilities = np.asarray(scorer.predict_proba_many(X)).tolist()
            self.predictions += len(rows)
        if not self.native:
            probabilities = (
                _sigmoid(np.asarray(score_list)).tolist()
                if self.probabilistic
                else [None] * len(rows)
            )
        elif not self.probabilistic:
            probabilities = [None] * len(rows)
        return version, labels, score_list, probabilities

    # -- learning -------------------------------------------------------------------------
    def learn_batch(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        """Learn a validated batch in order (one writer), scoring each example before it is
        learned (progressive validation). ``targets``: class indices or values.

        With a feedback log the batch is appended to it first, under the writer lock (log
        order is learning order); if the append fails the request is refused (503) and
        nothing is learned. In the ``api`` role (``log_only``) the batch is only appended.
        The record is made durable (``sync``) before this returns (``learn_group`` leaves
        that to its caller, once for a group of requests)."""
        [outcome], position = self.learn_group([(batch, targets)])
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        finally:
            # a logged record is made durable whatever its learning gave (a refused one is
            # replayed and refused the same way)
            if position is not None:
                self.sync(position)

    def learn_group(self, items: list[tuple[CSRBatch, np.ndarray]]) -> tuple[list, Position | None]:
        """``learn_batch`` for several requests' batches, in order, as one writer-lock hold:
        one outcome per item, its result or its exception (the others go on). The records
        of the items that pass the norm check are appended together (one write, one Redis
        round trip) before any of them is learned; if that append fails, each of them gets
        the 503. Also returns the log position of the last record appended (None: none),
        which the caller must ``sync`` before acknowledging any of them."""
        outcomes: list = [None] * len(items)
        ready = []
        for k, (batch, _) in enumerate(items):
            try:
                check_norms(batch)
            except APIError as error:  # refused before anything is logged
                outcomes[k] = error
                continue
            ready.append(k)
        if not ready:
            return outcomes, None
        records, position = None, None
        if self.journal is not None:
            records = [encode_record(*items[k]) for k in ready]
        # api role (log_only): nothing here changes, so no writer lock (a version load holds
        # it while it swaps a published state in)
        with contextlib.nullcontext() if self.log_only else self.lock.write():
            if records is not None:
                try:
                    position = self._append_many(records)[-1]
                except APIError as error:
                    for k in ready:
                        outcomes[k] = error
                    return outcomes, None
            for k in ready:
                if self.log_only:
                    rows = items[k][0].n_rows
                    outcomes[k] = {"version": self.version, "logged": rows, "n_aggressive": 0}
                    continue
                try:
                    outcomes[k] = self._learn(*items[k])
                except Exception as error:  # the others are logged: learn them too
                    outcomes[k] = error
        return outcomes, position

    def sync(self, position: Position) -> None:
        """Durable before acknowledged: fsync up to our record, outside the writer lock, so
        that concurrent requests share one fsync (group commit). If it fails the request
        gets a 503 although the example was learned (it is in the log's page cache, and the
        live model and the log agree): the client must treat it as not acknowledged."""
        try:
            self.journal.sync(self.name, position)
        except LogUnavailable as error:
            self.log_failures += 1
            raise APIError(503, "log_unavailable", str(error), applied=True) from None

    def _append_many(self, records: list[bytes]) -> list[Position]:
        """Append records (writer lock held); APIError 503 if the log refuses them. The
        position moves only when this process learns the records (not in ``log_only``)."""
        try:
            if self._log_uncertain and not self.log_only:
                self._catch_up()
            positions = self.journal.append_many(self.name, records)
        except LogUnavailable as error:
            self._log_uncertain = True
            self.log_failures += 1
            raise APIError(
                503,
                "log_unavailable",
                f"feedback refused, nothing was learned: {error}",
                applied=error.maybe_written,  # (then it may be learned from the log later)
            ) from None
        if not self.log_only:
            self.log_position = positions[-1]
            self.records_since_snapshot += len(positions)
        return positions

    def _catch_up(self) -> None:
        """Learn what the log holds after our position (an append whose reply was lost may
        have landed), so that the live model stays equal to snapshot + log."""
        for position, record in list(self.journal.read_after(self.name, self.log_position)):
            self._replay_one(position, record)
        self._log_uncertain = False

    def replay(self, records) -> int:
        """Learn log records ``(position, bytes)`` in order (start-up recovery, or a learner
        consuming the log); returns how many. A record the model refuses (it was refused
        live the same way) is skipped."""
        count = 0
        with self.lock.write():
            for position, record in records:
                self._replay_one(position, record)
                count += 1
        return count

    def _replay_one(self, position: Position, record: bytes) -> None:
        try:
            batch, targets, _ = decode_record(record)
        except LogCorrupt as error:
            raise LogUnavailable(f"log record {position} of {self.name}: {error}") from None
        try:
            self._learn(batch, targets)
        except APIError as error:  # refused live too (e.g. a float64 overflow)
            log.warning("replay of %s: record %s refused: %s", self.name, position, error)
        self.log_position = position
        self.records_since_snapshot += 1

    def _learn(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        """Learn a validated batch (writer lock held by the caller). A model that refuses an
        example (a score overflowing float64) answers 422; the rows before it may have been
        learned (the message says so), and the version moves on so that a snapshot sees it.
        Replay meets the same refusal at the same row, so recovery stays exact."""
        try:
            return self._learn_rows(batch, targets)
        except ValueError as error:
            self.version += 1
            raise APIError(
                422, "unlearnable_example", f"the model refused an example: {error}", applied=True
            ) from None

    def _learn_rows(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        squared = None
        if self.batch:
            predicted, losses, aggressive, correct = self._offer_batch(batch, targets)
        elif (self.regression or self.binary) and batch.n_rows == 1:
            # the common single example: one learn_one, plain Python around it
            target = targets[0]
            y = float(target) if self.regression else (1.0 if target == 1 else -1.0)
            step = self.estimator.learn_one(batch.row(0), y)
            losses, aggressive = [float(step.loss)], [bool(step.aggressive)]
            if self.regression:
                predicted, squared, correct = [step.score], [(step.score - y) ** 2], [False]
            else:
                label = 1 if step.score > 0 else 0
                predicted, correct = [label], [label == target]
        elif self.regression or self.binary:
            y = targets if self.regression else np.where(targets == 1, 1.0, -1.0)
            steps = self.estimator.learn_many(csr_of(batch, self.n_features), y)
            losses, aggressive = steps.losses, steps.aggressive
            if self.regression:
                predicted = steps.scores
                squared = (steps.scores - targets) ** 2
                correct = np.zeros(batch.n_rows, dtype=bool)
            else:
                predicted = (steps.scores > 0).astype(np.int64)
                correct = predicted == targets
        elif self.native:
            predicted, losses, aggressive, correct, squared = self._learn_native(batch, targets)
        else:
            rows = batch_rows(batch)
            predicted = np.empty(len(rows), dtype=np.int64)
            losses = np.empty(len(rows))
            aggressive = np.empty(len(rows), dtype=bool)
            for i, (row, k) in enumerate(zip(rows, targets, strict=True)):
                step = self.estimator.learn_one(row, self.classes[k])
                predicted[i] = self.classes.index(step.predicted)
                losses[i] = step.loss
                aggressive[i] = step.n_aggressive > 0
            correct = predicted == targets
        if batch.n_rows:
            self.version += 1
        self.progressive.update(correct, losses, squared)
        self.n_learned += batch.n_rows
        n_aggressive = int(np.count_nonzero(aggressive))
        self.n_aggressive += n_aggressive
        version = self.version
        return {
            "version": version,
            "predicted": predicted,
            "losses": losses,
            "aggressive": aggressive,
            "n_aggressive": n_aggressive,
        }

    def _offer_batch(self, batch: CSRBatch, targets: np.ndarray):
        """A batch kind: each example is scored by the last fit (progressive validation; the
        loss is the 0/1 error) and kept in the reservoir for the next fit; nothing is updated."""
        scores = self.estimator.score_batch(batch)
        predicted = (scores > 0).astype(np.int64)
        for i in range(batch.n_rows):
            self.reservoir.add(batch.row(i), 1.0 if targets[i] == 1 else -1.0)
        self.examples_since_refit += batch.n_rows
        correct = predicted == targets
        return predicted, (~correct).astype(np.float64), np.zeros(batch.n_rows, bool), correct

    def _learn_native(self, batch: CSRBatch, targets: np.ndarray):
        """mofm: every example by one (Ada)SGD step of the multi-output model, in order
        (offered to the refit reservoir too). Ordinal: the prediction is the expected
        relevance; "correct" means its nearest level is the label; squared error kept."""
        n = batch.n_rows
        predicted = np.empty(n, dtype=np.float64 if self.ordinal else np.int64)
        losses = np.empty(n)
        for i in range(n):
            row, label = batch.row(i), self.classes[int(targets[i])]
            step = self.estimator.learn_one(row, label)
            losses[i] = step.loss
            if self.ordinal:  # expected relevance from P(y <= level) = sigmoid(o(x))
                cumulative = _sigmoid(np.asarray(step.scores, dtype=np.float64))[None, :]
                predicted[i] = float(self.estimator.expected_relevance(cumulative)[0])
            else:
                predicted[i] = self.classes.index(step.predicted)
            if self.reservoir is not None:
                self.reservoir.add(row, label)
        self.examples_since_refit += n
        if self.ordinal:
            levels = np.asarray(self.classes, dtype=np.float64)
            values = levels[targets.astype(np.int64)]
            nearest = np.abs(predicted[:, None] - levels[None, :]).argmin(axis=1)
            return predicted, losses, losses > 0, nearest == targets, (predicted - values) ** 2
        return predicted, losses, losses > 0, predicted == targets, None

    def predicted_label(self, value):
        """What the feedback response reports as the prediction before the update."""
        if self.regression or self.ordinal:
            return float(value)
        return self.classes[int(value)]

    # -- state ----------------------------------------------------------------------------
    def snapshot_state(self) -> Capture:
        """Version, estimator state and the log position they include, read together.

        The arrays are copied under the read lock (feedback waits meanwhile) into buffers
        kept for the next snapshot: a fresh 100 MB allocation costs its page faults on every
        copy (130 ms per 67 MB here against 6 ms for a reused buffer). The capture is valid
        until the next ``snapshot_state``: callers hold ``snapshot_lock`` until they have
        encoded it. New buffers (the first snapshot, a changed shape) are allocated and
        faulted in before the lock is taken."""
        self._prepare_buffers(self._snapshot_buffers)
        with self.lock.read():
            return self._capture(self._snapshot_buffers)

    def _prepare_buffers(self, buffers: dict) -> None:
        # reads only shapes and dtypes, without the lock: a buffer made stale by a
        # concurrent restore is replaced under the lock by _copy_into
        for name, array in self.estimator.arrays():
            buffer, new = _buffer_for(buffers, name, array)
            if new:
                np.copyto(buffer, 0)  # its page faults now, not under the lock

    def _capture(self, buffers: dict | None = None) -> Capture:
        # a plain memory copy in each array's own layout; the encoder makes it contiguous
        state = self.estimator.get_state(order="K") if buffers is None else self._copy_into(buffers)
        if self.reservoir is not None:  # the refit window travels with the model
            state = _with_reservoir(state, self.reservoir.get_state(), self._encode_target)
        return Capture(self.version, state, self.log_position, self.records_since_snapshot)

    def _copy_into(self, buffers: dict) -> dict:
        """``estimator.get_state(order="K")`` with the arrays copied into reused buffers."""
        arrays = {}
        for name, array in self.estimator.arrays():
            buffer, _ = _buffer_for(buffers, name, array)
            np.copyto(buffer, array)
            arrays[name] = buffer
        state = self.estimator.get_state_meta()
        return {**state, "arrays": arrays}

    def _encode_target(self, target) -> float:
        # reservoir targets as numbers: class indices (mofm, ordinal), +-1 (batch kinds)
        return float(target) if self.batch else float(self.classes.index(target))

    def load_state(self, state: dict) -> None:
        """Load a snapshot's state (writer lock held): the estimator's arrays, and the
        reservoir when the snapshot carries one."""
        state, reservoir = _split_reservoir(state)
        self.estimator.set_state(state)
        if reservoir is not None and self.reservoir is not None:
            reservoir["targets"] = [
                float(t) if self.batch else self.classes[int(t)] if t == t else None
                for t in reservoir["targets"]
            ]
            self.reservoir.set_state(reservoir)

    def restore(self, state: dict, version: int | None = None) -> int:
        """Load a state (checked first); the version moves on (or is set on start-up)."""
        with self.lock.write():
            self.load_state(state)
            self.version = self.version + 1 if version is None else version
            return self.version

    def parameter_norm(self) -> float:
        """Frobenius norm of the live model's parameters (no copy; PQR: of z)."""
        with self.lock.read():
            total = sum(
                squared_norm(a)
                for name, a in self.live.arrays()
                if a.dtype.kind == "f" and not name.endswith("n_")
            )
        return float(np.sqrt(total))

    def info(self) -> dict[str, Any]:
        spec = self.spec
        averaging = (
            {"interval": self.estimator.interval, "alignment": self.estimator.alignment}
            if self.averaged
            else None
        )
        return {
            "name": self.name,
            "kind": spec.kind,
            "params": spec.params,
            "input": spec.input.model_dump(exclude_none=True),
            "task": "regression"
            if self.regression
            else "ordinal"
            if self.ordinal
            else "classification",
            "classes": self.classes,
            "multiclass": None
            if self.binary or self.regression or (self.native and not self.ordinal)
            else spec.multiclass,
            "averaging": averaging,
            "version": self.version,
            "created_at": self.created_at,
            "examples_learned": self.n_learned,
            "aggressive_updates": self.n_aggressive,
            "predictions": self.predictions,
            "last_snapshot_version": self.last_snapshot_version,
            "metrics": self.progressive.summary(),
            "status": self.status(),
        }

    def status(self) -> dict[str, Any] | None:
        """Kind-specific state: the separation learners' own status (binary models), the
        refit reservoir of mofm models."""
        if self.batch:
            return {
                "refit_every": self.refit_every,
                "fits": self.refits,
                "examples_since_fit": self.examples_since_refit,
                "reservoir_examples": len(self.reservoir),
                "fitted_on": int(self.estimator.n_fit_),
                "separable": bool(self.estimator.separable_),
                "t": float(self.estimator.t_),
            }
        if self.native:
            return {
                "refit_every": self.refit_every,
                "refits": self.refits,
                "examples_since_refit": self.examples_since_refit,
                "reservoir_examples": len(self.reservoir) if self.reservoir else 0,
                "active_basis": int(getattr(_base(self.estimator), "n_active_", 0)),
            }
        live = self.live
        return live.status() if hasattr(live, "status") else None


RESERVOIR_PREFIX = "service.reservoir."


def _with_reservoir(state: dict, reservoir: dict, encode) -> dict:
    """The estimator state plus the reservoir's arrays and counters (prefixed), as one
    snapshot state; an empty slot's target is NaN."""
    arrays = dict(state["arrays"])
    for name in ("indptr", "indices", "values", "arrival"):
        arrays[RESERVOIR_PREFIX + name] = reservoir[name]
    arrays[RESERVOIR_PREFIX + "targets"] = np.array(
        [np.nan if t is None else encode(t) for t in reservoir["targets"]], dtype=np.float64
    )
    scalars = dict(state["scalars"])
    scalars[RESERVOIR_PREFIX + "n_seen"] = reservoir["n_seen"]
    scalars[RESERVOIR_PREFIX + "rng"] = reservoir["rng"]
    return {**state, "arrays": arrays, "scalars": scalars}


def _split_reservoir(state: dict) -> tuple[dict, dict | None]:
    """(estimator state, reservoir state or None) of a snapshot state."""
    if RESERVOIR_PREFIX + "indptr" not in state["arrays"]:
        return state, None
    n = len(RESERVOIR_PREFIX)
    arrays = {k: v for k, v in state["arrays"].items() if not k.startswith(RESERVOIR_PREFIX)}
    scalars = {k: v for k, v in state["scalars"].items() if not k.startswith(RESERVOIR_PREFIX)}
    reservoir = {k[n:]: v for k, v in state["arrays"].items() if k.startswith(RESERVOIR_PREFIX)}
    reservoir.update(
        {k[n:]: v for k, v in state["scalars"].items() if k.startswith(RESERVOIR_PREFIX)}
    )
    reservoir["targets"] = reservoir["targets"].tolist()
    return {**state, "arrays": arrays, "scalars": scalars}, reservoir


def _buffer_for(buffers: dict, name: str, array: np.ndarray) -> tuple[np.ndarray, bool]:
    """The kept snapshot buffer of an array, (re)allocated in its layout if it has none of its
    shape and dtype; and whether it is new."""
    buffer = buffers.get(name)
    if buffer is not None and buffer.shape == array.shape and buffer.dtype == array.dtype:
        return buffer, False
    buffer = buffers[name] = np.empty_like(array, order="K")
    return buffer, True


def _base(estimator: Estimator) -> Estimator:
    return estimator.model_ if isinstance(estimator, OrdinalMcRank) else estimator


def is_regression(spec: CreateModel) -> bool:
    return spec.kind == "pqr" and spec.params.get("task") == "regression"


def is_ordinal(spec: CreateModel) -> bool:
    return spec.kind in NATIVE_MULTICLASS and spec.multiclass == "ordinal"


def _sigmoid(scores: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * scores))  # overflow-free logistic


def check_norms(batch: CSRBatch) -> None:
    """Refuse (422) an example whose squared norm overflows float64: every model's update
    divides by it, so no model can learn it. Checked before anything is logged or learned."""
    row = first_overflowing_row(batch)
    if row < 0:
        return
    raise APIError(
        422,
        "invalid_input",
        f"row {row}: the example's squared norm overflows float64 (values too large)",
        {"row": row},
    )


def batch_rows(batch: CSRBatch) -> list[Row]:
    return [batch.row(i) for i in range(batch.n_rows)]


def csr_of(batch: CSRBatch, n_features: int) -> sp.csr_matrix:
    """A scipy view of a validated batch (no copy)."""
    return sp.csr_matrix(
        (batch.values, batch.indices, batch.indptr), shape=(batch.n_rows, n_features), copy=False
    )


class _Pending(NamedTuple):
    """A pending prediction, as ``PredictionCache.take`` hands it out. The cache stores it as
    one flat plain tuple of untracked objects ``(model_uid, indices, values, expires_at,
    nbytes)``, which the garbage collector stops tracking at its first pass over it: a cache at
    its 256 MB bound holds ~880,000 of them, and as tracked objects their churn kept
    triggering full collections that scanned them all (100-200 ms each with the GIL held;
    ``benchmarks/pending_cache_gc.py``)."""

    model_uid: str
    row: Row
    expires_at: float
    nbytes: int

    @classmethod
    def stored(cls, entry: tuple) -> _Pending:
        model_uid, indices, values, expires_at, nbytes = entry
        return cls(model_uid, (indices, values), expires_at, nbytes)

    def flat(self) -> tuple:
        return (self.model_uid, *self.row, self.expires_at, self.nbytes)


_UID, _INDICES, _VALUES, _EXPIRES, _NBYTES = range(5)  # the fields of the stored tuples


class PredictionCache:
    """Features of recent predictions, so feedback can name a ``prediction_id``.

    Bounded in time (TTL) and memory (bytes of the kept rows); the oldest entries go first.
    Thread-safe.
    """

    def __init__(self, ttl: float, max_bytes: int, clock=time.monotonic):
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[str, tuple] = OrderedDict()  # of _Pending.flat() tuples
        self._lock = threading.RLock()
        self.nbytes = 0
        self.expired = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, model_uid: str, rows: list[Row]) -> list[str]:
        expires_at = self.clock() + self.ttl
        ids = [uuid.uuid4().hex for _ in rows]
        with self._lock:
            for prediction_id, row in zip(ids, rows, strict=True):
                row = compact(row)
                nbytes = row[0].nbytes + row[1].nbytes + 64
                self._entries[prediction_id] = (model_uid, *row, expires_at, nbytes)
                self.nbytes += nbytes
            self._evict()
        return ids

    def peek(self, prediction_id: str, model_uid: str) -> Row:
        """The row of a pending prediction of this model, or APIError (422)."""
        with self._lock:
            entry = self._entries.get(prediction_id)
            if entry is None or entry[_UID] != model_uid:
                raise APIError(
                    422,
                    "unknown_prediction_id",
                    f"unknown prediction_id "
                    f"{prediction_id!r} for this model (ids live {self.ttl:g} s, "
                    "are answered once, and the oldest are dropped under memory "
                    "pressure)",
                )
            if entry[_EXPIRES] <= self.clock():
                self._drop(prediction_id)
                self.expired += 1
                raise APIError(
                    422, "expired_prediction_id", f"prediction_id {prediction_id!r} expired"
                )
            return entry[_INDICES], entry[_VALUES]

    def take(self, prediction_ids: list[str], model_uid: str) -> list[_Pending]:
        """The entries (``.row``: the features) of these pending predictions, removed
        atomically: all or none (an id is answered once; ``give_back`` undoes it). APIError
        (422) names the first unknown, expired or repeated id."""
        with self._lock:
            if len(set(prediction_ids)) != len(prediction_ids):
                raise APIError(
                    422, "duplicate_prediction_id", "a prediction_id appears twice in the request"
                )
            for prediction_id in prediction_ids:
                self.peek(prediction_id, model_uid)
            return [_Pending.stored(self._drop(prediction_id)) for prediction_id in prediction_ids]

    def give_back(self, prediction_ids: list[str], entries: list[_Pending]) -> None:
        """Put taken entries back, with their own expiry (the request that took them was
        refused before anything of it was applied, so the ids can be answered again). They
        join the end of the eviction order; the memory bound holds."""
        with self._lock:
            for prediction_id, entry in zip(prediction_ids, entries, strict=True):
                if prediction_id not in self._entries:
                    self._entries[prediction_id] = entry.flat()
                    self.nbytes += entry.nbytes
            self._evict()

    def sweep(self) -> int:
        """Drop expired entries; returns how many."""
        now = self.clock()
        dropped = 0
        with self._lock:
            while self._entries:
                prediction_id, entry = next(iter(self._entries.items()))
                if entry[_EXPIRES] > now:
                    break
                self._drop(prediction_id)
                dropped += 1
            self.expired += dropped
        return dropped

    def forget_model(self, model_uid: str) -> None:
        with self._lock:
            for prediction_id in [k for k, e in self._entries.items() if e[_UID] == model_uid]:
                self._drop(prediction_id)

    def _evict(self) -> None:
        """Drop the oldest entries until the memory bound holds (lock held)."""
        while self.nbytes > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
            self.evicted += 1

    def _drop(self, prediction_id: str) -> tuple:
        entry = self._entries.pop(prediction_id)
        self.nbytes -= entry[_NBYTES]
        return entry


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
