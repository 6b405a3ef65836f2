"""Snapshots in Redis (the format: ``service.durability.store``); the key layout is
``service.scale.keys``.

A snapshot's blob is uploaded under a key of its own (a string up to ``UPLOAD_CHUNK``
bytes, else a list of ``PART``-byte parts: ``_blob_parts``), then one script renames it into
place, adds it to ``versions``, moves the ``latest`` pointer and prunes old versions, after
checking the model's incarnation (the write of a model deleted, or deleted and created
again, meanwhile by any process is refused) and, for a learner's write, its lease
(``service.scale.leases``: a learner that lost the model cannot write it). Scripts over one
model's keys work on a Redis Cluster too. A deletion's tombstone is a member of
``{prefix}:tombstones``.
"""

from __future__ import annotations

import time
import uuid

from service.durability.store import (
    PREFIX,
    IncarnationGone,
    SnapshotError,
    SnapshotMeta,
    header_length,
    read_header,
)
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost
from service.scale.redis_client import redis_client

#: KEYS: incarnation, deleted, the index (versions or deltas), its pointer (latest or head),
#: the uploaded blob, its key, the lease, the writes stream, then the keys of older entries
#: of the index it may prune; ARGV: incarnation ('' unchecked), create (1/0), version,
#: retention, lease value ('' unfenced). Checks the lease (``service.scale.leases``) and the
#: incarnation (``service.scale.keys``), then renames the upload into place, indexes it, moves
#: the pointer to the newest entry and prunes all but the newest ``retention`` (the entry
#: written too, when a write finishes after ``retention`` newer ones).
_SAVE = """
if ARGV[5] ~= '' and redis.call('GET', KEYS[7]) ~= ARGV[5] then return 'FENCED' end
local adopt = ARGV[2] == '1'
if ARGV[1] ~= '' and not adopt then
  local current = redis.call('GET', KEYS[1])
  if current == false then
    if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 'GONE' end
    adopt = true
  elseif current ~= ARGV[1] then
    return 'GONE'
  end
end
if redis.call('EXISTS', KEYS[5]) == 0 then return 'EXPIRED' end
redis.call('RENAME', KEYS[5], KEYS[6])
redis.call('PERSIST', KEYS[6])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[3])
if adopt and ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1]) end
local keep = tonumber(ARGV[4])
local newest = redis.call('ZREVRANGE', KEYS[3], 0, 0)
redis.call('SET', KEYS[4], newest[1])
local old = {}
for _, v in ipairs(redis.call('ZRANGE', KEYS[3], 0, -(keep + 1))) do old[v] = true end
for i = 9, #KEYS do
  local v = string.match(KEYS[i], ':(%d+)$')
  if old[v] then
    redis.call('UNLINK', KEYS[i])
    redis.call('ZREM', KEYS[3], v)
  end
end
if old[ARGV[3]] then
  redis.call('UNLINK', KEYS[6])
  redis.call('ZREM', KEYS[3], ARGV[3])
end
if ARGV[5] ~= '' then
  redis.call('XADD', KEYS[8], 'MAXLEN', '~', '1000', '*', 'lease', ARGV[5], 'version', ARGV[3])
end
return 'OK'
"""

#: KEYS: incarnation, deleted, versions, latest, lease, deltas, head, owner, writes, then
#: every snapshot and delta key of the versions read before; ARGV: the snapshot and delta
#: key prefixes. Deletes the model's snapshots, deltas and lease (its incarnation joins the
#: deleted ones; the fencing counter stays, so that tokens never go back); 'RETRY' if an
#: entry was added meanwhile (its key was not declared).
_DELETE = """
local declared = {}
for i = 10, #KEYS do declared[KEYS[i]] = true end
for _, v in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if not declared[ARGV[1] .. v] then return 'RETRY' end
end
for _, v in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
  if not declared[ARGV[2] .. v] then return 'RETRY' end
end
local incarnation = redis.call('GET', KEYS[1])
if incarnation then redis.call('SADD', KEYS[2], incarnation) end
for i = 10, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
return 'OK'
"""

#: KEYS: a model's old ``latest`` and new ``latest``, then pairs (old key, new key). Moves a
#: model's keys from the layout before hash tags, once (nothing if it has new keys).
_UPGRADE = """
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 3, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], KEYS[i + 1]) end
end
redis.call('RENAME', KEYS[1], KEYS[2])
return 1
"""

