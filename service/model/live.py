"""A live model: a named model's learning members (``service.model.member``, grouped in
``service.model.group``: the champion that serves, the challengers beside it), its
durability record (``service.durability.record``), its log (``service.durability.journal``),
the answers of its keyed requests, its lifecycle and its lock.

Concurrency: feedback (the single writer) holds the model's readers-writer lock exclusively
for a whole group of requests, so updates never interleave; predictions share it, so they
read a consistent model and run in parallel (the kernels release the GIL). Everything a
request needs is validated before the lock is taken. Log order is learning order: records
are appended under the writer lock, and made durable (``sync``) after it is released, so
that requests waiting together share one fsync.

Exactly once: a keyed request's answer is kept when its record is learned, live or in
replay. An append whose outcome is unknown (a lost Redis reply) leaves the log
``uncertain``: before the next append, the model learns what the log holds after its
position, and a keyed request whose record was among those is answered from it, not
appended again.

Learning paused: feedback is logged and acknowledged (``logged``), not learned; the
records after the model's log position are its backlog, learned in order when learning
resumes, or skipped (``discard``). Changes outside the log (a refit, a restore, a
challenger added or removed, a promotion, new policies, a pause) are saved as a snapshot
before anyone sees them, so that recovery never replays later feedback onto the wrong base.

An api replica serves the versions a learner publishes: ``load_version`` and ``load_delta``
build each into a standby copy of the serving estimator, then swap it in under the lock
(``service.model.replica_versions``, a base class of ``LiveModel``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import numpy as np

from core.base import Estimator
from core.features import CSRBatch, Row, batch_from_rows, first_overflowing_row, squared_norm
from core.parallel import unflatten
from service.durability import capture
from service.durability.capture import Capture
from service.durability.feedback_log import (
    FeedbackLog,
    LogCorrupt,
    LogUnavailable,
    after,
    decode_keyed,
)
from service.durability.idempotency import Answer, Answers, Key
from service.durability.journal import Feedback, Journal
from service.durability.record import DurabilityRecord, Position
from service.exceptions import InvalidRequest, NotFound, ServiceError
from service.model import outcome, state
from service.model.group import Group, Policy
from service.model.lifecycle import Lifecycle
from service.model.locks import RWLock
from service.model.member import ORIGINAL, Member
from service.model.replica_versions import ReplicaVersions
from service.ops import tracing
from service.scale.deltas import RowChanges

log = logging.getLogger("lorentztron")

#: the most parameters a request may touch to be learned or scored on the event loop
INLINE_WORK = 1 << 20

#: what describes a model for an answer (``service.http.views.model_info``), called with
#: the model's lock held
View = Callable[["LiveModel"], dict]
#: a change outside the log (``changes.change``): applied, it returns what undoes it
Change = Callable[[], Callable[[], None]]


class Footprint(NamedTuple):
    """What a model holds against the limits: its members (each counts as a model, the
    drift challenger a policy may start included) and their bytes (``Plan.nbytes``)."""

    models: int
    nbytes: int


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


class LiveModel(ReplicaVersions):
    """One named model (module docstring). ``spec`` is the create request of its serving
    member (``member``; the model's first is ``original``) and ``plan`` the catalogue's
    reading of it (``service.model.kinds``); ``planner`` plans the other members' specs
    read from a snapshot. ``log``: the feedback log its records go to (None: no log);
    ``learns``: False on a process that only logs (api replicas, the learners' own
    endpoint: the learner's consumer learns the log). ``rounds``: where a parallel model's
    shares are read (``service.scale.parallel.Rounds``; None: no Redis)."""

    def __init__(
        self,
        name: str,
        spec,
        plan,
        metrics_window: int,
        *,
        policy: Policy | None = None,
        planner: Callable | None = None,
        member: str = ORIGINAL,
        record: DurabilityRecord | None = None,
        answers: Answers | None = None,
        log: FeedbackLog | None = None,
        learns: bool = True,
        rounds=None,
    ):
        self.name = name
        self._metrics_window = metrics_window
        self.planner = planner
        self.group = Group(
            Member(spec, plan, metrics_window, member), policy or Policy(), self._fresh
        )
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
        self.record = record or DurabilityRecord()
        #: the answers of keyed requests (``service.durability.idempotency``)
        self.answers = answers or Answers(ttl=86400.0, max_bytes=32 << 20)
        self.journal = Journal(log, name, self.record.incarnation) if log is not None else None
        self.learns = learns
        #: the feature rows learned since the last publication (None: not tracked)
        self._changes: RowChanges | None = None
        #: where a parallel model's shares are read (``service.scale.parallel.Rounds``)
        self._rounds = rounds

    def _fresh(self, member: Member, name: str) -> Member:
        """A fresh member of ``member``'s spec (a drift challenger)."""
        return Member(member.spec, member.plan, self._metrics_window, name)

    def new_member(self, spec, plan, name: str) -> Member:
        """A new member ``name`` of a checked spec and its plan (a challenger)."""
        return Member(spec, plan, self._metrics_window, name)

    # -- reading -------------------------------------------------------------------------
    @property
    def champion(self) -> Member:
        """The member that serves."""
        return self.group.champion

    @property
    def spec(self):
        """The serving member's create request (the model's input, classes and task are
        every member's)."""
        return self.group.champion.spec

    @property
    def plan(self):
        return self.group.champion.plan

    @property
    def version(self) -> int:
        return self.record.version

    @property
    def incarnation(self) -> str:
        return self.record.incarnation

    @property
    def n_features(self) -> int:
        return self.plan.n_features

    @property
    def classes(self) -> list:
        return self.plan.classes

    @property
    def family(self):
        """The serving member's family adapter (labels, scores; ``service.model.families``)."""
        return self.champion.family

    @property
    def estimator(self) -> Estimator:
        """The serving member's estimator."""
        return self.champion.estimator

    def reading(self) -> AbstractContextManager:
        """``with live.reading():`` the model does not change meanwhile (its read lock)."""
        return self.lock.read()

    @property
    def learned_in_shares(self) -> bool:
        """A parallel model: its log is learned by its shares (``service.scale.parallel``)
        and reaches this copy only as merged versions; it never replays or catches up."""
        return self.group.policy.parallel is not None

    def shares(self) -> list[dict]:
        """A parallel model's shares, each one's learner and log position, read from Redis
        (``Rounds.shares``); none for another model or without Redis."""
        parallel = self.group.policy.parallel
        if parallel is None or self._rounds is None:
            return []
        return self._rounds.shares(self.name, parallel.learners)

    def describe(self, view: View) -> dict:
        """``view(self)`` read under the read lock: a change and its snapshot seen together."""
        with self.lock.read():
            return view(self)

    def target(self, label, where: str):
        """The estimator's target for a request's label (class index, or value)."""
        return self.family.target(label, where)

    def predict(
        self,
        rows: list[Row],
        variant: str | None = None,
        blocking: bool = True,
        member: str | None = None,
    ) -> tuple[int, str, str, list, list, list] | None:
        """The model version, the member and variant that scored, and the labels, scores and
        probabilities of validated rows, from ``member`` (None: the champion; a challenger
        scores in the shadow) and its ``variant`` (None: the one that serves, the live one
        of a challenger). With ``blocking`` false, None (and nothing done) if a learner
        holds the model or waits for it: the event loop predicts only what it need not wait
        for."""
        return self._predict(batch_from_rows(rows), variant, blocking, member)

    def predict_batch(
        self, batch: CSRBatch, variant: str | None = None, member: str | None = None
    ) -> tuple[list, list, list]:
        """The labels, scores and probabilities of a validated batch."""
        return self._predict(batch, variant, True, member)[3:]

    def _predict(self, batch: CSRBatch, variant, blocking: bool = True, member=None):
        check_norms(batch)
        if not self.lock.acquire_read(blocking):
            return None
        try:
            version = self.record.version
            scorer = self.group.member(member)
            if scorer is None:
                raise NotFound("member_not_found", f"model {self.name!r} has no member {member!r}")
            if variant is None:
                variant = self.group.variant if scorer is self.champion else "live"
            labels, scores, probabilities = scorer.predict(batch, variant)
        finally:
            self.lock.release_read()
        return version, scorer.name, variant, labels, scores, probabilities

    def footprint(self) -> Footprint:
        """What the model holds against the limits (``Footprint``)."""
        members = self.group.members()
        models, nbytes = len(members), sum(m.plan.nbytes for m in members)
        group = self.group
        if group.policy.drift.on_drift == "challenger" and group.drift_name() not in group.names():
            models, nbytes = models + 1, nbytes + self.champion.plan.nbytes  # (reserved)
        return Footprint(models, nbytes)

    def memory(self) -> int:
        """The bytes the model's arrays and its snapshot capture buffers hold now (what
        ``Plan.nbytes`` counts before the model is built)."""
        with self.lock.read():
            arrays = sum(a.nbytes for _, a in self.champion.estimator.arrays())
            arrays += self._standby_nbytes()  # (an api replica's)
            return arrays + sum(b.nbytes for b in self._buffers.values())

    def parameter_norm(self) -> float:
        """Frobenius norm of the live model's parameters (no copy; PQR: of z)."""
        with self.lock.read():
            total = sum(
                squared_norm(a)
                for name, a in self.champion.live.arrays()
                if a.dtype.kind == "f" and not name.endswith("n_")
            )
        return float(np.sqrt(total))

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
        estimator = self.champion.estimator
        if self.champion.averaged and estimator.averages_within(batch.n_rows):
            work += plan.floats
        return work <= INLINE_WORK

    def learn_group(
        self, items: list[Feedback], blocking: bool = True
    ) -> tuple[list, Position] | None:
        """Learn several requests' validated feedback in order, as one writer-lock hold: one
        outcome per item, its answer or its exception (the others go on). The records of
        the items that pass the norm check are appended together before any is learned; if
        that append fails, each of them gets the error. A keyed item's answer is kept
        (``answers``) as it is learned; a keyed item whose record the log already holds (an
        append whose reply was lost) is answered from it. Returns the outcomes and the log
        position the caller ``sync``s before acknowledging any of them (None: none). With
        ``blocking`` false (the event loop), None and nothing done if the writer lock or the
        log would make it wait."""
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
        if not self.learns:  # a process that only logs changes nothing: no writer lock
            if not blocking:
                return None
            with tracing.span("feedback.append", records=len(ready)):
                return outcomes, self._log_only(items, ready, outcomes)
        if not self.lock.acquire_write(blocking):
            return None
        try:
            return self._learn_ready(items, ready, outcomes, blocking)
        finally:
            self.lock.release_write()

    def _learn_ready(self, items: list[Feedback], ready: list[int], outcomes: list, blocking):
        """``learn_group`` with the writer lock held."""
        journal = self.journal
        if journal is not None and journal.uncertain:
            if not blocking:
                return None
            try:
                self.catch_up()
            except ServiceError as error:
                for k in ready:
                    outcomes[k] = error
                return outcomes, None
            ready = [k for k in ready if not self._answered(items[k], outcomes, k)]
        if self.group.paused and journal is not None:
            return self._log_paused(items, ready, outcomes, blocking)
        positions: list = [None] * len(ready)
        if journal is not None and ready:
            appended = journal.appended
            with tracing.span("feedback.append", records=len(ready)) as span:
                positions = self._append(items, ready, outcomes, blocking)
                if positions is None and span is not None:  # tried again in a thread
                    span.set_attribute("deferred", True)
            if not positions:
                return None if positions is None else (outcomes, None)
            self.record.learned(
                positions[0], positions[-1], len(positions), journal.appended - appended
            )
        with tracing.span("feedback.learn", requests=len(ready)):
            for k, position in zip(ready, positions, strict=True):
                item = items[k]
                try:
                    outcomes[k] = self._learn(item)
                except Exception as error:  # the others are logged: learn them too
                    outcomes[k] = error
                self._keep(item, outcomes[k], time.time(), position)
        return outcomes, positions[-1] if positions else None

    def _log_paused(self, items: list[Feedback], ready: list[int], outcomes: list, blocking):
        """Learning paused: the items are logged and acknowledged (``logged``), their
        records added to the backlog (writer lock held); as ``_learn_ready``."""
        positions = self._append(items, ready, outcomes, blocking) if ready else []
        if not positions:
            return None if positions is None else (outcomes, None)
        self.record.backlogged(positions[-1], len(positions))
        for k, position in zip(ready, positions, strict=True):
            outcomes[k] = outcome.logged(self.name, self.record.version, items[k].batch.n_rows)
            self._keep(items[k], outcomes[k], time.time(), position)
        return outcomes, positions[-1]

    def _append(self, items: list[Feedback], ready: list[int], outcomes: list, blocking):
        """Append the ready items' records (writer lock held): their positions; None if the
        log would make a non-``blocking`` caller wait; ``[]`` if the log failed (then each
        of their outcomes is the error)."""
        try:
            return self.journal.append([items[k] for k in ready], blocking)
        except ServiceError as error:
            for k in ready:
                outcomes[k] = error
            return []

    def _answered(self, item: Feedback, outcomes: list, k: int) -> bool:
        """Whether a keyed item's record is learned already: its key got an answer from the
        catch-up (its first attempt's append landed although its reply was lost). Then its
        outcome is that answer given again (``Replayed``), or the refusal it got."""
        if item.key is None:
            return False
        found = self.answers.get(item.key)
        if found is None:
            return False
        try:
            outcomes[k] = found.replay(item.key)
        except ServiceError as error:
            outcomes[k] = error
        return True

    def _log_only(self, items: list[Feedback], ready: list[int], outcomes: list) -> Position:
        """Append the items for the learner (a process that only logs): the unkeyed ones
        together, a keyed one with its answer unless its key has one
        (``Journal.append_once``)."""
        plain = [k for k in ready if items[k].key is None]
        position = None
        version = self.record.version
        if plain and self.journal is not None:
            try:
                position = self.journal.append([items[k] for k in plain])[-1]
            except ServiceError as error:
                for k in plain:
                    outcomes[k] = error
                plain = []
        for k in plain:
            outcomes[k] = outcome.logged(self.name, version, items[k].batch.n_rows)
        for k in ready:
            item = items[k]
            if item.key is None:
                continue
            answer = outcome.logged(self.name, version, item.batch.n_rows)
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

    def _keep(self, item: Feedback, result, at: float, position: Position) -> None:
        """Keep a keyed item's answer, or its refusal if it was applied (writer lock held);
        never over the answer its key got first (a record logged while learning was paused
        and learned since)."""
        if item.key is None or self.answers.get(item.key) is not None:
            return
        if isinstance(result, dict):
            self.answers.record(item.key, at, body=result, position=position)
        elif isinstance(result, ServiceError) and result.applied:
            self.answers.record(item.key, at, error=result, position=position)

    def learn(self, batch: CSRBatch, targets: np.ndarray) -> dict[str, Any]:
        """One request's validated batch: logged, learned and made durable (``learn_group``
        of one, then ``sync``); its refusal raised."""
        [result], position = self.learn_group([Feedback(batch, targets)])
        if position is not None:
            self.sync(position)
        if isinstance(result, BaseException):
            raise result
        return result

    def sync(self, position: Position) -> None:
        """Make the log durable up to ``position`` (after ``learn_group``, outside the lock)."""
        if self.journal is not None:
            with tracing.span("feedback.fsync"):
                self.journal.sync(position)

    def catch_up(self) -> None:
        """Learn what the log holds after our position (an append whose reply was lost may
        have landed; the backlog of paused learning), so that the live model stays equal to
        snapshot + log."""
        for position, record in self.journal.records_after(self.record.read_position):
            self._replay_one(position, record)
        self.journal.settled()

    def replay(self, records: Iterable[tuple[Position, bytes]]) -> int:
        """Learn log records ``(position, bytes)`` in order (start-up recovery, or a learner
        consuming the log); returns how many. A record the model refuses (it was refused
        live the same way) is skipped."""
        count = 0
        with self.lock.write():
            for position, record in records:
                if not after(position, self.record.read_position):
                    continue  # learned already (learning resumed meanwhile, say)
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
        if self.group.paused:  # logged while paused: in the backlog, answered as logged
            logged = outcome.logged(self.name, self.record.version, batch.n_rows)
            self._keep(item, logged, at, None)
            self.record.backlogged(position, 1)
            return
        try:
            result = self._learn(item)
        except ServiceError as error:  # refused live too (e.g. a float64 overflow)
            log.warning("replay of %s: record %s refused: %s", self.name, position, error)
            result = error
        self._keep(item, result, at, None)
        self.record.learned(position, position, 1, len(record))

    def learn_part(self, position: Position, batch: CSRBatch, targets: np.ndarray) -> None:
        """Learn a share's examples of the log record at ``position`` (a parallel model's
        share, ``service.scale.parallel``), as the record's own replay would: refused
        examples are skipped as in ``replay``."""
        with self.lock.write():
            try:
                self._learn(Feedback(batch, targets))
            except ServiceError as error:
                log.warning("share of %s: record %s refused: %s", self.name, position, error)
            self.record.learned(position, position, 1, 0)

    def load_merged(
        self,
        base: int,
        snapshot: dict,
        means: dict,
        counts: dict,
        first: Position,
        end: Position,
        records: int,
    ) -> int | None:
        """Become a parallel model's merged round (``service.scale.parallel.merge_round``):
        the last share's ``snapshot``, each member of ``means`` holding that flat vector of
        floats (``core.parallel.unflatten``) and ``counts`` more examples and aggressive
        updates, at the next version and the round's ``end`` (its records from ``first``).
        One writer-lock hold: a prediction sees the round before or this one, whole. None
        (nothing done) unless the model is still at version ``base``, the one the round
        started from (a change made meanwhile: the shares learn the round again)."""
        with self.lock.write():
            if self.record.version != base:
                return None
            self._load(snapshot)
            for name, mean in means.items():
                member = self.group.member(name)
                member.estimator.set_state(unflatten(mean, member.estimator.get_state()))
                member.add_counts(*(int(c) for c in counts[name]))
            self.record.learned(first, end, records, 0)
            return self.record.advance()

    def _learn(self, item: Feedback) -> dict[str, Any]:
        """Learn a validated item (writer lock held): its answer. A model that refuses an
        example (a score overflowing float64) answers ``unlearnable_example``; the rows
        before it may have been learned, and the version moves on so that a snapshot sees
        it. Replay meets the same refusal at the same row, so recovery stays exact."""
        batch = item.batch
        if self._changes is not None:  # (before: a refused row may follow learned ones)
            self._changes.mark(batch.indices)
        member = self.champion  # (the one that answers, even if the batch promotes another)
        try:
            learned, n_aggressive, _ = self.group.learn(batch, item.targets)
        except ValueError as error:
            self.record.advance()
            raise InvalidRequest(
                "unlearnable_example", f"the model refused an example: {error}", applied=True
            ) from None
        version = self.record.advance() if batch.n_rows else self.record.version
        if self.champion is not member:  # promoted: every array served is another one
            self.mark_all_changed()
        return outcome.learned(
            self.name, version, batch.n_rows, n_aggressive, learned, member.label, item.with_results
        )

    # -- state ---------------------------------------------------------------------------
    def snapshot_state(self) -> Capture:
        """State and record marks read together, the arrays copied under the read lock into
        buffers kept for the next capture (valid until then: hold ``snapshot_lock`` until
        the capture is encoded)."""
        capture.prepare_buffers(self.champion.estimator, self._buffers)
        with self.lock.read():
            return state.capture_of(self, self._buffers)

    def publication_state(self, full: bool, delta: Callable[[LiveModel], Any]) -> tuple:
        """A publication's capture and delta read together under the read lock: the whole
        state when ``full`` (as ``snapshot_state``), else the state without its arrays; and
        ``delta(self)`` (``service.scale.deltas``). Hold ``snapshot_lock`` until encoded."""
        if full:
            capture.prepare_buffers(self.champion.estimator, self._buffers)
        with self.lock.read():
            return state.capture_of(self, self._buffers if full else None, full), delta(self)

    def recover(self, header: dict, snapshot: dict) -> None:
        """Become a snapshot (start-up, a takeover, before serving): its state, and the
        version and log position its header names (``service.durability.store``); the
        log after it is ``replay``ed next."""
        with self.lock.write():
            self._load(snapshot)
            self.record.restored(header)

    def adopt(self, snapshot: dict, version: int) -> None:
        """Start from a model file's state at ``version`` (an import, an offline model),
        before serving; ValueError (nothing changed) if the state does not fit the spec."""
        with self.lock.write():
            self._load(snapshot)
            self.record.set_version(version)

    def _load(
        self, snapshot: dict, estimator_written: bool = False, built: Estimator | None = None
    ) -> None:
        """A snapshot's state (``state.load``; writer lock held): every row changed since
        (and, unless its estimator was ``built`` aside, the standby is not a copy any more)."""
        if built is None:
            self._standby = None
        created_at = state.load(self, snapshot, estimator_written, built)
        if created_at is not None:
            self.created_at = created_at
        self.mark_all_changed()

    # -- delta publication (``service.scale.deltas``) -------------------------------------
    def track_changes(self) -> None:
        """Track the feature rows learned from now on (read lock held by a publication
        whose capture includes everything learned so far)."""
        if self._changes is None:
            self._changes = RowChanges(self.n_features + 1)
        self._changes.take()

    def take_changes(self) -> np.ndarray | None:
        """The rows changed since the last ``take_changes`` (None: every row), forgotten."""
        return self._changes.take()

    def mark_all_changed(self) -> None:
        """Every row changed (a refit, a restore, a failed publication)."""
        if self._changes is not None:
            self._changes.mark_all()
