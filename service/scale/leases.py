"""Leases: which learner owns which model, in Redis, with fencing tokens.

A learner owns a model while it holds its lease, ``{prefix}:model:{<name>}:lease`` =
``"<learner> <token>"``, a key that expires ``ttl`` seconds after its last renewal. Each
acquisition takes a new token from ``...:fence`` (``INCR``): the lease value names one
acquisition of one learner. Every write a learner makes for a model it owns (a snapshot, a
trim of the log) runs in a script that first checks that the lease still holds that value:
a learner paused past its lease (a stop, a long pause of the process or of its machine)
finds its writes refused (``LeaseLost``) once it resumes, even if it has not noticed yet.

``...:owner`` (a hash kept after the lease expires) holds the last lease's learner, token
and deadline: a new owner measures its takeover from that deadline. Learners announce
themselves in ``{prefix}:learners`` (a sorted set scored by the deadline of their last
heartbeat): placement (``place``) and rebalancing (``surplus``) count the live ones.
"""

from __future__ import annotations

import math
import os
import socket
import uuid
from collections import Counter
from dataclasses import dataclass

from service.scale.keys import RedisKeys


class LeaseLost(Exception):
    """A write for a model whose lease this learner no longer holds was refused."""


#: KEYS: lease, fence, owner; ARGV: learner, ttl (ms). A new token if the lease is free.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[2])
local value = ARGV[1] .. ' ' .. token
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
local previous = redis.call('HMGET', KEYS[3], 'learner', 'deadline')
redis.call('HSET', KEYS[3], 'learner', ARGV[1], 'token', token, 'deadline', now + ARGV[2])
return {value, previous[1] or '', previous[2] or '', tostring(now)}
"""

#: KEYS: lease, owner; ARGV: lease value, ttl (ms). 1 if renewed, 0 if lost.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], 'deadline', t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[2])
return 1
"""

#: KEYS: lease, owner; ARGV: lease value. Gives the lease up now (a handover).
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], 'deadline', t[1] * 1000 + math.floor(t[2] / 1000))
return 1
"""


def learner_id() -> str:
    """A name for this learner process, unique across restarts."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Acquired:
    """A lease just taken: its value (the fence of every write) and how long the model
    had no owner (seconds since the previous lease's deadline; None if it never had one
    or if this learner held it)."""

    value: str
    orphaned_for: float | None


class Leases:
    """One learner's leases (module docstring); ``ttl`` in seconds."""

    def __init__(self, client, keys: RedisKeys, learner: str, ttl: float):
        self.client = client
        self.keys = keys
        self.learner = learner
        self.ttl_ms = max(1, int(ttl * 1000))
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def acquire(self, name: str) -> Acquired | None:
        """The model's lease if it is free (None if another learner holds it)."""
        keys = self.keys
        reply = self._acquire(
            keys=[keys.lease(name), keys.fence(name), keys.owner(name)],
            args=[self.learner, self.ttl_ms],
        )
        if reply is None:
            return None
        value, previous, deadline, now = (part.decode() for part in reply)
        orphaned = None
        if previous and previous != self.learner and deadline:
            orphaned = max(0.0, (int(now) - int(deadline)) / 1000.0)
        return Acquired(value, orphaned)

    def renew(self, name: str, value: str) -> bool:
        """Extend a lease by ``ttl``; False if it was lost (expired, taken, deleted)."""
        keys = self.keys
        return bool(
            self._renew(keys=[keys.lease(name), keys.owner(name)], args=[value, self.ttl_ms])
        )

    def release(self, name: str, value: str) -> bool:
        """Give a lease up now, so that another learner takes the model at once."""
        keys = self.keys
        return bool(self._release(keys=[keys.lease(name), keys.owner(name)], args=[value]))

    def owners(self, names: list[str]) -> dict[str, str | None]:
        """The learner holding each model's lease (None: free)."""
        if not names:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.get(self.keys.lease(name))
        values = pipe.execute()
        return {
            name: None if value is None else value.decode().rsplit(" ", 1)[0]
            for name, value in zip(names, values, strict=True)
        }

    def heartbeat(self) -> None:
        """Announce this learner as live for one ``ttl``; forget the learners gone silent."""
        now = _server_ms(self.client)
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.keys.learners, {self.learner: now + self.ttl_ms})
        pipe.zremrangebyscore(self.keys.learners, "-inf", now)
        pipe.execute()

    def leave(self) -> None:
        self.client.zrem(self.keys.learners, self.learner)

    def live(self) -> list[str]:
        """The learners whose heartbeat has not expired (this one included)."""
        now = _server_ms(self.client)
        members = self.client.zrangebyscore(self.keys.learners, now, "+inf")
        return sorted({m.decode() for m in members} | {self.learner})