#: an upload not committed within this many milliseconds is dropped by Redis
UPLOAD_TTL_MS = 10 * 60 * 1000
#: a blob is written and read this many bytes per command: Redis runs one command at a
#: time, and one SET or GET of a 134 MB snapshot held every feedback append behind it for
#: its whole transfer (a GET of 134 MB: 0.1 s inside Redis)
UPLOAD_CHUNK = 1 << 20
#: a larger blob is a list of parts of this many bytes (``_blob_parts``)
PART = 1 << 18


def _blob_parts(blob: memoryview) -> list[memoryview]:
    """A blob larger than ``UPLOAD_CHUNK`` is kept as a list of ``PART``-byte parts, not as
    one string: a string can only grow by copies (APPENDs copy it again and again; made at
    its final size, a SETRANGE zero-fills 134 MB: 0.1 to 0.45 s inside Redis, every feedback
    append waiting), and its deletion frees it at once inside Redis (0.01 to 0.08 s for
    134 MB, even by UNLINK: a string is one allocation), while a list of more than 64 parts
    is freed by UNLINK in a background thread. Measured on Redis 7.0."""
    return [blob[start : start + PART] for start in range(0, len(blob), PART)]


def read_blob(client, key: str) -> bytes | None:
    """A blob as ``RedisStore`` keeps it, ``UPLOAD_CHUNK`` bytes per command (None: no such
    key, or deleted while it was read)."""
    kind = client.type(key)
    if kind == b"list":
        count, per = client.llen(key), max(1, UPLOAD_CHUNK // PART)
        parts = []
        for start in range(0, count, per):
            parts += client.lrange(key, start, start + per - 1)
        return b"".join(parts) if parts and len(parts) == count else None
    if kind == b"string":  # (a small blob, or one written before lists)
        size = client.strlen(key)
        blob = b"".join(
            client.getrange(key, start, start + UPLOAD_CHUNK - 1)
            for start in range(0, size, UPLOAD_CHUNK)
        )
        return blob if len(blob) == size else None
    return None


class RedisStore:
    """Snapshots in Redis (``service.scale.keys``), on one server or a Redis Cluster: every write
    that touches several keys is a script over one model's keys (one hash slot). One
    client, closed on shutdown."""

    def __init__(
        self,
        url: str,
        prefix: str = "lorentztron",
        timeout: float = 2.0,
        cluster: bool = False,
    ):
        self.prefix = prefix
        self.keys = RedisKeys(prefix)
        self.cluster = cluster
        self.client = redis_client(url, cluster, timeout)
        self._save = self.client.register_script(_SAVE)
        self._delete = self.client.register_script(_DELETE)
        self._upgrade = self.client.register_script(_UPGRADE)

    def upgrade(self) -> list[str]:
        """Move the keys of the models written before the keys had hash tags
        (``{prefix}:model:<name>:...``) to their names now (start-up; one server only: a
        cluster never held them). The models moved."""
        if self.cluster:
            return []
        moved = []
        names = self.client.smembers(self.keys.models) | self.client.smembers(self.keys.tombstones)
        for name in sorted(n.decode() for n in names):
            old = f"{self.prefix}:model:{name}"
            versions = [int(v) for v in self.client.zrange(f"{old}:versions", 0, -1)]
            pairs = [
                (f"{old}:{part}", self.keys.model(name, part))
                for part in ("versions", "incarnation", "deleted", "log")
            ]
            pairs += [(f"{old}:snapshot:{v}", self.keys.snapshot(name, v)) for v in versions]
            keys = [f"{old}:latest", self.keys.latest(name)]
            for pair in pairs:
                keys += pair
            if self._upgrade(keys=keys):
                moved.append(name)
        return moved

    def save(
        self,
        model: str,
        version: int,
        blob: bytes | memoryview,
        retention: int,
        incarnation: str | None = None,
        create: bool = False,
        fence: str | None = None,
        rate: float | None = None,
    ) -> None:
        """Write a snapshot: the blob is uploaded under a key of its own, then one script
        checks and commits it (``_SAVE``). With an ``incarnation``: ``create`` makes it the
        model's current one; otherwise the write is refused (IncarnationGone) unless it
        still is. With a ``fence`` (a lease value, ``service.scale.leases``): refused (LeaseLost)
        unless that lease still holds. With a ``rate`` (bytes/s), the upload takes at least
        the blob's size over it (``_upload``)."""
        keys = self.keys
        self._commit(
            model,
            (keys.versions(model), keys.latest(model), lambda v: keys.snapshot(model, v)),
            version,
            blob,
            retention,
            incarnation,
            create,
            fence,
            rate,
        )
        # the set of names is a key of its own (another slot): joined after the commit
        self.client.sadd(keys.models, model)

    def save_delta(
        self,
        model: str,
        version: int,
        blob: bytes | memoryview,
        retention: int,
        incarnation: str | None = None,
        fence: str | None = None,
    ) -> None:
        """Write the delta of a published version (``service.scale.deltas``), checked like a
        snapshot; the newest ``retention`` deltas are kept."""
        keys = self.keys
        index = (keys.deltas(model), keys.head(model), lambda v: keys.delta(model, v))
        self._commit(model, index, version, blob, retention, incarnation, False, fence)

    def _commit(
        self, model, index, version, blob, retention, incarnation, create, fence, rate=None
    ):
        """Upload a blob, then commit it into ``index`` = (sorted set, pointer, key of a
        version) with ``_SAVE``."""
        keys = self.keys
        entries, pointer, key_of = index
        upload = keys.upload(model, uuid.uuid4().hex)
        self._upload(upload, memoryview(blob).cast("B"), rate)
        old = [int(v) for v in self.client.zrange(entries, 0, -1)]
        reply = self._save(
            keys=[
                keys.incarnation(model),
                keys.deleted(model),
                entries,
                pointer,
                upload,
                key_of(version),
                keys.lease(model),
                keys.writes(model),
                *(key_of(v) for v in old if v != version),
            ],
            args=[incarnation or "", int(create), version, retention, fence or ""],
        )
        reply = reply.decode() if isinstance(reply, bytes) else reply
        if reply != "OK":
            self.client.unlink(upload)
            if reply == "FENCED":
                raise LeaseLost(f"the lease on model {model!r} was lost: write refused")
            if reply == "GONE":
                raise IncarnationGone(f"model {model!r} was deleted or replaced meanwhile")
            raise SnapshotError(f"the upload of version {version} of {model!r} expired")

    def _upload(self, key: str, view: memoryview, rate: float | None) -> None:
        """Write a blob under ``key`` (expiring in ``UPLOAD_TTL_MS``), ``UPLOAD_CHUNK`` bytes
        per command; with a ``rate`` (bytes/s), a pause after each command keeps the upload
        at that rate: Redis, which every feedback append waits for, then takes a large
        blob a little at a time instead of in one burst of its CPU and append-only file."""
        if len(view) <= UPLOAD_CHUNK:
            self.client.set(key, view, px=UPLOAD_TTL_MS)
            return
        parts, per = _blob_parts(view), max(1, UPLOAD_CHUNK // PART)
        started, sent = time.monotonic(), 0
        for start in range(0, len(parts), per):
            chunk = parts[start : start + per]
            self.client.rpush(key, *chunk)
            if start == 0:
                self.client.pexpire(key, UPLOAD_TTL_MS)
            sent += sum(len(part) for part in chunk)
            if rate and start + per < len(parts):
                time.sleep(max(0.0, started + sent / rate - time.monotonic()))

    def load(self, model: str, version: int | None = None) -> bytes:
        if version is None:
            latest = self.client.get(self.keys.latest(model))
            if latest is None:
                raise SnapshotError(f"no snapshot of {model!r}")
            version = int(latest)
        blob = read_blob(self.client, self.keys.snapshot(model, version))
        if blob is None:
            raise SnapshotError(f"no snapshot {version} of {model!r}")
        return blob

    def _head(self, key: str) -> tuple[dict, int] | None:
        """The header of a blob and its length, reading only the parts of the header (None:
        no such key)."""
        client = self.client
        kind = client.type(key)
        if kind == b"list":
            count, first, last = client.llen(key), client.lindex(key, 0), client.lindex(key, -1)
            if first is None or last is None:
                return None
            size = (count - 1) * len(first) + len(last)

            def read(end: int) -> bytes:
                return b"".join(client.lrange(key, 0, (end - 1) // len(first)))[:end]
        elif kind == b"string":
            size = client.strlen(key)

            def read(end: int) -> bytes:
                return client.getrange(key, 0, end - 1)
        else:
            return None
        end = PREFIX + header_length(read(min(PREFIX, size)))
        return read_header(read(min(end, size))), size

    def latest(self, model: str) -> int | None:
        """The latest snapshot's version (one GET), None without snapshots."""
        latest = self.client.get(self.keys.latest(model))
        return None if latest is None else int(latest)

    def head(self, model: str) -> int | None:
        """The latest published version, snapshot or delta (None: none)."""
        values = self.client.mget(self.keys.latest(model), self.keys.head(model))
        found = [int(v) for v in values if v is not None]
        return max(found) if found else None

    def deltas_after(self, model: str, version: int) -> list[int]:
        """The versions of the deltas kept after ``version``, oldest first."""
        members = self.client.zrangebyscore(self.keys.deltas(model), f"({version}", "+inf")
        return [int(v) for v in members]

    def load_delta(self, model: str, version: int) -> bytes:
        blob = read_blob(self.client, self.keys.delta(model, version))
        if blob is None:
            raise SnapshotError(f"no delta {version} of {model!r}")
        return blob

    def publish(self, model: str, version: int) -> None:
        """Tell api replicas that a version was published (``{prefix}:published``)."""
        self.client.publish(self.keys.published, f"{model} {version}")

    def versions(self, model: str) -> list[SnapshotMeta]:
        metas = []
        for v in self.client.zrange(self.keys.versions(model), 0, -1):
            found = self._head(self.keys.snapshot(model, int(v)))
            if found is not None:
                header, size = found
                metas.append(SnapshotMeta(model, int(v), header["created_at"], size))
        return metas

    def models(self) -> list[str]:
        names = self.client.smembers(self.keys.models)
        return sorted(m.decode() for m in names - self.client.smembers(self.keys.tombstones))

    def incarnation(self, model: str) -> str | None:
        """The model's current incarnation (None: none recorded)."""
        value = self.client.get(self.keys.incarnation(model))
        return None if value is None else value.decode()

    def adopt(self, model: str, incarnation: str) -> str:
        """The model's incarnation, recorded as ``incarnation`` if none was (snapshots of
        earlier versions of the service)."""
        self.client.set(self.keys.incarnation(model), incarnation, nx=True)
        return self.incarnation(model) or incarnation

    def delete(self, model: str) -> None:
        """Delete the model's snapshots and lease; its incarnation joins the deleted ones
        (whose later writes are refused)."""
        keys = self.keys
        shares = self.parallel([model]).get(model, 0)
        for _ in range(100):
            versions = [int(v) for v in self.client.zrange(keys.versions(model), 0, -1)]
            deltas = [int(v) for v in self.client.zrange(keys.deltas(model), 0, -1)]
            reply = self._delete(
                keys=[
                    keys.incarnation(model),
                    keys.deleted(model),
                    keys.versions(model),
                    keys.latest(model),
                    keys.lease(model),
                    keys.deltas(model),
                    keys.head(model),
                    keys.owner(model),
                    keys.writes(model),
                    *(keys.snapshot(model, v) for v in versions),
                    *(keys.delta(model, v) for v in deltas),
                    keys.barrier(model),
                    keys.parallel(model),
                ],
                args=[keys.snapshot(model, ""), keys.delta(model, "")],
            )
            if reply in (b"OK", "OK"):
                self.client.srem(keys.models, model)
                for share in range(shares):  # (each share's keys in a slot of its own)
                    unit = keys.share(model, share)
                    parts = ("lease", "owner", "round", "progress")
                    self.client.delete(*(keys.model(unit, part) for part in parts))
                return
        raise SnapshotError(f"the snapshots of {model!r} kept changing during its deletion")

    def set_parallel(self, model: str, learners: int, interval: int) -> None:
        """Declare a parallel model's shares (``service.scale.parallel``), before its first
        snapshot: the learners place them from ``parallel``."""
        self.client.set(self.keys.parallel(model), f"{learners} {interval}")

    def parallel(self, models: list[str]) -> dict[str, int]:
        """The number of shares of each parallel model among ``models``."""
        if not models:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for model in models:
            pipe.get(self.keys.parallel(model))
        return {
            model: int(value.split()[0])
            for model, value in zip(models, pipe.execute(), strict=True)
            if value is not None
        }

    def mark_deleting(self, model: str) -> None:
        self.client.sadd(self.keys.tombstones, model)

    def deleting(self) -> list[str]:
        return sorted(m.decode() for m in self.client.smembers(self.keys.tombstones))

    def clear_deleting(self, model: str) -> None:
        self.client.srem(self.keys.tombstones, model)

    def ping(self) -> None:
        self.client.ping()

    def close(self) -> None:
        self.client.close()
