"""The Redis key layout, in one place (prefix ``lorentztron`` by default)::

    {prefix}:models                         set of model names with snapshots
    {prefix}:tombstones                     set of model names being deleted
    {prefix}:model:{name}:snapshot:{v}      the blob of version v
    {prefix}:model:{name}:versions          sorted set: member v, score v
    {prefix}:model:{name}:latest            the latest version, as a decimal string
    {prefix}:model:{name}:incarnation       the id of the model's current incarnation
    {prefix}:model:{name}:deleted           set: ids of its deleted incarnations
    {prefix}:model:{name}:log               stream: the feedback log
    {prefix}:model:{name}:idempotency:{incarnation}:{key}
                                            the answer to a keyed feedback request logged by
                                            a process that does not learn (expires)
    {prefix}:published                      pub/sub channel: "<model> <version>"

A model's incarnation changes when it is created (again): writes of a deleted or replaced
incarnation (a snapshot, a log append by a process that has not yet seen the deletion) are
refused. A missing incarnation key that no deletion explains (Redis lost its data) is
written again by the incarnation that writes.
"""

from __future__ import annotations


class RedisKeys:
    def __init__(self, prefix: str = "lorentztron"):
        self.prefix = prefix

    @property
    def models(self) -> str:
        return f"{self.prefix}:models"

    @property
    def tombstones(self) -> str:
        return f"{self.prefix}:tombstones"

    @property
    def published(self) -> str:
        return f"{self.prefix}:published"

    def model(self, name: str, *parts) -> str:
        return ":".join([self.prefix, "model", name, *map(str, parts)])

    def snapshot(self, name: str, version: int) -> str:
        return self.model(name, "snapshot", version)

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

    def idempotency(self, name: str, incarnation: str, key: str) -> str:
        return self.model(name, "idempotency", incarnation, key)
