"""The Redis log (when ``LORENTZTRON_REDIS_URL`` is set; the record format and
``FeedbackLog``: ``service.durability.feedback_log``): one stream per model,
``{prefix}:model:{<name>}:log``, one entry per record (field ``r``), appended with ``XADD``;
positions are stream ids (``"<ms>-<seq>"``), whose time part also dates the entry. ``trim``
is ``XTRIM MINID``: entries newer than the latest snapshot are never trimmed. Durability is
Redis's: run it with ``appendonly yes`` and ``appendfsync always`` for the promise to hold
across a Redis crash (``everysec`` may lose the last second). With replicas (a Redis
Cluster's, or one server's), ``wait_replicas`` = n makes every append wait (``WAIT``) until n
replicas have it before it is acknowledged: a replica promoted after its master is lost
then holds every acknowledged record (an append that n replicas did not confirm in time is
refused, maybe written), and a learner learns a record only once n replicas have it
(``replicated``), so no model holds a record that a promotion took out of its log. A
learner's trim is fenced by its lease (``service.scale.leases``).

While tracing is on (``service.ops.tracing``) an entry also has the field ``t``: the W3C
``traceparent`` of the request that logged it, to which the learner links its span. An
entry without it (tracing off, or an older entry) is read the same way: ``r`` is the record.
"""

from __future__ import annotations

from collections.abc import Iterator

from service.durability.feedback_log import LogUnavailable, ModelGone
from service.ops import failpoints
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost
from service.scale.redis_client import refresh_topology

#: KEYS: the model's incarnation key, its stream, its deleted incarnations; ARGV: the
#: incarnation, then the records (service.scale.keys: a missing key no deletion explains is set)
_CURRENT = """
local current = redis.call('GET', KEYS[1])
if current == false then
  if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return 'GONE' end
  redis.call('SET', KEYS[1], ARGV[1])
elseif current ~= ARGV[1] then
  return 'GONE'
end
"""
_APPEND = (
    _CURRENT
    + """
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[i]) end
return ids
"""
)
#: ``_APPEND`` with a traceparent after each record (ARGV: the incarnation, then record,
#: traceparent pairs; an empty traceparent: none)
_APPEND_TRACED = (
    _CURRENT
    + """
local ids = {}
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    ids[#ids + 1] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[i])
  else
    ids[#ids + 1] = redis.call('XADD', KEYS[2], '*', 'r', ARGV[i], 't', ARGV[i + 1])
  end
end
return ids
"""
)
#: the same checks, KEYS[4] the key's answer; ARGV: the incarnation, the record, the answer,
#: its lifetime in ms (and a traceparent, when traced). Appends unless the key has an
#: answer: {"NEW", id} or {"DONE", answer}
_APPEND_ONCE = (
    _CURRENT
    + """
local stored = redis.call('GET', KEYS[4])
if stored then return {'DONE', stored} end
local id
if ARGV[5] then
  id = redis.call('XADD', KEYS[2], '*', 'r', ARGV[2], 't', ARGV[5])
else
  id = redis.call('XADD', KEYS[2], '*', 'r', ARGV[2])
end
redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
return {'NEW', id}
"""
)

