"""Run modes beyond ``all``: learners (any number, sharing the models) and api replicas.

- **learner** (``LORENTZTRON_ROLE=learner``): learns the models whose lease it holds
  (``service.scale.leases``). Free models are placed on the least-loaded live learner; a learner
  that dies or stalls loses its leases after ``lease_ttl`` seconds and another takes its
  models over (restored from snapshot + log, ``Models.own``); a learner that joins gets
  models handed over by the most loaded ones (a final snapshot, then the lease is released).
  For each model it owns, a learner reads the model's log stream after the model's
  position, learns each record in stream order, and every ``publish_interval`` seconds (in
  a thread of its own: the learning never waits for a publication) writes changed models
  as snapshots or deltas (with their log position) and announces them on
  ``{prefix}:published``. Every write of a snapshot or of the log's trim position is
  checked against the lease in the script that makes it: a learner that lost a model
  cannot write it. Feedback posted to a learner is appended to the log like anywhere else;
  a learner serves predictions of the models it owns only.
- **api** (``LORENTZTRON_ROLE=api``): serves predictions from the latest published version
  and appends feedback to the log (acknowledged once durable in Redis; ``logged`` in the
  response). A subscriber thread loads a model's new version as soon as it is announced; a
  poll every ``poll_interval`` seconds is the fallback (a missed message, a restart of Redis)
  and also picks up models created or deleted elsewhere. ``lorentztron_model_version`` is
  the version a replica serves; ``lorentztron_freshness_seconds`` observes, per loaded
  version, the delay from the append of the oldest record it newly includes to the moment the
  replica serves it (the worst case over those records).

Both roles need Redis (``LORENTZTRON_REDIS_URL``, one server or a Redis Cluster): the log,
the snapshots, the leases and the channel live there. The scaling model: a model's
feedback is bounded by its one learner (its updates are sequential), models spread over
learners; predictions scale with replicas, each loading every published version whole. A
``parallel`` model is the exception: k learners each learn a share of its log, leased like
a model, and its owner merges them (``service.scale.parallel``).
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from service.durability.feedback_log import after, position_time
from service.durability.store import IncarnationGone, SnapshotError, decode
from service.exceptions import NotFound
from service.ops import failpoints, tracing
from service.scale import deltas
from service.scale.leases import LeaseLost, Leases, crowded, learner_id, place, surplus
from service.scale.parallel import Rounds, Share, merge_round, share_name, split_share
from service.scale.redis_client import refresh_topology

log = logging.getLogger("lorentztron.roles")


class _Loop:
    """A daemon thread running ``step`` until stopped; errors are logged, never fatal."""

    period = 1.0

    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as error:
                log.warning("%s: %s: %s", self._thread.name, type(error).__name__, error)
                if isinstance(error, redis.RedisError):
                    refresh_topology(self.client)
                self._stop.wait(min(self.period, 1.0))

    def step(self) -> None:
        raise NotImplementedError


class _LeaseKeeper(_Loop):
    """Renews a learner's leases every third of their lifetime, in a thread of its own (a
    long replay or snapshot does not delay it); reports the ones it lost."""

    def __init__(self, learner: Learner):
        super().__init__("lease-keeper")
        self.learner = learner
        self.client = learner.client
        self.period = learner.settings.lease_ttl / 3

    def step(self) -> None:
        learner = self.learner
        learner.leases.heartbeat()
        for name, value in learner.held_leases().items():
            if learner.leases.renew(name, value):
                learner.metrics.lease_renewals.inc()
            else:
                learner.lost(name, value)
        self._stop.wait(self.period)


class _Publisher(_Loop):
    """Publishes a learner's changed models every ``publish_interval`` seconds, in a thread
    of its own: the learning never waits for a publication (the one after an averaging step
    carries the whole average, tens of MB, and takes as long to write)."""

    def __init__(self, learner: Learner):
        super().__init__("publisher")
        self.learner = learner
        self.client = learner.client
        self.period = learner.period

    def step(self) -> None:
        started = time.monotonic()
        self.learner.publish()
        self._stop.wait(max(0.0, self.period - (time.monotonic() - started)))


class Learner(_Loop):
    """One learner among any number: owns models through leases, learns their logs (this
    thread), publishes their versions (``_Publisher``) (module docstring)."""

    #: records read from one model's stream at a time
    chunk = 1000
    #: seconds to wait when no stream had anything new
    idle = 0.02

    def __init__(self, worker, settings):
        super().__init__("learner")
        self.worker = worker
        self.models = worker.models
        self.metrics = worker.metrics
        self.settings = settings
        self.store = worker.store
        self.client: redis.Redis = worker.store.client
        self.journal = worker.models.feedback_log
        self.id = learner_id()
        self.leases = Leases(self.client, self.store.keys, self.id, settings.lease_ttl)
        self.period = settings.publish_interval
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # model name -> lease value
        self._lost: dict[str, str] = {}
        self._free_since: dict[str, float] = {}
        self._next_placement = 0.0
        self._keeper = _LeaseKeeper(self)
        self._publisher = _Publisher(self)
        #: the parallel models' shares this learner holds (``service.scale.parallel``)
        self.rounds: Rounds = self.models.rounds
        self._shares: dict[str, Share] = {}

    # -- leases ----------------------------------------------------------------------------
    def held_leases(self) -> dict[str, str]:
        with self._lock:
            return dict(self._held)

    def lost(self, name: str, value: str) -> None:
        """A lease could not be renewed (the keeper) or a write was fenced: let it go."""
        with self._lock:
            if self._held.get(name) == value:
                self._lost[name] = value

    def start(self) -> None:
        self.leases.heartbeat()
        self._keeper.start()
        super().start()
        self._publisher.start()

    def stop(self) -> None:
        """Stop learning and publishing, then hand every model over: a last snapshot, the
        lease released (another learner takes it at once, without waiting for it to
        expire)."""
        super().stop()
        self._publisher.stop()
        for name in list(self.held_leases()):
            try:
                self.hand_over(name)
            except Exception as error:
                log.warning("could not hand %s over: %s", name, error)
        self._keeper.stop()
        try:
            self.leases.leave()
        except Exception as error:
            log.warning("could not leave the learners: %s", error)

    def step(self) -> None:
        with self._lock:
            lost, self._lost = self._lost, {}
        for name in lost:
            self.let_go(name, lost=True)
        now = time.monotonic()
        if now >= self._next_placement:
            self.place()
            self._next_placement = now + min(
                self.settings.poll_interval, self.settings.lease_ttl / 4
            )
        if not self.consume():
            self._stop.wait(self.idle)

    def place(self) -> None:
        """Take the free models placed here (or free for longer than a lease: whoever they
        were placed on did not come), hand one over if this learner holds too many, and
        drop the models deleted elsewhere or created here without a lease."""
        models = self.store.models()
        names = models + [
            share_name(name, share)
            for name, k in self.store.parallel(models).items()
            for share in range(k)
        ]
        held = self.held_leases()
        for name in held:
            if name not in names:  # deleted elsewhere (its lease went with it)
                self.let_go(name)
        for live in self.models.serving():
            if live.name not in held:
                self.models.disown(live.name)
        owners = self.leases.owners(names)
        learners = self.leases.live()
        free = [name for name in names if owners[name] is None]
        placed = place(free, owners, learners)
        failpoints.reach("learner.placement")
        now = time.monotonic()
        for name in list(self._free_since):
            if name not in free:
                del self._free_since[name]
        taking = []
        for name in free:
            since = self._free_since.setdefault(name, now)
            if placed[name] == self.id or now - since > self.settings.lease_ttl:
                taking.append(name)
        self.take(taking)
        # a free model counts for the learner it is placed on: one that has yet to take
        # its own (its round comes later) is not short of models, nor is this one above it
        after = {**owners, **placed}
        for name in sorted(self.held_leases())[: surplus(self.id, after, learners)][:1]:
            self.hand_over(name)
            return
        share = crowded(self.id, after, learners)
        if share is not None and share in self.held_leases():
            self.hand_over(share)

    def take(self, names: list[str]) -> None:
        """Acquire the leases of free models, all of them first (the learner that died held
        several: its share is claimed at once, not one restore after another), then restore
        each model here (snapshot + log)."""
        started = time.monotonic()
        acquired = {}
        for name in names:
            lease = self.leases.acquire(name)
            if lease is not None:
                acquired[name] = lease
                with self._lock:  # renewed by the keeper while the models are restored
                    self._held[name] = lease.value
        for name, lease in acquired.items():
            if (unit := split_share(name)) is not None:  # (its copy is built when it learns)
                with self._lock:
                    self._shares[name] = Share(*unit, lease.value, self)
                self.metrics.lease_acquisitions.inc()
                self._took(name, lease, started)
                continue
            live = self.models.own(name, lease.value)
            if live is None:  # deleted meanwhile, or unreadable (logged)
                with self._lock:
                    self._held.pop(name, None)
                self.leases.release(name, lease.value)
                continue
            self.metrics.lease_acquisitions.inc()
            self.metrics.model_owner.labels(name, self.id).set(1)
            self._took(name, lease, started)

    def _took(self, name: str, lease, started: float) -> None:
        if lease.orphaned_for is not None:
            seconds = lease.orphaned_for + time.monotonic() - started
            self.metrics.takeover.observe(seconds)
            log.info("took %s over (%.2f s without an owner)", name, seconds)

    def hand_over(self, name: str) -> None:
        """Give a model to another learner: a last snapshot, then the lease released."""
        value = self.held_leases().get(name)
        if value is None:
            return
        if split_share(name) is not None:  # (its round is learned again from the log)
            self.leases.release(name, value)
            self.metrics.lease_handovers.inc()
            self.let_go(name)
            return
        try:
            live = self.models.get(name)
            with self.models.use(name):
                meta = self.models.writer.snapshot(live)
            if meta is not None:
                self.store.publish(name, meta.version)
        except (NotFound, IncarnationGone):
            pass
        except LeaseLost:
            self.let_go(name, lost=True)
            return
        self.leases.release(name, value)
        self.metrics.lease_handovers.inc()
        self.let_go(name)

    def let_go(self, name: str, lost: bool = False) -> None:
        """The model leaves this learner (lease lost, handed over, or model deleted)."""
        with self._lock:
            self._held.pop(name, None)
            self._lost.pop(name, None)
            share = self._shares.pop(name, None)
        if share is None:
            self.models.disown(name)
            self.metrics.not_owner(name, self.id)
        if lost:
            self.metrics.lease_losses.inc()
            log.warning("lost the lease on %s", name)

    # -- learning and publishing ---------------------------------------------------------------
    def consume(self) -> bool:
        """Learn what the owned models' streams hold after their positions; whether any
        record was learned."""
        owned = []
        learned = self._learn_shares()
        for name in self.held_leases():
            if split_share(name) is not None:
                continue
            try:
                live = self.models.get(name)
            except NotFound:
                continue
            if not live.learned_in_shares:
                owned.append(live)
            elif live.group.paused:  # (its shares wait for the version that resumes)
                self._backlog(live)
            else:  # (its shares learn its log)
                learned |= self._merge(live)
        if not owned:
            return learned
        pipe = self.client.pipeline(transaction=False)
        for live in owned:
            position = live.record.read_position  # (after a paused model's backlog)
            start = "-" if position is None else f"({position}"
            pipe.xrange(self.journal.key(live.name), min=start, count=self.chunk)
        for live, entries in zip(owned, pipe.execute(), strict=True):
            # a model restored meanwhile may already include them
            fresh = [(i.decode(), fields) for i, fields in entries]
            fresh = [entry for entry in fresh if after(entry[0], live.record.read_position)]
            if not fresh or not self.journal.replicated(live.name):
                continue  # (not yet on the replicas that REDIS_WAIT_REPLICAS asks for)
            try:
                with self.models.use(live.name):
                    count = self._learn(live, fresh)
            except NotFound:  # deleted or let go meanwhile
                continue
            self.metrics.replayed.labels(live.name).inc(count)
            learned = True
        return learned

    def _learn_shares(self) -> bool:
        """Learn the held shares of parallel models (``service.scale.parallel``): each
        starts the round of its model's latest snapshot when that moved on (a merge, a
        change outside the log), then learns its examples of the round; whether any
        record was read."""
        with self._lock:
            shares = list(self._shares.items())
        learned = False
        for unit, share in shares:
            try:
                latest = self.store.latest(share.name)
                if latest is None:
                    continue
                if share.base != latest:
                    share.begin(self.store.load(share.name, latest))
                if not self.journal.replicated(share.name):
                    continue
                if share.step(self.client, self.journal.key(share.name)):
                    learned = True
                    self.rounds.progress(share.name, share.share, self.id, share.position)
            except LeaseLost:
                self.metrics.fenced_writes.inc()
                log.warning("share %s: the write of its round was refused (lease lost)", unit)
                self.lost(unit, share.fence)
            except SnapshotError as error:  # (pruned meanwhile: the next step reads the newest)
                log.info("share %s: %s", unit, error)
        return learned

    def _backlog(self, live) -> None:
        """A paused parallel model's backlog: the records after its merged position (those
        its shares had learned of the round included: they were never merged), counted
        as a model's backlog is (``discard`` skips them)."""
        start = live.record.read_position
        entries = self.client.xrange(
            self.journal.key(live.name),
            min="-" if start is None else f"({start}",
            count=self.chunk,
        )
        for position, _ in entries:
            live.record.backlogged(position.decode(), 1)

    def _merge(self, live) -> bool:
        """Merge a parallel model's round once its shares have all learned it, then write
        the merged version as a full snapshot (the start of the next round) and publish it;
        whether it merged."""
        try:
            with self.models.use(live.name):
                meta = merge_round(live, self.rounds, live.group.policy.parallel.learners)
                if meta is None:
                    return False
                saved = self.models.writer.snapshot(live, force=True)
        except (NotFound, IncarnationGone):
            return False
        except LeaseLost:
            self.lost(live.name, live.record.fence)
            return False
        if saved is not None:
            self.store.publish(live.name, saved.version)
            self.metrics.published.labels(live.name).inc()
        self.metrics.replayed.labels(live.name).inc(meta.records)
        return True

    def _learn(self, live, entries: list[tuple[str, dict]]) -> int:
        """Learn a model's stream entries ``(id, fields)`` in order: how many. While tracing
        is on, in spans ``feedback.learned`` of at most ``tracing.LINKS`` records, each span
        linked to the requests that logged its records (their entries' ``t``:
        ``service.ops.tracing``)."""
        records = [(position, fields[b"r"]) for position, fields in entries]
        if tracing.TRACER is None:
            return live.replay(records)
        count = 0
        for start in range(0, len(records), tracing.LINKS):
            part = slice(start, start + tracing.LINKS)
            parents = [fields.get(b"t") for _, fields in entries[part]]
            with tracing.linked("feedback.learned", parents, model=live.name, records=len(parents)):
                count += live.replay(records[part])
        return count

    def publish(self) -> None:
        """Publish every held model that changed (the publisher thread; a model handed
        over or let go meanwhile is skipped, a fenced write reported as a lost lease)."""
        for name, value in self.held_leases().items():
            if split_share(name) is not None:  # (its owner publishes the merged model)
                continue
            try:
                live = self.models.get(name)
                with self.models.use(name):
                    meta = self.models.writer.publish(live)
            except (NotFound, IncarnationGone):  # deleted here or elsewhere meanwhile
                self._next_placement = 0.0
                continue
            except LeaseLost:
                self.lost(name, value)  # (the learning thread lets it go)
                continue
            if meta is not None:
                self.store.publish(name, meta.version)
                self.metrics.published.labels(name).inc()


