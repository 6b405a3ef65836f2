"""The Redis store (``service.durability.redis_store``), against a real redis-server."""

import time

import pytest
import redis

from core.dos import DoSClassifier
from service.durability import redis_store
from service.durability.redis_store import RedisStore
from service.durability.store import decode, encode
from tests.service.durability.test_store import DOS, exercise_store, trained_state


def test_redis_store(redis_server):
    store = RedisStore(redis_server.url, prefix="test")
    exercise_store(store)
    store.save("m", 5, encode("m", 5, DOS, trained_state()), retention=2)
    keys = sorted(k.decode() for k in store.client.keys("*"))
    assert keys == [
        "test:model:{m}:latest",
        "test:model:{m}:snapshot:5",
        "test:model:{m}:versions",
        "test:models",
    ]
    store.close()


def test_redis_store_unreachable_fails_fast():
    store = RedisStore("redis://127.0.0.1:1/0", timeout=0.5)
    with pytest.raises(redis.ConnectionError):
        store.ping()


def test_redis_writes_of_a_deleted_incarnation_are_refused(redis_server):
    """A process that has not yet seen a deletion (another api replica, a learner about to
    publish) can neither snapshot nor log into the deleted model, nor into the model
    created again under its name; a Redis that lost its data is written again."""
    from service.durability.feedback_log import ModelGone
    from service.durability.redis_log import RedisLog
    from service.durability.store import IncarnationGone

    store = RedisStore(redis_server.url, prefix="t")
    log = RedisLog(store.client, prefix="t")
    blob = bytes(encode("m", 0, DOS, DoSClassifier(n_features=2, rank=1).get_state()))
    store.save("m", 0, blob, retention=3, incarnation="first", create=True)
    assert log.append_many("m", [b"r1"], "first")
    store.save("m", 1, blob, retention=3, incarnation="first")
    store.mark_deleting("m")
    assert store.models() == []  # deleting: not listed for restore or discovery
    store.delete("m")
    log.delete("m")
    store.clear_deleting("m")
    with pytest.raises(IncarnationGone):
        store.save("m", 2, blob, retention=3, incarnation="first")
    with pytest.raises(ModelGone):
        log.append_many("m", [b"late"], "first")
    assert store.models() == [] and log.length("m") == 0
    store.save("m", 0, blob, retention=3, incarnation="second", create=True)
    with pytest.raises(IncarnationGone):
        store.save("m", 5, blob, retention=3, incarnation="first")
    with pytest.raises(ModelGone):
        log.append_many("m", [b"late"], "first")
    assert log.append_many("m", [b"r"], "second") and store.incarnation("m") == "second"
    store.client.flushall()  # Redis lost everything: the live incarnation writes it again
    store.save("m", 1, blob, retention=3, incarnation="second")
    assert store.incarnation("m") == "second" and store.models() == ["m"]
    store.client.delete(store.keys.incarnation("m"))
    assert log.append_many("m", [b"r"], "second") and store.incarnation("m") == "second"
    store.close()


def test_redis_store_uploads_large_blobs_in_chunks(redis_server, monkeypatch):
    """A blob goes to Redis a chunk per command (other clients' commands run between them),
    a large one as a list of parts (no string grown or freed at once inside Redis), and
    comes back whole; ``versions`` reads only a blob's header."""
    monkeypatch.setattr(redis_store, "UPLOAD_CHUNK", 400)
    monkeypatch.setattr(redis_store, "PART", 100)
    store = RedisStore(redis_server.url, prefix="c")
    blob = bytes(encode("m", 1, DOS, trained_state()))
    assert len(blob) > 3 * 400
    store.save("m", 1, blob, retention=2)
    assert store.load("m") == blob
    assert store.client.type(store.keys.snapshot("m", 1)) == b"list"
    assert store.client.keys("c:model:{m}:upload:*") == []
    [meta] = store.versions("m")
    assert meta.version == 1 and meta.size_bytes == len(blob)
    for size in (400, 401, 800, 801):  # a string; parts: a short last one, whole ones
        store.save("m", 2, blob[:size], retention=2)
        assert store.load("m", 2) == blob[:size]
        kind = b"string" if size <= 400 else b"list"
        assert store.client.type(store.keys.snapshot("m", 2)) == kind
    store.client.set(store.keys.snapshot("m", 2), blob)  # a large blob written before lists
    assert store.load("m", 2) == blob
    assert sorted(meta.size_bytes for meta in store.versions("m")) == [len(blob)] * 2
    store.close()


def test_an_upload_with_a_rate_takes_its_size_over_the_rate(redis_server, monkeypatch):
    """With a rate, a large blob's chunks are spread over at least its size over the rate
    (the learner's full snapshots in the background), and it comes back whole; without
    one, it goes at once."""
    monkeypatch.setattr(redis_store, "UPLOAD_CHUNK", 400)
    monkeypatch.setattr(redis_store, "PART", 100)
    store = RedisStore(redis_server.url, prefix="r")
    blob = bytes(encode("m", 1, DOS, trained_state()))
    rate = len(blob) / 0.5  # bytes/s: half a second for the whole blob
    started = time.monotonic()
    store.save("m", 1, blob, retention=2, rate=rate)
    paced = time.monotonic() - started
    assert store.load("m") == blob
    started = time.monotonic()
    store.save("m", 2, blob, retention=2)
    at_once = time.monotonic() - started
    assert store.load("m", 2) == blob
    # the last chunk is not waited for: (n - 1) of n chunks' share of the half second
    chunks = -(-len(blob) // 400)
    assert paced >= 0.5 * (chunks - 1) / chunks * 0.99
    assert at_once < paced / 2
    store.close()


def test_an_interrupted_upload_expires(redis_server, monkeypatch):
    """An upload cut short (a learner killed mid-way) leaves a key that Redis drops."""
    monkeypatch.setattr(redis_store, "UPLOAD_CHUNK", 400)
    monkeypatch.setattr(redis_store, "PART", 100)
    store = RedisStore(redis_server.url, prefix="c")
    rpush, calls = store.client.rpush, []

    def cut_short(key, *parts):
        calls.append(len(parts))
        if len(calls) > 2:
            raise ConnectionError("killed")
        return rpush(key, *parts)

    monkeypatch.setattr(store.client, "rpush", cut_short)
    with pytest.raises(ConnectionError):
        store.save("m", 1, bytes(encode("m", 1, DOS, trained_state())), retention=2)
    [upload] = store.client.keys("c:model:{m}:upload:*")
    assert 0 < store.client.pttl(upload) <= redis_store.UPLOAD_TTL_MS
    store.close()


def test_redis_keys_of_the_layout_before_hash_tags_are_moved(redis_server):
    """A model written before the keys had hash tags (``{prefix}:model:<name>:...``) is
    found again after the upgrade, with its incarnation and log; once only."""
    store = RedisStore(redis_server.url, prefix="u")
    client = store.client
    client.set("u:model:m:snapshot:3", bytes(encode("m", 3, DOS, trained_state())))
    client.zadd("u:model:m:versions", {"3": 3})
    client.set("u:model:m:latest", "3")
    client.set("u:model:m:incarnation", "old")
    client.xadd("u:model:m:log", {"r": b"record"})
    client.sadd("u:models", "m")
    assert store.upgrade() == ["m"]
    assert decode(store.load("m"))[0]["version"] == 3
    assert store.incarnation("m") == "old" and client.xlen(store.keys.log("m")) == 1
    assert client.keys("u:model:m:*") == []
    assert store.upgrade() == []
    store.close()