#: KEYS: the stream, the model's lease; ARGV: the lease value ('' unfenced), the position
_TRIM = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 'FENCED' end
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
return 'OK'
"""


class RedisLog:
    """A Redis stream per model (module docstring), on one server or a Redis Cluster.
    Short timeouts: an outage fails the request fast (503) instead of holding the model's
    writer."""

    def __init__(
        self,
        client,
        prefix: str = "lorentztron",
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ):
        self.client = client
        self.keys = RedisKeys(prefix)
        #: an entry is as durable as Redis makes it when XADD answers
        self.syncs = False
        #: an entry carries its request's traceparent (field ``t``) when given one
        self.carries_traces = True
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, int(wait_timeout * 1000))
        self._append_script = client.register_script(_APPEND)
        self._append_traced_script = client.register_script(_APPEND_TRACED)
        self._append_once_script = client.register_script(_APPEND_ONCE)
        self._trim_script = client.register_script(_TRIM)

    def key(self, model: str) -> str:
        return self.keys.log(model)

    def append_many(
        self,
        model: str,
        records: list[bytes],
        incarnation: str | None = None,
        traces: list[str | None] | None = None,
    ) -> list[str]:
        """Append records in order in one round trip, which Redis makes durable together
        (``appendfsync always`` fsyncs once per event-loop turn). With an ``incarnation``,
        only while it is the model's current one (a script: check and ``XADD``s are one
        atomic step; ``service.scale.keys``); else ModelGone and nothing is written. With
        ``wait_replicas``, acknowledged once that many replicas have them. ``traces``: a
        W3C traceparent (or None) per record, kept in its entry (module docstring)."""
        try:
            if incarnation is not None:
                keys = [self.keys.incarnation(model), self.key(model), self.keys.deleted(model)]
                script, args = self._append_script, [incarnation, *records]
                if traces is not None:
                    script, args = self._append_traced_script, [incarnation]
                    for record, trace in zip(records, traces, strict=True):
                        args += (record, trace or "")
                if self.wait_replicas:
                    ids = self._append_waiting(keys, args, script)
                else:
                    ids = script(keys=keys, args=args)
                failpoints.reach("redis_log.appended")
                if ids == b"GONE":
                    raise ModelGone(f"model {model!r} was deleted (or replaced) elsewhere")
                return [entry_id.decode() for entry_id in ids]
            entries = [{b"r": record} for record in records]
            for entry, trace in zip(entries, traces or (), strict=False):
                if trace:
                    entry[b"t"] = trace
            if len(records) == 1 and not self.wait_replicas:
                return [self.client.xadd(self.key(model), entries[0]).decode()]
            pipe = self._node(self.key(model)).pipeline(transaction=False)
            for entry in entries:
                pipe.xadd(self.key(model), entry)
            if self.wait_replicas:
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
            replies = pipe.execute()
            if self.wait_replicas:
                self._check_replicas(replies.pop())
            return [entry_id.decode() for entry_id in replies]
        except ModelGone:
            raise
        except Exception as error:  # connection, timeout, out of memory, read-only replica
            refresh_topology(self.client)
            # some or all of them may have landed (a lost reply, a partial pipeline)
            raise LogUnavailable(
                f"the feedback log could not be written: {error}", maybe_written=True
            ) from None

    def try_append(self, model: str, records: list[bytes]) -> None:
        """None: an append is a round trip to Redis, never done without waiting."""
        return None

    def append_once(
        self,
        model: str,
        record: bytes,
        incarnation: str,
        key: str,
        answer: bytes,
        ttl: float,
        trace: str | None = None,
    ) -> tuple[str | None, bytes | None]:
        """Append a keyed record and keep its ``answer`` for ``ttl`` seconds, in one atomic
        step, unless the key has an answer already: (position, None) or (None, the stored
        answer). For the processes that only log (``service.durability.idempotency``).
        ``trace``: the request's traceparent, kept in the entry."""
        keys = [
            self.keys.incarnation(model),
            self.key(model),
            self.keys.deleted(model),
            self.keys.idempotency(model, incarnation, key),
        ]
        args = [incarnation, record, answer, max(1, int(ttl * 1000))]
        if trace:
            args.append(trace)
        try:
            if self.wait_replicas:
                pipe = self._node(keys[1]).pipeline(transaction=False)
                self._append_once_script(keys=keys, args=args, client=pipe)
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
                reply, replicas = pipe.execute()
                if reply != b"GONE":
                    self._check_replicas(replicas)
            else:
                reply = self._append_once_script(keys=keys, args=args)
            failpoints.reach("redis_log.appended")
            failpoints.reach("redis_log.keyed_appended")
        except LogUnavailable:
            raise
        except Exception as error:
            raise LogUnavailable(
                f"the feedback log could not be written: {error}", maybe_written=True
            ) from None
        if reply == b"GONE":
            raise ModelGone(f"model {model!r} was deleted (or replaced) elsewhere")
        status, value = reply
        return (value.decode(), None) if status == b"NEW" else (None, value)

    def answered(self, model: str, incarnation: str, key: str) -> bytes | None:
        """The answer kept for a key by ``append_once`` (None: none)."""
        try:
            return self.client.get(self.keys.idempotency(model, incarnation, key))
        except Exception as error:
            raise LogUnavailable(f"the feedback log could not be read: {error}") from None

    def _append_waiting(self, keys: list[str], args: list, script) -> object:
        """An append ``script`` then ``WAIT``, on one connection to the stream's master
        (WAIT counts the replicas that have this connection's writes)."""
        pipe = self._node(keys[1]).pipeline(transaction=False)
        script(keys=keys, args=args, client=pipe)
        pipe.wait(self.wait_replicas, self.wait_timeout_ms)
        ids, replicas = pipe.execute()
        if ids != b"GONE":
            self._check_replicas(replicas)
        return ids

    def _check_replicas(self, replicas: int) -> None:
        if replicas < self.wait_replicas:
            raise LogUnavailable(
                f"{replicas} of {self.wait_replicas} replicas confirmed the append in time",
                maybe_written=True,
            )

    def _node(self, key: str):
        """The client of the server that holds ``key`` (a cluster's master for its slot)."""
        get_node = getattr(self.client, "get_node_from_key", None)
        if get_node is None:
            return self.client
        return self.client.get_redis_connection(get_node(key))

    def read_after(
        self, model: str, position: str | None, chunk: int = 1000
    ) -> Iterator[tuple[str, bytes]]:
        start = "-" if position is None else f"({position}"
        while True:
            try:
                entries = self.client.xrange(self.key(model), min=start, count=chunk)
            except Exception as error:
                raise LogUnavailable(f"the feedback log could not be read: {error}") from None
            for entry_id, fields in entries:
                yield entry_id.decode(), fields[b"r"]
            if len(entries) < chunk:
                return
            start = f"({entries[-1][0].decode()}"

    def sync(self, model: str, position: str) -> None:
        """Nothing to do: an entry is as durable as Redis makes it when XADD answers."""

    def replicated(self, model: str) -> bool:
        """Whether the replicas have every record the model's log held before this call
        (True at once without ``wait_replicas``). Replication keeps the master's order: a
        write in the model's slot, then ``WAIT`` on that connection, for ``wait_replicas``
        of the master's connected replicas (or all of them if fewer: a master without a
        replica has none to promote in its place). A learner learns only such records: a
        record its master loses with a replica's promotion (an append not acknowledged, its
        ``WAIT`` unanswered) would otherwise be in a model but no longer in its log."""
        if not self.wait_replicas:
            return True
        key = self.keys.barrier(model)
        node = self._node(key)
        connected = int(node.info("replication").get("connected_slaves", 0))
        wanted = min(self.wait_replicas, connected)
        if wanted == 0:
            return True
        pipe = node.pipeline(transaction=False)
        pipe.set(key, b"1", px=60_000)
        pipe.wait(wanted, self.wait_timeout_ms)
        _, replicas = pipe.execute()
        return replicas >= wanted

    def trim(self, model: str, position: str | None, fence: str | None = None) -> None:
        """Drop the entries before ``position`` (MINID keeps ``position`` itself and every
        newer one); with a ``fence`` (a lease value), only while that lease holds."""
        if position is None:
            return
        reply = self._trim_script(
            keys=[self.key(model), self.keys.lease(model)], args=[fence or "", position]
        )
        if reply in (b"FENCED", "FENCED"):
            raise LeaseLost(f"the lease on model {model!r} was lost: trim refused")

    def delete(self, model: str) -> None:
        self.client.delete(self.key(model))

    def length(self, model: str) -> int:
        return int(self.client.xlen(self.key(model)))

    def ping(self) -> None:
        self.client.ping()

    def close(self) -> None:
        pass