class Replica(_Loop):
    """Loads published versions: on announcement (pub/sub) or by polling."""

    def __init__(self, worker, settings):
        super().__init__("replica")
        self.worker = worker
        self.client = worker.store.client
        self.settings = settings
        self.period = settings.poll_interval
        self._pubsub = None
        self._next_poll = 0.0

    def step(self) -> None:
        if self._pubsub is None:
            self._pubsub = self.worker.store.client.pubsub(ignore_subscribe_messages=True)
            self._pubsub.subscribe(self.worker.store.keys.published)
            self._next_poll = 0.0  # (re)subscribed: poll once for what may have been missed
        try:
            message = self._pubsub.get_message(timeout=0.2)
        except (redis.ConnectionError, redis.TimeoutError):
            self._pubsub = None
            raise
        if message is not None and message["type"] == "message":
            name, version = message["data"].decode().rsplit(" ", 1)
            self.catch_up(name, int(version))
        if time.monotonic() >= self._next_poll:
            self.poll()
            self._next_poll = time.monotonic() + self.period

    def poll(self) -> None:
        self.worker.models.discover()
        for live in self.worker.models.serving():
            self.catch_up(live.name)

    def catch_up(self, name: str, announced: int | None = None) -> None:
        """Serve the model's latest published version: by the deltas after the version
        served, else (a missed or refused delta, no chain yet) from the latest full
        snapshot and the deltas after it (``service.scale.deltas``)."""
        try:
            live = self.worker.models.get(name)
        except NotFound:
            self.worker.models.discover()
            return
        if announced is not None and announced <= live.version:
            return
        store = self.worker.store
        head = store.head(name)
        if head is None or head <= live.version:
            return
        if isinstance(live.record.publication, deltas.RowDigest):
            self._apply_deltas(live)
            if live.version >= head:
                return
            self.worker.metrics.version_loads.labels("missed").inc()
        header, state = decode(store.load(name))
        digest = None
        if "digest" in header:
            axes = deltas.local_axes(live.estimator, live.n_features)
            digest = deltas.RowDigest(axes)
            if digest.reset(state["arrays"]) != int(header["digest"]):
                raise SnapshotError(f"snapshot {header['version']} of {name}: digest mismatch")
        if header["version"] < live.version:
            # the deltas from that snapshot on would take the model back first: wait for
            # the next full snapshot (at most full_snapshot_every publications away)
            live.record.break_chain()
            return
        if header["version"] > live.version:
            first_new = self._first_new(live, header)
            live.load_version(state, header["version"], header.get("log_position"))
            self._served(live, first_new, "full")
        if digest is None:
            live.record.break_chain()
        else:  # (the same version: the state served is this one)
            live.record.start_chain(digest)
        if digest is not None:
            self._apply_deltas(live)

    def _apply_deltas(self, live) -> None:
        """Apply the kept deltas after the served version, in order, while they chain on."""
        store, digest = self.worker.store, live.record.publication
        for version in store.deltas_after(live.name, live.version):
            try:
                header, state = decode(store.load_delta(live.name, version))
            except SnapshotError:  # pruned meanwhile
                return
            delta = header["delta"]
            if delta["base"] != live.version:
                return
            arrays = state["arrays"]
            total, updates = digest.preview(arrays)
            if total != int(delta["digest"]):
                log.warning("delta %d of %s: digest mismatch", version, live.name)
                return
            first_new = self._first_new(live, header)
            live.load_delta(
                lambda estimator, arrays=arrays: deltas.apply(estimator, digest.axes, arrays),
                {**state, "arrays": {}},
                header["version"],
                header.get("log_position"),
            )
            digest.commit(total, updates)
            self._served(live, first_new, "delta")

    def _served(self, live, first_new, kind: str) -> None:
        metrics = self.worker.metrics
        metrics.published.labels(live.name).inc()
        metrics.version_loads.labels(kind).inc()
        metrics.model_version.labels(live.name).set(live.version)
        appended = position_time(first_new) if first_new is not None else None
        if appended is not None:
            metrics.freshness.labels(live.name).observe(max(0.0, time.time() - appended))

    def _first_new(self, live, header: dict):
        """The oldest log record a published version adds to the one served: named in its
        header when it was published right after that one, else looked up in the log (an
        underestimate when a snapshot trimmed the log past it)."""
        if header.get("previous") == live.version and header.get("first_new") is not None:
            return header["first_new"]
        return self._first_after(live.name, live.record.log_position, header.get("log_position"))

    def _first_after(self, name: str, previous, position):
        """The id of the oldest log record kept after ``previous`` up to ``position``."""
        if position is None or not after(position, previous):
            return None
        start = "-" if previous is None else f"({previous}"
        entries = self.worker.store.client.xrange(
            self.worker.models.feedback_log.key(name), min=start, max=position, count=1
        )
        return entries[0][0].decode() if entries else position
