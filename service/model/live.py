"""A live model: one named estimator with its lock, version, counters, progressive metrics,
refit window and journal.

Concurrency: feedback (the single writer) holds the model's readers-writer lock exclusively
for a whole group of requests, so updates never interleave; predictions share it, so they
read a consistent model and run in parallel (the kernels release the GIL). Everything a
request needs is validated before the lock is taken. Log order is learning order: records
are appended under the writer lock, and made durable (``sync``) after it is released, so
that requests waiting together share one fsync.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from core.averaging import Averaged
from core.base import Estimator
from core.features import CSRBatch, Row, batch_from_rows, first_overflowing_row, squared_norm
from core.metrics import ProgressiveValidation
from service.durability import capture
from service.durability.capture import Capture
from service.durability.feedback_log import LogCorrupt, LogUnavailable, Position, decode_keyed
from service.durability.idempotency import Answer, Answers, Key
from service.durability.journal import Feedback, Journal
from service.exceptions import InvalidRequest, ServiceError
from service.model.families import FAMILIES, Learned, reservoir_of
from service.model.kinds import Plan, build
from service.model.lifecycle import Lifecycle
from service.model.locks import RWLock
from service.scale.deltas import RowChanges

log = logging.getLogger("lorentztron")

#: the most parameters a request may touch to be learned on the event loop (``quick``)
INLINE_WORK = 1 << 20


def _all_finite(values) -> bool:
    """Whether every value (a list of one, or an array) is finite."""
    if len(values) == 1:
        return math.isfinite(values[0])
    return bool(np.all(np.isfinite(values)))


def check_norms(batch: CSRBatch) -> None:
    """Refuse an example whose squared norm overflows float64: every model's update and
    score divides by or sums it, so no model can use it. Checked before anything is logged."""
    row = first_overflowing_row(batch)
    if row >= 0:
        raise InvalidRequest(
            "invalid_input",
            f"row {row}: the example's squared norm overflows float64 (values too large)",
            {"row": row},
        )


class LiveModel:
    """One named model (module docstring). ``spec`` is its create request and ``plan`` the
    catalogue's reading of it (``service.model.kinds``); ``incarnation`` names this creation of
    the name (a model deleted and created again is another incarnation)."""

    def __init__(
        self,
        name: str,
        spec,
        plan: Plan,
        estimator: Estimator,
        metrics_window: int,
        incarnation: str | None = None,
        answers: Answers | None = None,
    ):
        self.name = name
        self.spec = spec
        self.plan = plan
        self.estimator = estimator
        self.family = FAMILIES[plan.family](plan)
        self.incarnation = incarnation or uuid.uuid4().hex
        self.created_at = time.time()
        self.lifecycle = Lifecycle(name)
        self.lock = RWLock()
        #: held by a snapshot from its capture until it is encoded (the buffers are reused),
        #: and by a learner's publication (deltas and full snapshots in order)
        self.snapshot_lock = threading.Lock()
        #: held by a learner's full snapshot from its capture until it is written (its
        #: buffers are reused by the next one), which may outlast the publication
        self.full_lock = threading.Lock()
        self._buffers: dict[str, np.ndarray] = {}
        self.version = 0
        self.predictions = 0
        self.n_learned = 0
        self.n_aggressive = 0
        self.refits = 0
        self.examples_since_refit = 0
        self.last_snapshot_version: int | None = None
        self.last_snapshot_at: float | None = None
        self.progressive = ProgressiveValidation(
            metrics_window, self.family.loss_kind, self.family.regression
        )
        #: the recent examples the worker refits on (None: no refits)
        self.window = reservoir_of(plan)
        #: where feedback is appended before it is learned (None: no log)
        self.journal: Journal | None = None
        #: False on an api replica: feedback is only appended (a learner learns it)
        self.learns = True
        #: the log position of the last record this model includes (None: none yet)
        self.log_position: Position = None
        #: log records learned since the last snapshot, and their bytes
        self.records_since_snapshot = 0
        self.log_bytes_since_snapshot = 0
        #: the answers of keyed requests (``service.durability.idempotency``)
        self.answers = answers or Answers(ttl=86400.0, max_bytes=32 << 20)
        #: a learner's lease on the model (``service.scale.leases``), checked by every write of
        #: its snapshots and log position; None outside the sharded learner role
        self.fence: str | None = None
        #: delta publication (``service.scale.deltas``): the feature rows learned since the last
        #: publication (None: not tracked), and the learner's chain or the replica's digest
        self.changes: RowChanges | None = None
        self.publication: Any = None
        #: the first log record learned since the last capture, and the version last
        #: written (a publication's header names both: the replicas' freshness)
        self.unpublished_from: Position = None
        self.published_version: int | None = None

    # -- reading -------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.plan.n_features

    @property
    def classes(self) -> list:
        return self.plan.classes

    @property
    def averaged(self) -> bool:
        return isinstance(self.estimator, Averaged)

    @property
    def live(self) -> Estimator:
        """The live estimator (an averaged model's ``live_``)."""
        return self.estimator.live_ if self.averaged else self.estimator

    def scorer(self, variant: str) -> Estimator:
        """The estimator that scores ``variant`` ("live" or "averaged")."""
        if self.averaged:
            return self.estimator.scorer(variant)
        if variant == "averaged":
            raise InvalidRequest(
                "no_averaged_variant",
                f"kind {self.spec.kind!r} has no time-averaged variant (its state is not a "
                "weight vector, or it is not online)",
            )
        return self.estimator

    def target(self, label, where: str):
        """The estimator's target for a request's label (class index, or value)."""
        return self.family.target(label, where)

    def predict(
        self, rows: list[Row], variant: str, blocking: bool = True
    ) -> tuple[int, list, list, list] | None:
        """The model version, and the labels, scores and probabilities of validated rows.
        With ``blocking`` false, None (and nothing done) if a learner holds the model or
        waits for it: the event loop predicts only what it need not wait for."""
        return self._predict(batch_from_rows(rows), variant, blocking)

    def predict_batch(self, batch: CSRBatch, variant: str) -> tuple[list, list, list]:
        """The labels, scores and probabilities of a validated batch."""
        return self._predict(batch, variant)[1:]

    def _predict(
        self, batch: CSRBatch, variant: str, blocking: bool = True
    ) -> tuple[int, list, list, list] | None:
        check_norms(batch)
        if not self.lock.acquire_read(blocking):
            return None
        try:
            version = self.version
            labels, scores, probabilities = self.family.predict(self.scorer(variant), batch)
            self.predictions += batch.n_rows
        finally:
            self.lock.release_read()
        return version, labels, scores, probabilities

    # -- learning ------------------------------------------------------------------------
    def quick(self, batch: CSRBatch) -> bool:
        """Whether learning ``batch`` here is small work, fit for the event loop: the
        parameters it touches stay under ``INLINE_WORK`` (its non-zeros times the model's
        floats per input, or all of them per example for a kind whose update touches its
        whole state; all of them once more if an averaging step falls due)."""
        if not self.learns:
            return False
        plan = self.plan
        if plan.kind.sparse_updates:
            work = len(batch.indices) * (plan.floats // max(plan.n_features, 1) + 1)
        else:
            work = batch.n_rows * plan.floats
        if self.averaged and self.estimator.averages_within(batch.n_rows):
            work += plan.floats
        return work <= INLINE_WORK

    def learn_group(
        self, items: list[Feedback], blocking: bool = True
    ) -> tuple[list, Position] | None:
        """Learn several requests' validated feedback in order, as one writer-lock hold: one
        outcome per item, its answer or its exception (the others go on). The records of
        the items that pass the norm check are appended together before any is learned; if
        that append fails, each of them gets the error. A keyed item's answer is kept
        (``answers``) as it is learned. Returns the outcomes and the log position of the
        last record appended (None: none), which the caller ``sync``s before acknowledging
        any of them. With ``blocking`` false (the event loop), None and nothing done if
        the writer lock or the log would make it wait."""
        items = [Feedback(*item) for item in items]
        outcomes: list = [None] * len(items)
        ready = []
        for k, item in enumerate(items):
            try:
                check_norms(item.batch)
            except ServiceError as error:  # refused before anything is logged
                outcomes[k] = error
                continue
            ready.append(k)
        if not ready:
            return outcomes, None
        if not self.learns:  # an api replica changes nothing: no writer lock
            if not blocking:
                return None
            return outcomes, self._log_only(items, ready, outcomes)
        if not self.lock.acquire_write(blocking):
            return None
        try:
            positions = [None] * len(ready)
            if self.journal is not None:
                try:
                    positions = self._append([items[k] for k in ready], blocking)
                except ServiceError as error:
                    for k in ready:
                        outcomes[k] = error
                    return outcomes, None
                if positions is None:
                    return None
            for k, position in zip(ready, positions, strict=True):
                item = items[k]
                try:
                    outcomes[k] = self.answer(self._learn(item.batch, item.targets), item)
                except Exception as error:  # the others are logged: learn them too
                    outcomes[k] = error
                self._keep(item, outcomes[k], time.time(), position)
        finally:
            self.lock.release_write()
        return outcomes, positions[-1]

    def _log_only(self, items: list[Feedback], ready: list[int], outcomes: list) -> Position:
        """Append the items for the learner (an api replica): the unkeyed ones together, a
        keyed one with its answer unless its key has one (``Journal.append_once``)."""
        plain = [k for k in ready if items[k].key is None]
        position = None
        if plain and self.journal is not None:
            try:
                position = self.journal.append([items[k] for k in plain])[-1]
            except ServiceError as error:
                for k in plain:
                    outcomes[k] = error
                plain = []
        for k in plain:
            outcomes[k] = self.answer({"version": self.version, "logged": True}, items[k])
        for k in ready:
            item = items[k]
            if item.key is None:
                continue
            answer = self.answer({"version": self.version, "logged": True}, item)
            try:
                _, stored = self.journal.append_once(item, answer, self.answers.ttl)
                outcomes[k] = answer if stored is None else stored.replay(item.key)
            except ServiceError as error:
                outcomes[k] = error
        return position

    def claim(self, key: Key) -> Answer | None:
        """The answer to a retry with ``key`` (``Answers.claim``): kept here, or, on a process
        that only logs, by the process that logged it (Redis). None: the key is new, held by
        this request until ``answers.release``."""
        # a process that only logs answers what it logged, never what the learner learned
        # (the published versions it loads carry the learner's answers)
        answer = self.answers.claim(key, kept=self.learns)
        if answer is None and not self.learns and self.journal is not None:
            try:
                answer = self.journal.answered(key)
            except BaseException:
                self.answers.release(key)
                raise
            if answer is not None:
                self.answers.release(key)
        return answer

    def answer(self, result: dict[str, Any], item: Feedback) -> dict[str, Any]:
        """The answer to a feedback request, from what learning (or logging) it gave."""
        n = item.batch.n_rows
        if "logged" in result:  # not learned here: durable in the log, learned by the learner
            return {
                "model": self.name,
                "version": result["version"],
                "learned": 0,
                "aggressive": 0,
                "results": None,
                "logged": n,
            }
        answer = {
            "model": self.name,
            "version": result["version"],
            "learned": n,
            "aggressive": result["n_aggressive"],
            "results": None,
        }
        if item.with_results:
            answer["results"] = [
                {"predicted": self.predicted_label(p), "loss": float(loss), "aggressive": bool(a)}
                for p, loss, a in zip(
                    result["predicted"], result["losses"], result["aggressive"], strict=True
                )
            ]
        return answer

    def _keep(self, item: Feedback, outcome, at: float, position: Position) -> None:
        """Keep a keyed item's answer, or its refusal if it was applied (writer lock held)."""
        if item.key is None:
            return
        if isinstance(outcome, dict):
            self.answers.record(item.key, at, body=outcome, position=position)
        elif isinstance(outcome, ServiceError) and outcome.applied:
            self.answers.record(item.key, at, error=outcome, position=position)

    def learn(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        """One request's validated batch: logged, learned and made durable (``learn_group``
        of one, then ``sync``); its refusal raised."""
        [outcome], position = self.learn_group([Feedback(batch, targets)])
        if position is not None:
            self.sync(position)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def sync(self, position: Position) -> None:
        """Make the log durable up to ``position`` (after ``learn_group``, outside the lock)."""
        if self.journal is not None:
            self.journal.sync(position)

    def _append(self, items: list[Feedback], blocking: bool = True) -> list[Position] | None:
        """Append the items' records (writer lock held); the position moves only when this
        process learns them. Not ``blocking``: None unless the log takes them at once."""
        if blocking and self.journal.uncertain and self.learns:
            self._catch_up()
        appended = self.journal.appended
        positions = self.journal.append(items, blocking)
        if positions is None:
            return None
        if self.learns:
            self.log_bytes_since_snapshot += self.journal.appended - appended
            if self.unpublished_from is None:
                self.unpublished_from = positions[0]
            self.log_position = positions[-1]
            self.records_since_snapshot += len(positions)
        return positions

    def _catch_up(self) -> None:
        """Learn what the log holds after our position (an append whose reply was lost may
        have landed), so that the live model stays equal to snapshot + log."""
        for position, record in self.journal.records_after(self.log_position):
            self._replay_one(position, record)
        self.journal.uncertain = False

    def replay(self, records: Iterable[tuple[Position, bytes]]) -> int:
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
            batch, targets, at, key = decode_keyed(record)
        except LogCorrupt as error:
            raise LogUnavailable(f"log record {position} of {self.name}: {error}") from None
        item = Feedback(batch, targets)
        if key is not None:
            item = Feedback(batch, targets, key.with_results, Key(key.key, key.fingerprint))
        try:
            outcome = self.answer(self._learn(batch, targets), item)
        except ServiceError as error:  # refused live too (e.g. a float64 overflow)
            log.warning("replay of %s: record %s refused: %s", self.name, position, error)
            outcome = error
        self._keep(item, outcome, at, None)
        if self.unpublished_from is None:
            self.unpublished_from = position
        self.log_position = position
        self.records_since_snapshot += 1
        self.log_bytes_since_snapshot += len(record)

    def _learn(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        """Learn a validated batch (writer lock held). A model that refuses an example (a
        score overflowing float64) answers ``unlearnable_example``; the rows before it may
        have been learned, and the version moves on so that a snapshot sees it. Replay meets
        the same refusal at the same row, so recovery stays exact."""
        if self.changes is not None:  # (before: a refused row may follow learned ones)
            self.changes.mark(batch.indices)
        try:
            learned = self.family.learn(self.estimator, batch, targets, self.window)
            if not _all_finite(learned.losses):
                raise ValueError("a loss overflows float64")
        except ValueError as error:
            self.version += 1
            raise InvalidRequest(
                "unlearnable_example", f"the model refused an example: {error}", applied=True
            ) from None
        return self._account(batch.n_rows, learned)

    def _account(self, n: int, learned: Learned) -> dict[str, Any]:
        if n:
            self.version += 1
        self.progressive.update(learned.correct, learned.losses, learned.squared)
        self.n_learned += n
        if self.plan.kind.family != "online":  # refitted by the worker
            self.examples_since_refit += n
        aggressive = learned.aggressive
        n_aggressive = (
            int(np.count_nonzero(aggressive))
            if isinstance(aggressive, np.ndarray)
            else sum(1 for x in aggressive if x)  # (one example's list: no numpy call)
        )
        self.n_aggressive += n_aggressive
        return {
            "version": self.version,
            "predicted": learned.predicted,
            "losses": learned.losses,
            "aggressive": learned.aggressive,
            "n_aggressive": n_aggressive,
        }

    def predicted_label(self, value):
        """What a feedback response reports as the prediction before the update."""
        return self.family.predicted_label(value)

    # -- durable changes outside the log -------------------------------------------------
    def save_held(self, save: Callable[[Capture], Any], key: Key | None = None) -> dict:
        """``save`` the current state under the writer lock (a new model's first snapshot);
        the model's info as it is once saved, kept as ``key``'s answer when given."""
        with self.lock.write():
            answer = self._saved_answer(key)
            try:
                save(self._capture(None))
            except BaseException:
                self.answers.forget(key)
                raise
            return answer

    def _saved_answer(self, key: Key | None) -> dict:
        """The model's info once the current version is saved (writer lock held), kept in
        ``answers`` for ``key`` so that the snapshot being written carries it."""
        answer = {**self._info(), "last_snapshot_version": self.version}
        if key is not None:
            self.answers.record(key, time.time(), body=answer)
        return answer

    def refit(self, save: Callable[[Capture], Any]) -> bool:
        """Refit on the window (Algorithm 1 warm-started from the live basis; a batch kind is
        fitted from scratch): the data are read under the lock, the fit runs without it
        (the model keeps serving and learning), then under the writer lock the new model
        learns what arrived meanwhile, replaces the old one and is saved before anyone sees
        it (a refit is not in the log). False if skipped."""
        with self.lock.read():
            current = self.estimator
            X, y = self.window.data()
            mark = self.window.n_seen
        if X.shape[0] == 0:
            return False
        batch = self.plan.family == "batch"
        try:
            if batch:
                new = current.clone()
                new.fit(X, np.asarray(y, dtype=np.float64))
            else:
                new = current.refit(X, y)
        except ValueError as error:  # e.g. one class only in the window so far
            log.warning("fit of %s skipped: %s", self.name, error)
            with self.lock.write():
                self.examples_since_refit = 0
            return False
        with self.lock.write():
            if self.estimator is not current:  # restored or replaced meanwhile
                return False
            try:
                X_new, y_new = self.window.since(mark)
            except ValueError as error:  # more arrived than the window holds
                log.warning("refit of %s skipped: %s", self.name, error)
                self.examples_since_refit = 0
                return False
            if X_new.shape[0] and not batch:  # a batch model takes them at its next fit
                new.learn_many(X_new, y_new)
            self._commit(new, save, refit=True)
        return True

    def restore(self, state: dict, save: Callable[[Capture], Any], key: Key | None = None):
        """Serve an earlier snapshot's estimator state from the next version on, saved
        before anyone sees it (so recovery never replays later feedback onto the wrong base);
        ValueError if the state does not fit this model. The counters, metrics and refit
        window go on: they tell the model's story, which the restore is part of. Returns the
        model's info (kept as ``key``'s answer when given)."""
        new = build(self.plan)
        new.set_state(capture.split_service(state)[0])
        with self.lock.write():
            return self._commit(new, save, key=key)

    def _commit(
        self, new: Estimator, save: Callable[[Capture], Any], refit=False, key=None
    ) -> dict:
        """Swap ``new`` in as the next version and save it (writer lock held); on failure
        everything comes back as it was. Returns the model's info once saved."""
        previous = (self.estimator, self.version, self.refits, self.examples_since_refit)
        self.estimator = new
        self.version += 1
        if self.changes is not None:
            self.changes.mark_all()
        if refit:
            self.refits += 1
            self.examples_since_refit = 0
        answer = self._saved_answer(key)
        try:
            save(self._capture(None))
        except BaseException:
            self.estimator, self.version, self.refits, self.examples_since_refit = previous
            self.answers.forget(key)
            raise
        return answer

    # -- state ---------------------------------------------------------------------------
    def snapshot_state(self) -> Capture:
        """Version, state and log position read together, the arrays copied under the read
        lock into buffers kept for the next capture (valid until then: hold
        ``snapshot_lock`` until the capture is encoded)."""
        capture.prepare_buffers(self.estimator, self._buffers)
        with self.lock.read():
            return self._capture(self._buffers)

    def publication_state(self, full: bool, delta: Callable[[LiveModel], Any]) -> tuple:
        """A publication's capture and delta read together under the read lock: the whole
        state when ``full`` (as ``snapshot_state``), else the state without its arrays; and
        ``delta(self)`` (``service.scale.deltas``). Hold ``snapshot_lock`` until encoded."""
        if full:
            capture.prepare_buffers(self.estimator, self._buffers)
        with self.lock.read():
            return self._capture(self._buffers if full else None, arrays=full), delta(self)

    def _capture(self, buffers: dict | None, arrays: bool = True) -> Capture:
        if arrays:
            state = capture.estimator_state(self.estimator, buffers)
        else:
            state = {**self.estimator.get_state_meta(), "arrays": {}}
        service = {
            capture.PROGRESSIVE: self.progressive.get_state(),
            capture.MODEL: {
                "scalars": {
                    "created_at": self.created_at,
                    "incarnation": self.incarnation,
                    "examples_learned": self.n_learned,
                    "aggressive_updates": self.n_aggressive,
                    "predictions": self.predictions,
                    "refits": self.refits,
                    "examples_since_refit": self.examples_since_refit,
                }
            },
        }
        if len(self.answers):
            service[capture.ANSWERS] = {"arrays": {"table": self.answers.get_state()}}
        if self.window is not None:
            service[capture.RESERVOIR] = capture.reservoir_part(
                self.window.get_state(), self.family.window_target
            )
        state = capture.with_service(state, service)
        # (read lock: the one snapshot writer takes it; ``SnapshotWriter`` gives it back if
        # the write fails)
        first_new, self.unpublished_from = self.unpublished_from, None
        return Capture(
            self.version,
            state,
            self.log_position,
            self.records_since_snapshot,
            first_new,
            self.log_bytes_since_snapshot,
        )

    def load_state(self, state: dict) -> None:
        """Load a snapshot's state (writer lock held by the caller, or before serving): the
        estimator's arrays, and what the snapshot carries of the service's part."""
        state, service = capture.split_service(state)
        self.estimator.set_state(state)
        if self.changes is not None:
            self.changes.mark_all()
        self._load_service(service)

    def _load_service(self, service: dict) -> None:
        """The service's part of a snapshot state (``capture.split_service``)."""
        if capture.PROGRESSIVE in service:
            self.progressive.set_state(service[capture.PROGRESSIVE])
        model = service.get(capture.MODEL, {}).get("scalars", {})
        self.created_at = model.get("created_at", self.created_at)
        self.n_learned = model.get("examples_learned", self.n_learned)
        self.n_aggressive = model.get("aggressive_updates", self.n_aggressive)
        self.predictions = model.get("predictions", self.predictions)
        self.refits = model.get("refits", self.refits)
        self.examples_since_refit = model.get("examples_since_refit", self.examples_since_refit)
        if capture.ANSWERS in service:
            self.answers.set_state(service[capture.ANSWERS]["arrays"]["table"])
        if capture.RESERVOIR in service and self.window is not None:
            self.window.set_state(
                capture.reservoir_state(service[capture.RESERVOIR], self.family.from_window_target)
            )

    def load_version(self, state: dict, version: int, position: Position) -> None:
        """Serve a published version (api replicas): its state, version and log position."""
        with self.lock.write():
            self.load_state(state)
            self.version = version
            self.log_position = position

    def load_delta(
        self, write: Callable[[Estimator], None], state: dict, version: int, position: Position
    ) -> None:
        """Serve a published version from a delta (api replicas, ``service.scale.deltas``):
        ``write`` changes the estimator's arrays in place, ``state`` (without arrays) gives
        the estimator's scalars and the service's part."""
        estimator_state, service = capture.split_service(state)
        with self.lock.write():
            write(self.estimator)
            self.estimator.set_scalars(estimator_state["scalars"])
            self._load_service(service)
            self.version = version
            self.log_position = position

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
        """The model as ``GET /v1/models/{name}`` shows it (read under the lock: a change
        and its snapshot are seen together)."""
        with self.lock.read():
            return self._info()

    def _info(self) -> dict[str, Any]:
        spec, plan = self.spec, self.plan
        averaging = (
            {"interval": self.estimator.interval, "alignment": self.estimator.alignment}
            if self.averaged
            else None
        )
        task = {"regression": "regression", "ordinal": "ordinal"}.get(plan.family, "classification")
        return {
            "name": self.name,
            "kind": spec.kind,
            "params": spec.params,
            "input": spec.input.model_dump(exclude_none=True),
            "task": task,
            "classes": self.classes,
            "multiclass": spec.multiclass if plan.family in ("reduction", "ordinal") else None,
            "averaging": averaging,
            "calibration": spec.calibration,
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
        """Kind-specific state, and the refit window of the kinds the worker refits."""
        status = self.family.status(self.live)
        if self.plan.kind.family == "online":
            return status
        refit_every = self.plan.params["reservoir_refit_every"]
        window = {
            "refit_every": refit_every,
            "reservoir_examples": len(self.window) if self.window is not None else 0,
        }
        if self.plan.family == "batch":
            return {
                **window,
                "fits": self.refits,
                "examples_since_fit": self.examples_since_refit,
                **status,
            }
        return {
            **window,
            "refits": self.refits,
            "examples_since_refit": self.examples_since_refit,
            **status,
        }