def _server_ms(client) -> int:
    """Redis's clock in milliseconds (one clock for every learner's heartbeats)."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def place(free: list[str], owners: dict[str, str | None], learners: list[str]) -> dict[str, str]:
    """Learner for each free model: one at a time to the least-loaded live learner (ties by
    name), so that every learner computing it from the same view gets the same answer. The
    shares of a parallel model (``<model>/<i>``, ``service.scale.parallel``) go first to the
    learners holding fewest of its shares: k shares on k learners learn at once.

    >>> place(["c", "d"], {"a": "L1", "b": "L1", "c": None, "d": None}, ["L1", "L2"])
    {'c': 'L2', 'd': 'L2'}
    >>> place(["m/1"], {"a": "L2", "b": "L2", "m/0": "L1", "m/1": None}, ["L1", "L2"])
    {'m/1': 'L2'}
    """
    loads = Counter({learner: 0 for learner in learners})
    shares = Counter()  # (parallel model, learner): shares of the model held there
    for name, owner in owners.items():
        if owner in loads:
            loads[owner] += 1
            shares[_model_of(name), owner] += 1
    placed = {}
    for name in sorted(free):
        model = _model_of(name)
        learner = min(
            learners,
            key=lambda c: (shares[model, c] if model else 0, loads[c], c),
        )
        placed[name] = learner
        loads[learner] += 1
        shares[model, learner] += 1
    return placed


def _model_of(name: str) -> str | None:
    """The parallel model a share's name is of (None: a model's own name)."""
    unit = RedisKeys.split_share(name)
    return unit[0] if unit else None


def surplus(me: str, owners: dict[str, str | None], learners: list[str]) -> int:
    """How many models ``me`` should hand over: its load beyond its fair share, when some
    live learner is two or more below it (a learner that joined, or one that lost models).

    >>> surplus("L1", {"a": "L1", "b": "L1", "c": "L1", "d": "L1"}, ["L1", "L2"])
    2
    >>> surplus("L1", {"a": "L1", "b": "L1", "c": "L2"}, ["L1", "L2"])
    0
    """
    loads = Counter({learner: 0 for learner in learners})
    for owner in owners.values():
        if owner in loads:
            loads[owner] += 1
    share = math.ceil(sum(loads.values()) / len(learners))
    if loads[me] - min(loads.values()) < 2:
        return 0
    return max(0, loads[me] - share)


def crowded(me: str, owners: dict[str, str | None], learners: list[str]) -> str | None:
    """A share ``me`` should hand over so that a parallel model's shares learn apart: one of
    two or more shares of a model held here, when a live learner holding none of that
    model's shares holds fewer models than ``me`` (placement gives the share to it; with
    fewer models there, it never comes back). None: none.

    >>> crowded("L1", {"m": "L2", "m/0": "L1", "m/1": "L1"}, ["L1", "L2"])
    'm/1'
    >>> crowded("L1", {"m": "L2", "m/0": "L1", "m/1": "L2"}, ["L1", "L2"])
    """
    loads = Counter({learner: 0 for learner in learners})
    mine: dict[str, list[str]] = {}
    holding: dict[str, set[str]] = {}
    for name, owner in owners.items():
        if owner not in loads:
            continue
        loads[owner] += 1
        model = _model_of(name)
        if model is not None:
            holding.setdefault(model, set()).add(owner)
            if owner == me:
                mine.setdefault(model, []).append(name)
    for model, names in sorted(mine.items()):
        if len(names) < 2:
            continue
        if any(c not in holding[model] and loads[c] < loads[me] for c in learners):
            return sorted(names)[-1]
    return None
