"""The Redis key layout, in one place (prefix ``lorentztron`` by default)::

    {prefix}:models                           set of model names with snapshots
    {prefix}:tombstones                       set of model names being deleted
    {prefix}:learners                         sorted set: learner id, its heartbeat deadline (ms)
    {prefix}:published                        pub/sub channel: "<model> <version>"
    {prefix}:model:{<name>}:snapshot:{v}      the blob of version v (a string up to 1 MB,
                                              else a list of its parts: redis_store)
    {prefix}:model:{<name>}:versions          sorted set: member v, score v
    {prefix}:model:{<name>}:latest            the latest version, as a decimal string
    {prefix}:model:{<name>}:delta:{v}         the delta of published version v (scale.deltas)
    {prefix}:model:{<name>}:deltas            sorted set: member v, score v
    {prefix}:model:{<name>}:head              the latest published version (snapshot or delta)
    {prefix}:model:{<name>}:upload:{id}       a blob being written (expires; renamed on commit)
    {prefix}:model:{<name>}:incarnation       the id of the model's current incarnation
    {prefix}:model:{<name>}:deleted           set: ids of its deleted incarnations
    {prefix}:model:{<name>}:log               stream: the feedback log
    {prefix}:model:{<name>}:idempotency:{incarnation}:{key}
                                              the answer to a keyed feedback request logged
                                              by a process that does not learn (expires)
    {prefix}:model:{<name>}:lease             "<learner> <token>": the learner that owns the
                                              model (expires unless renewed)
    {prefix}:model:{<name>}:fence             the last fencing token issued (INCR)
    {prefix}:model:{<name>}:owner             hash: learner, token, deadline (ms) of the last
                                              lease, kept after it expires (takeover time)
    {prefix}:model:{<name>}:writes            stream: the fenced writes (lease, version)
    {prefix}:model:{<name>}:barrier           written by a learner before it learns records,
                                              then WAIT (``RedisLog.replicated``; expires)
    {prefix}:model:{<name>}:parallel          "<learners> <interval>" of a parallel model
    {prefix}:model:{<name>/<i>}:lease, :fence, :owner
                                              the lease of a parallel model's share i
                                              (``service.scale.parallel``), as a model's
    {prefix}:model:{<name>/<i>}:round         hash: share i's last round (meta, aligned
                                              vectors, the last share's state)
    {prefix}:model:{<name>/<i>}:progress      share i's learner and log position

Every key of one model carries the hash tag ``{<name>}`` (model names hold no braces), so
that in a Redis Cluster a model's stream, snapshots, incarnation and lease live in one slot:
the scripts that check and write several of them at once (``service.durability.redis_store``,
``service.durability.redis_log``, ``service.scale.leases``) run on one node. The few
global keys (the sets of names, the learners) are only ever read or written one key per command.

A model's incarnation changes when it is created (again): writes of a deleted or replaced
incarnation (a snapshot, a log append by a process that has not yet seen the deletion) are
refused. A missing incarnation key that no deletion explains (Redis lost its data) is
written again by the incarnation that writes.
"""

from __future__ import annotations


class RedisKeys:
    def __init__(self, prefix: str = "lorentztron"):
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"the Redis prefix {prefix!r} must not hold braces (hash tags)")
        self.prefix = prefix

    @property
    def models(self) -> str:
        return f"{self.prefix}:models"

    @property
    def tombstones(self) -> str:
        return f"{self.prefix}:tombstones"

    @property
    def learners(self) -> str:
        return f"{self.prefix}:learners"

    @property
    def published(self) -> str:
        return f"{self.prefix}:published"

    def model(self, name: str, *parts) -> str:
        return ":".join([self.prefix, "model", "{" + name + "}", *map(str, parts)])

    def snapshot(self, name: str, version: int) -> str:
        return self.model(name, "snapshot", version)

    def delta(self, name: str, version: int) -> str:
        return self.model(name, "delta", version)

    def deltas(self, name: str) -> str:
        return self.model(name, "deltas")

    def head(self, name: str) -> str:
        return self.model(name, "head")

    def upload(self, name: str, upload_id: str) -> str:
        return self.model(name, "upload", upload_id)

    def versions(self, name: str) -> str:
        return self.model(name, "versions")

    def latest(self, name: str) -> str:
        return self.model(name, "latest")

    def incarnation(self, name: str) -> str:
        return self.model(name, "incarnation")

    def deleted(self, name: str) -> str:
        return self.model(name, "deleted")

    def log(self, name: str) -> str:
        return self.model(name, "log")

    def lease(self, name: str) -> str:
        return self.model(name, "lease")

    def fence(self, name: str) -> str:
        return self.model(name, "fence")

    def owner(self, name: str) -> str:
        return self.model(name, "owner")

    def writes(self, name: str) -> str:
        return self.model(name, "writes")

    def barrier(self, name: str) -> str:
        return self.model(name, "barrier")

    def parallel(self, name: str) -> str:
        return self.model(name, "parallel")

    @staticmethod
    def share(name: str, share: int) -> str:
        """The name a parallel model's share is leased under (names hold no ``/``)."""
        return f"{name}/{share}"

    @staticmethod
    def split_share(unit: str) -> tuple[str, int] | None:
        """``(model, share)`` of a share's name (``share``), None for a model's."""
        name, slash, share = unit.rpartition("/")
        return (name, int(share)) if slash else None

    def idempotency(self, name: str, incarnation: str, key: str) -> str:
        return self.model(name, "idempotency", incarnation, key)
