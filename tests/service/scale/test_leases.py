"""Leases and fencing against a real redis-server: one owner at a time, a learner that lost
its lease can neither snapshot nor trim the log, placement and rebalancing by load."""

from __future__ import annotations

import time

import pytest

from core.dos import DoSClassifier
from service.durability.redis_log import RedisLog
from service.durability.redis_store import RedisStore
from service.durability.store import encode
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost, Leases, crowded, place, surplus
from tests.service.conftest import wait_for


def blob(version: int) -> bytes:
    return bytes(encode("m", version, {}, DoSClassifier(n_features=2, rank=1).get_state()))


def test_a_lost_lease_fences_every_write(redis_server):
    store = RedisStore(redis_server.url, prefix="t")
    log = RedisLog(store.client, prefix="t")
    first = Leases(store.client, store.keys, "A", ttl=0.3)
    second = Leases(store.client, store.keys, "B", ttl=5)
    store.save("m", 0, blob(0), retention=3, incarnation="i", create=True)
    positions = log.append_many("m", [b"r1", b"r2"], "i")

    held = first.acquire("m")
    assert held is not None and held.value == "A 1" and held.orphaned_for is None
    assert second.acquire("m") is None  # one owner at a time
    assert first.renew("m", held.value)
    store.save("m", 1, blob(1), retention=3, incarnation="i", fence=held.value)

    # A stalls past its lease: B takes the model with a newer token
    wait_for(lambda: second.acquire("m") is not None, timeout=5, period=0.05)
    assert store.client.get(store.keys.lease("m")) == b"B 2"
    assert not first.renew("m", held.value)
    with pytest.raises(LeaseLost):
        store.save("m", 2, blob(2), retention=3, incarnation="i", fence=held.value)
    with pytest.raises(LeaseLost):
        log.trim("m", positions[1], fence=held.value)
    assert log.length("m") == 2 and store.latest("m") == 1  # nothing of A's landed
    assert store.client.keys("t:model:{m}:upload:*") == []  # its upload is gone too
    store.save("m", 2, blob(2), retention=3, incarnation="i", fence="B 2")
    log.trim("m", positions[1], fence="B 2")
    assert log.length("m") == 1 and store.latest("m") == 2

    # every fenced write is in the model's writes stream, one lease after the other
    writes = [f[b"lease"].decode() for _, f in store.client.xrange(store.keys.writes("m"))]
    assert writes == ["A 1", "B 2"]


def test_takeover_is_timed_from_the_lost_lease(redis_server):
    store = RedisStore(redis_server.url, prefix="t")
    dead = Leases(store.client, store.keys, "A", ttl=0.2)
    alive = Leases(store.client, store.keys, "B", ttl=5)
    dead.acquire("m")
    time.sleep(0.5)
    taken = alive.acquire("m")
    assert taken is not None and 0.2 <= taken.orphaned_for < 2.0
    # a handover (release) leaves nothing to wait for
    assert alive.release("m", taken.value)
    again = dead.acquire("m")
    assert again is not None and again.orphaned_for < 0.2


def test_deleting_a_model_ends_its_lease(redis_server):
    store = RedisStore(redis_server.url, prefix="t")
    leases = Leases(store.client, store.keys, "A", ttl=5)
    store.save("m", 0, blob(0), retention=3, incarnation="i", create=True)
    held = leases.acquire("m")
    store.delete("m")
    assert not leases.renew("m", held.value)
    assert store.models() == []


def test_learners_heartbeat_and_expire(redis_server):
    store = RedisStore(redis_server.url, prefix="t")
    one = Leases(store.client, store.keys, "A", ttl=0.2)
    two = Leases(store.client, store.keys, "B", ttl=5)
    one.heartbeat()
    two.heartbeat()
    assert two.live() == ["A", "B"]
    wait_for(lambda: two.live() == ["B"], timeout=5)
    two.leave()
    assert one.live() == ["A"]


def test_placement_is_balanced_and_deterministic():
    owners = {f"m{i}": None for i in range(30)}
    learners = ["A", "B", "C"]
    placed = place(list(owners), owners, learners)
    counts = {learner: list(placed.values()).count(learner) for learner in learners}
    assert counts == {"A": 10, "B": 10, "C": 10}
    assert place(list(owners), owners, list(reversed(learners))) == placed
    # a learner that joins: the others hand over until no one is 2 above another
    owners = {name: ("A" if i < 15 else "B") for i, name in enumerate(owners)}
    assert surplus("A", owners, ["A", "B", "C"]) == 5
    assert surplus("A", owners, ["A", "B"]) == 0


def test_keys_share_a_slot_per_model():
    from redis.crc import key_slot

    keys = RedisKeys("p")
    slots = {
        key_slot(key.encode())
        for key in (
            keys.log("model-1"),
            keys.lease("model-1"),
            keys.fence("model-1"),
            keys.incarnation("model-1"),
            keys.snapshot("model-1", 7),
            keys.upload("model-1", "x"),
            keys.versions("model-1"),
            keys.writes("model-1"),
        )
    }
    assert len(slots) == 1
    with pytest.raises(ValueError, match="braces"):
        RedisKeys("p{x}")


def test_the_shares_of_a_parallel_model_are_placed_and_kept_apart():
    """Placement puts a model's shares on the learners holding fewest of them before it
    looks at loads; a learner holding two shares of a model hands one over while a learner
    with none of them holds fewer models, and never when that would bring it back."""
    owners = {"a": "A", "b": "A", "m": "B", "m/0": None, "m/1": None, "m/2": None}
    placed = place(["m/0", "m/1", "m/2"], owners, ["A", "B", "C"])
    assert sorted(placed.values()) == ["A", "B", "C"]  # (one each, whatever the loads)
    assert place(["m/1"], {"m/0": "A", "x": "B", "y": "B"}, ["A", "B"]) == {"m/1": "B"}
    # two shares on A, B holds none of them and fewer models: A hands the later one over
    assert crowded("A", {"m": "B", "m/0": "A", "m/1": "A"}, ["A", "B"]) == "m/1"
    # ... but not to a learner as loaded as A (it would hand it back), nor when apart
    assert crowded("A", {"m": "B", "x": "B", "m/0": "A", "m/1": "A"}, ["A", "B"]) is None
    assert crowded("A", {"m": "B", "m/0": "A", "m/1": "B"}, ["A", "B"]) is None
    # more shares than learners: every learner holds some, nothing moves
    three = {"m": "A", "m/0": "A", "m/1": "B", "m/2": "A"}
    assert crowded("A", three, ["A", "B"]) is None
