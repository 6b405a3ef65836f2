"""The models of one process and their lifecycle (``service.model.lifecycle``): created, served,
restored, deleted. Routes, the worker, the roles and recovery go through ``Models``.

- **create**: the request is checked against the kind catalogue and every limit before
  anything is built; the model is durable (snapshot 0, a fresh log) before it serves.
- **delete**: the model stops admitting requests (404 from then on), waits for those
  inside, writes a durable tombstone, then removes its snapshots and log. If the removal
  fails part-way, the tombstone stays: the worker and the next start finish it; the model
  never comes back. If the tombstone cannot be written, nothing changed (503).
- **recover** (start-up): pending deletions are finished, then every model is restored from
  its latest snapshot and its log replayed after the snapshot's position; beyond
  ``eager_restore`` models (role ``all``), the others stay dormant (their names held) and
  are restored on first use (``get``), so that a start costs what is used, not the count.
- **discover** (api replicas): models created or deleted by other processes appear or go.
- **own** / **disown** (learners, ``service.scale.roles``): a learner restores the models whose
  lease it takes and lets go of those it loses or hands over (nothing is deleted).

The changes of a model's members, policies and learning (``add_challenger``, ``promote``,
``set_policy``, ``set_learning``, ...) are ``Models`` methods from
``service.model.group_changes`` (a base class).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import astuple
from typing import BinaryIO

from pydantic import ValidationError
from redis.exceptions import RedisError

from service.durability.capture import ANSWERS, MODEL
from service.durability.feedback_log import LogUnavailable
from service.durability.idempotency import Answers, Key
from service.durability.interchange import InterchangeError, load_model, write_model
from service.durability.record import DurabilityRecord
from service.durability.snapshots import SnapshotWriter
from service.durability.store import SnapshotError, SnapshotMeta, decode
from service.exceptions import Conflict, InvalidRequest, NotFound, Unavailable
from service.model import changes
from service.model.group import Policy, policy_of
from service.model.group_changes import GroupChanges
from service.model.kinds import MERGEABLE, Limits, plan
from service.model.live import LiveModel, View
from service.model.member import ORIGINAL
from service.model.registry import Registry, over_budget
from service.model.spec import CreateModel, member_spec, spec_from_json, spec_to_json
from service.model.state import serving_member
from service.ops.machine import memory_limit
from service.scale.parallel import Rounds

log = logging.getLogger("lorentztron")


class Models(GroupChanges):
    """The live models of one process (created by the app's lifespan); the changes of a
    model's members, policies and learning come from ``GroupChanges``."""

    def __init__(self, settings, store, feedback_log, cache, metrics):
        self.settings = settings
        self.store = store
        #: the feedback log (``service.durability.feedback_log``), None when disabled
        self.feedback_log = feedback_log
        self.cache = cache
        self.metrics = metrics
        self.registry = Registry()
        deltas = settings.role == "learner" and settings.full_snapshot_every > 1
        self.writer = SnapshotWriter(
            store,
            metrics,
            settings.snapshot_retention,
            settings.log_trim,
            settings.full_snapshot_every if deltas else None,
        )
        self.limits = Limits(
            settings.max_model_floats, settings.max_submodels, settings.averaging_interval
        )
        #: the bytes all models may hold together (``Plan.nbytes``)
        self.budget = settings.max_total_bytes or memory_limit() // 2
        #: a model that exists is restored whatever the limits are now
        self._restore_limits = Limits(sys.maxsize, sys.maxsize, settings.averaging_interval)
        #: the api role serves published versions and never writes a snapshot
        self.writes_snapshots = settings.role != "api"
        #: the parallel models' rounds in Redis (``service.scale.parallel``; None: no Redis)
        client = getattr(store, "client", None)
        self.rounds = Rounds(client, store.keys) if client is not None else None
        #: one restore of a name at a time outside start-up: a dormant model's first use, a
        #: model another process created (``get``, ``discover``): none is built twice
        self._restoring = threading.Lock()
        #: the models on the store not restored yet (``recover``): restored on first use
        self._dormant: set[str] = set()

    # -- reading -------------------------------------------------------------------------
    def get(self, name: str) -> LiveModel:
        """The serving model of this name (restored now if it was dormant, or, in the api
        role, if another process created it); NotFound otherwise."""
        live = self._find(name)
        if live is None and not self.writes_snapshots:
            live = self._created_elsewhere(name)
        if live is None or not live.lifecycle.serving:
            raise NotFound("model_not_found", f"no model named {name!r}")
        return live

    def _created_elsewhere(self, name: str) -> LiveModel | None:
        """Api role: a model another process created since this one's last poll, restored
        now, so that a model created through one replica (one worker of ``serve --workers``
        behind one port) answers at once through the others. None if there is none."""
        with self._restoring:
            live = self.registry.get(name)
            if live is not None:
                return live
            try:
                if self.store.incarnation(name) is None or name not in self.store.models():
                    return None
                return self._restore(name)
            except Exception as error:  # the store: the poll tries again
                log.warning("could not look model %s up: %s", name, error)
                return None

    def _find(self, name: str) -> LiveModel | None:
        """The model holding the name, restored first if it is dormant."""
        live = self.registry.get(name)
        if live is None and name in self._dormant:
            return self._wake(name)
        return live

    def _wake(self, name: str) -> LiveModel | None:
        """Restore a dormant model (one at a time: two requests never build it twice); None
        if it cannot be restored (logged: it is gone, as at start-up); Unavailable while the
        store or the log cannot be read (it stays dormant)."""
        with self._restoring:
            if name not in self._dormant:
                return self.registry.get(name)
            try:
                live = self._restore(name, counted=True)
            except (LogUnavailable, OSError, RedisError) as error:
                raise Unavailable(
                    "store_unavailable", f"model {name!r} could not be restored: {error}"
                ) from None
            self._dormant.discard(name)
            if live is None:
                self.metrics.models.dec()
            return live

    def _limit(self) -> int:
        """The models the registry may hold: ``max_models`` less the dormant ones."""
        return self.settings.max_models - len(self._dormant)

    def page(self, after: str | None, limit: int) -> tuple[list[LiveModel], str | None]:
        """The serving models of up to ``limit`` names after ``after`` (by name; the
        dormant ones restored), and the cursor of the next page (None: the last)."""
        names = self.registry.names()
        if self._dormant:
            names = sorted({*names, *self._dormant})
        start = bisect_right(names, after) if after is not None else 0
        page = names[start : start + limit]
        lives = [self._find(name) for name in page]
        more = start + limit < len(names)
        return [live for live in lives if live is not None and live.lifecycle.serving], (
            page[-1] if more and page else None
        )

    def serving(self) -> list[LiveModel]:
        """Every serving model, by name."""
        return [live for live in self.registry.models() if live.lifecycle.serving]

    def enter(self, name: str) -> LiveModel:
        """The model, admitting one request into it (``leave`` when answered)."""
        live = self.get(name)
        live.lifecycle.enter()
        return live

    def leave(self, live: LiveModel) -> None:
        live.lifecycle.exit()

    @contextmanager
    def use(self, name: str) -> Iterator[LiveModel]:
        """``with models.use(name) as live:``: a request inside the model."""
        live = self.enter(name)
        try:
            yield live
        finally:
            live.lifecycle.exit()

    # -- create and delete ----------------------------------------------------------------
    def create(
        self,
        spec: CreateModel,
        view: View,
        key: Key | None = None,
        state: dict | None = None,
        version: int = 0,
    ) -> dict:
        """A new serving model, durable before it serves (Unavailable if the store or the
        log fails: then it was not created); its answer, the model's ``view`` once saved.
        With an idempotency ``key``, the retry of a create that succeeded gets its answer
        again. ``state``: start from this snapshot state at ``version`` (an import)."""
        existing = self._find(spec.name)
        if existing is not None:
            answer = existing.answers.get(key) if key is not None else None
            if answer is not None:
                return answer.replay(key)
            raise Conflict("model_exists", f"a model named {spec.name!r} exists")
        if self.registry.count >= self._limit():
            raise Conflict("too_many_models", f"at most {self.settings.max_models} models")
        policy = policy_of(spec)
        spec = member_spec(spec)
        checked = plan(spec, self.limits)
        if policy.parallel is not None:
            self._check_parallel(checked)
        over_budget(self.registry.nbytes, checked.nbytes, self.budget)  # before allocating
        if checked.kind.margins:  # the default made explicit: snapshots keep what was built
            resolved = "platt" if checked.calibrated else "none"
            spec = spec.model_copy(update={"calibration": resolved})
        live = self._live(spec.name, spec, checked, policy=policy)
        if state is not None:
            try:
                live.adopt(state, version)
            except (ValueError, KeyError, TypeError) as error:
                raise InvalidRequest(
                    "invalid_input", f"the model's state does not fit its spec: {error}"
                ) from None
        self.registry.add(live, self._limit(), self.budget)
        try:
            if spec.name in self.store.deleting():  # an earlier model's, not yet finished
                self._remove_files(spec.name)
            if self.feedback_log is not None:
                self.feedback_log.delete(spec.name)  # a log left without a snapshot
            if policy.parallel is not None:
                self.store.set_parallel(spec.name, *astuple(policy.parallel))
            answer = changes.save_held(
                live, lambda c: self.writer.write(live, c, create=True), view, key
            )
        except Exception as error:
            self.registry.remove(live)
            live.lifecycle.end()
            raise Unavailable(
                "store_unavailable",
                f"the model could not be made durable, so it was not created: {error}",
            ) from None
        live.lifecycle.serve()
        self.metrics.track_model(live)
        return answer

    def _check_parallel(self, checked) -> None:
        """A parallel model (``service.scale.parallel``) needs learners over Redis and a
        kind whose copies merge by aligned averaging (InvalidRequest otherwise)."""
        if getattr(self.store, "set_parallel", None) is None or self.settings.role == "all":
            raise InvalidRequest(
                "invalid_params",
                "parallel learning needs the roles mode: api replicas and learners sharing "
                "LORENTZTRON_REDIS_URL (LORENTZTRON_ROLE=api or learner)",
                {"field": "parallel"},
            )
        if not checked.kind.mergeable:
            raise InvalidRequest(
                "invalid_params",
                f"kind {checked.kind.name!r} cannot be learned in parallel: its copies do not "
                f"merge by aligned averaging (kinds: {', '.join(MERGEABLE)})",
                {"field": "parallel"},
            )

    def export(self, name: str) -> tuple[BinaryIO, int]:
        """The model as a safetensors file (``service.durability.interchange``), as it is now
        (the answers of its keyed requests left out: they belong to this model only): a
        temporary file on disk at its start (an export costs no copy of a model in memory,
        however slowly it is read), and its size. The caller closes it (which removes it)."""
        file = tempfile.TemporaryFile()
        try:
            with self.use(name) as live, live.snapshot_lock:
                captured = live.snapshot_state()  # (into the capture buffers: no new copy)
                service = captured.state["service"]
                arrays = {k: v for k, v in service["arrays"].items() if not k.startswith(ANSWERS)}
                state = {**captured.state, "service": {**service, "arrays": arrays}}
                size = write_model(file, name, captured.version, spec_to_json(live.spec), state)
            file.seek(0)
        except BaseException:
            file.close()
            raise
        return file, size

    def import_model(self, data: bytes, name: str, view: View, key: Key | None = None) -> dict:
        """A new model ``name`` from a safetensors file (``export``, ``lorentztron learn``);
        durable before it serves, like ``create``."""
        try:
            info, state = load_model(data)
            spec = CreateModel.model_validate({**info["spec"], "name": name})
        except (InterchangeError, ValidationError) as error:
            raise InvalidRequest("invalid_input", f"not a model file: {error}") from None
        return self.create(spec, view, key, state=state, version=info["version"])

    def delete(self, name: str) -> None:
        """Delete a model and its files (module docstring)."""
        live = self._find(name)
        if live is None or not live.lifecycle.close():
            raise NotFound("model_not_found", f"no model named {name!r}")
        try:
            self.store.mark_deleting(name)
        except Exception as error:
            live.lifecycle.serve()
            raise Unavailable(
                "store_unavailable", f"the model could not be deleted, so it is kept: {error}"
            ) from None
        try:
            self._remove_files(name)
        except Exception as error:  # the tombstone stays: finished later, never undone
            log.warning("deletion of %s left files behind (finished later): %s", name, error)
        self._drop(live)

    def _remove_files(self, name: str) -> None:
        """Remove a tombstoned model's snapshots and log, then its tombstone."""
        self.store.delete(name)
        if self.feedback_log is not None:
            self.feedback_log.delete(name)
        self.store.clear_deleting(name)

    def finish_deletions(self) -> None:
        """Finish the deletions whose files could not all be removed (worker, start-up); a
        name held by a model being created again is finished by its creation."""
        for name in self.store.deleting():
            if self.registry.get(name) is None:
                self._remove_files(name)
                log.info("finished the deletion of %s", name)

    def _drop(self, live: LiveModel) -> None:
        """Take a model out of this process (deleted here or elsewhere)."""
        live.lifecycle.close()
        self.registry.remove(live)
        self.cache.forget_model(live.incarnation)
        self.metrics.forget_model(live.name)
        live.lifecycle.end()

    # -- snapshots -----------------------------------------------------------------------
    def _check_writer(self) -> None:
        if not self.writes_snapshots:
            raise Conflict(
                "wrong_role",
                "this api replica serves published versions: snapshots, restores and changes "
                "of a model's members, policies and learning are made on the learner",
            )

    def snapshot(self, name: str) -> SnapshotMeta:
        """Write a snapshot of the model now."""
        self._check_writer()
        with self.use(name) as live:
            try:
                return self.writer.snapshot(live, force=True)
            except Exception as error:
                self.metrics.snapshot_failures.labels(name).inc()
                raise Unavailable(
                    "store_unavailable", f"the snapshot could not be written: {error}"
                ) from None

    def snapshots(self, name: str) -> list[SnapshotMeta]:
        """The model's snapshots, oldest first."""
        self.get(name)
        try:
            return self.store.versions(name)
        except Exception as error:
            raise Unavailable(
                "store_unavailable", f"the snapshot store is unavailable: {error}"
            ) from None

    def restore_snapshot(self, name: str, version: int, view: View, key: Key | None = None) -> dict:
        """Serve a snapshot's state from the model's next version on, durably; the answer
        (the model's ``view``). With an idempotency ``key``, a retry gets the first answer."""
        self._check_writer()
        with self.use(name) as live:
            answer = live.answers.claim(key) if key is not None else None
            if answer is not None:
                return answer.replay(key)
            try:
                return self._restore_snapshot(live, version, view, key)
            finally:
                if key is not None:
                    live.answers.release(key)

    def _restore_snapshot(self, live: LiveModel, version: int, view: View, key) -> dict:
        name = live.name
        try:
            header, state = decode(self.store.load(name, version))
        except SnapshotError as error:
            raise NotFound("snapshot_not_found", str(error)) from None
        except Exception as error:
            raise Unavailable(
                "store_unavailable", f"the snapshot store is unavailable: {error}"
            ) from None
        if spec_from_json(header["spec"]) != live.spec:
            raise Conflict(
                "snapshot_mismatch",
                "the snapshot was taken from a model with another configuration",
            )
        try:
            return changes.restore(live, state, lambda c: self.writer.write(live, c), view, key)
        except ValueError as error:
            raise Conflict("snapshot_mismatch", str(error)) from None
        except Exception as error:
            raise Unavailable(
                "store_unavailable",
                "the restored state could not be written as the newest snapshot, so the "
                f"model is unchanged: {error}",
            ) from None

    # -- recovery and discovery ----------------------------------------------------------
    def recover(self) -> None:
        """Start-up: finish pending deletions, then restore every model (snapshot + log).
        Raises if the store is unreachable (the worker tries again)."""
        upgrade = getattr(self.store, "upgrade", None)
        if upgrade is not None:
            for name in upgrade():
                log.info("moved the Redis keys of %s to the hash-tagged layout", name)
        self.finish_deletions()
        if self.settings.role == "learner":  # a learner restores the models it leases
            return
        names = sorted(self.store.models())
        lazy = self.settings.role == "all"  # (api replicas load every model's versions)
        eager = names[: self.settings.eager_restore] if lazy else names
        for name in eager:
            if self.registry.get(name) is None:
                self._restore(name)
        dormant = {
            name for name in names[len(eager) :] if self.registry.get(name) is None
        } - self._dormant
        self._dormant |= dormant
        self.metrics.models.inc(len(dormant))
        if dormant:
            log.info("%d models restored, %d on first use", len(eager), len(dormant))

    def discover(self) -> None:
        """Roles: add the models another process created, drop those it deleted (or
        deleted and created again: another incarnation)."""
        names = set(self.store.models())
        for live in self.registry.models():
            if not live.lifecycle.serving:
                continue
            if live.name not in names or self.store.incarnation(live.name) not in (
                None,
                live.incarnation,
            ):
                self._drop(live)
                log.info("model %s was deleted elsewhere", live.name)
        for name in names:
            with self._restoring:
                if self.registry.get(name) is None:
                    self._restore(name)

    def own(self, name: str, fence: str) -> LiveModel | None:
        """A learner took the model's lease ``fence``: the model restored here (snapshot +
        log), every write of its snapshots and log position checked against the lease;
        a copy held before (created here, or under an earlier lease) is replaced. None
        (logged) if it cannot be restored."""
        self.disown(name)
        return self._restore(name, fence)

    def disown(self, name: str) -> None:
        """A learner lost or handed over the model's lease: it leaves this process, its
        snapshots and log stay."""
        live = self.registry.get(name)
        if live is not None and live.lifecycle.serving:
            self._drop(live)

    def _restore(
        self, name: str, fence: str | None = None, counted: bool = False
    ) -> LiveModel | None:
        """Restore one model from its latest snapshot and replay its log after it (the api
        role serves the snapshot); None (logged) if it cannot be restored. ``counted``: the
        model is already among the metrics' models (a dormant one)."""
        try:
            header, state = decode(self.store.load(name))
            spec = spec_from_json(header["spec"])
            checked = plan(spec, self._restore_limits)
            record = DurabilityRecord(self._incarnation(name, state), fence)
            live = self._live(name, spec, checked, record, member=serving_member(state))
            live.recover(header, state)
            replayed = 0
            if self.settings.role != "api" and not live.learned_in_shares:
                replayed = self._replay(live)  # (a parallel model's shares learn its log)
            self.registry.add(live)
        except (LogUnavailable, OSError, RedisError):
            raise  # the store or the log is unreachable: the worker tries again
        except Exception as error:  # this model's snapshot or state: the others go on
            log.error("could not restore model %s: %s", name, error)
            return None
        live.lifecycle.serve()
        self.metrics.track_model(live, counted)
        log.info(
            "restored model %s at version %d (snapshot %d + %d log records)",
            name,
            live.version,
            header["version"],
            replayed,
        )
        return live

    def copy_of(self, name: str, header: dict, state: dict) -> LiveModel:
        """A learning copy of a model's snapshot, outside this process's models (a parallel
        model's share, ``service.scale.parallel``): no log, no limits, never served."""
        spec = spec_from_json(header["spec"])
        checked = plan(spec, self._restore_limits)
        incarnation = state["service"]["scalars"].get(MODEL + "incarnation")
        live = self._live(
            name,
            spec,
            checked,
            DurabilityRecord(incarnation),
            member=serving_member(state),
            logged=False,
        )
        live.recover(header, state)
        return live

    def _incarnation(self, name: str, state: dict) -> str:
        """The restored model's incarnation: the store's (Redis), else the snapshot's (a
        new one for a snapshot that predates incarnations)."""
        saved = state["service"]["scalars"].get(MODEL + "incarnation") or uuid.uuid4().hex
        adopt = getattr(self.store, "adopt", None)
        return adopt(name, saved) if adopt is not None else saved

    def _replay(self, live: LiveModel) -> int:
        """Learn the log records after the model's position (start-up recovery)."""
        if live.journal is None:
            return 0
        started = time.perf_counter()
        count = live.replay(self.feedback_log.read_after(live.name, live.record.read_position))
        self.metrics.replay_duration.observe(time.perf_counter() - started)
        self.metrics.replayed.labels(live.name).inc(count)
        return count

    def _live(
        self,
        name: str,
        spec: CreateModel,
        checked,
        record: DurabilityRecord | None = None,
        policy: Policy | None = None,
        member: str = ORIGINAL,
        logged: bool = True,
    ) -> LiveModel:
        """A new live model of a checked create request (not yet serving), with its log;
        outside the ``all`` role, feedback is only logged (the learner's consumer learns
        it). Not ``logged``: no log, and it learns (a parallel model's share)."""
        settings = self.settings
        return LiveModel(
            name,
            spec,
            checked,
            settings.metrics_window,
            policy=policy,
            planner=lambda member_spec: plan(member_spec, self._restore_limits),
            member=member,
            record=record,
            answers=Answers(settings.idempotency_ttl, settings.idempotency_bytes),
            log=self.feedback_log if logged else None,
            learns=settings.role == "all" or not logged,
            rounds=self.rounds,
        )
