import threading

import numpy as np
import pytest
import redis

from core.averaging import Averaged
from core.dos import DoSClassifier
from core.registry import state_digest
from service.durability.store import (
    LocalStore,
    RedisStore,
    SnapshotError,
    decode,
    encode,
    read_header,
)


def trained_state(seed=0):
    model = Averaged(model=DoSClassifier(n_features=5, rank=3, seed=seed), interval=3)
    rng = np.random.default_rng(seed)
    model.learn_many(rng.standard_normal((10, 5)), rng.choice([-1, 1], 10))
    return model.get_state()


def test_round_trip_is_bit_exact():
    state = trained_state()
    blob = encode("m", 7, {"name": "m"}, state, created_at=123.0)
    header, decoded = decode(blob)
    assert header["model"] == "m" and header["version"] == 7 and header["created_at"] == 123.0
    assert header["spec"] == {"name": "m"}
    assert state_digest(decoded) == state_digest(state)
    assert read_header(blob)["version"] == 7
    data = bytes(blob)  # (a memoryview of the one buffer it was built in)
    assert b"pickle" not in data and data.startswith(b"LZTSNAP1\n")


def test_corruption_is_detected():
    blob = bytes(encode("m", 1, {}, trained_state()))
    flipped = bytearray(blob)
    flipped[-5] ^= 0xFF
    with pytest.raises(SnapshotError, match="checksum"):
        decode(bytes(flipped))
    with pytest.raises(SnapshotError, match="magic"):
        decode(b"PK\x03\x04" + blob[4:])
    with pytest.raises(SnapshotError):
        decode(blob[:20])


def exercise_store(store):
    assert store.models() == []
    with pytest.raises(SnapshotError):
        store.load("m")
    blobs = {v: encode("m", v, {}, trained_state(v)) for v in (1, 2, 3)}
    for v, blob in blobs.items():
        store.save("m", v, blob, retention=2)
    assert store.models() == ["m"]
    assert [meta.version for meta in store.versions("m")] == [2, 3]
    assert store.load("m") == blobs[3]
    assert store.load("m", 2) == blobs[2]
    with pytest.raises(SnapshotError):
        store.load("m", 1)
    # a write that finishes after a newer one (two snapshots of one model at once) is
    # kept as a version, and the latest stays the newest
    store.save("m", 4, blobs[3], retention=3)
    store.save("m", 1, blobs[1], retention=3)
    assert store.load("m") == blobs[3]
    assert [meta.version for meta in store.versions("m")] == [2, 3, 4]
    store.delete("m")
    assert store.models() == [] and store.versions("m") == []
    store.ping()


def test_local_store(tmp_path):
    store = LocalStore(tmp_path / "snaps")
    exercise_store(store)
    # a crashed write leaves a temporary file that never counts as a snapshot
    store.save("m", 1, encode("m", 1, {}, trained_state()), retention=3)
    (tmp_path / "snaps" / "m" / ".000000000002.snap.999.tmp").write_bytes(b"half")
    assert [meta.version for meta in store.versions("m")] == [1]
    assert decode(store.load("m"))[0]["version"] == 1


def test_local_store_concurrent_saves(tmp_path):
    """Threads saving snapshots of one model at once (the worker's and the snapshot route's)
    all succeed; the latest is the newest version and old ones are pruned."""
    store = LocalStore(tmp_path)
    blob = bytes(encode("m", 0, {}, trained_state()))
    start = threading.Barrier(8)
    errors = []

    def writer(first: int):
        start.wait()
        try:
            for version in range(first, 200, 8):
                store.save("m", version, blob, retention=3)
                store.versions("m")
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (tmp_path / "m" / "LATEST").read_text() == "199"
    names = {path.name for path in (tmp_path / "m").iterdir()}  # no temporary files left
    assert names == {"LATEST"} | {f"{v:012d}.snap" for v in (197, 198, 199)}


def test_redis_store(redis_server):
    store = RedisStore(redis_server.url, prefix="test")
    exercise_store(store)
    store.save("m", 5, encode("m", 5, {}, trained_state()), retention=2)
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
    from service.durability.feedback_log import ModelGone, RedisLog
    from service.durability.store import IncarnationGone

    store = RedisStore(redis_server.url, prefix="t")
    log = RedisLog(store.client, prefix="t")
    blob = bytes(encode("m", 0, {}, DoSClassifier(n_features=2, rank=1).get_state()))
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


def test_local_tombstones(tmp_path):
    store = LocalStore(tmp_path)
    blob = bytes(encode("m", 0, {}, DoSClassifier(n_features=2, rank=1).get_state()))
    store.save("m", 0, blob, retention=3)
    store.mark_deleting("m")
    assert store.deleting() == ["m"] and store.models() == []
    store.delete("m")
    store.clear_deleting("m")
    assert store.deleting() == [] and not (tmp_path / "m").exists()


def test_redis_store_uploads_large_blobs_in_chunks(redis_server, monkeypatch):
    """A blob goes to Redis a chunk per command (other clients' commands run between them)
    and comes back whole."""
    import service.durability.store

    monkeypatch.setattr(service.durability.store, "UPLOAD_CHUNK", 400)
    store = RedisStore(redis_server.url, prefix="c")
    blob = bytes(encode("m", 1, {}, trained_state()))
    assert len(blob) > 3 * 400
    store.save("m", 1, blob, retention=2)
    assert store.load("m") == blob
    assert store.client.keys("c:model:{m}:upload:*") == []
    for size in (400, 800, 801):  # one chunk; whole chunks; a short last chunk
        store.save("m", 2, blob[:size], retention=2)
        assert store.client.get(store.keys.snapshot("m", 2)) == blob[:size]
    store.close()


def test_an_interrupted_upload_expires(redis_server, monkeypatch):
    """An upload cut short (a learner killed mid-way) leaves a key that Redis drops."""
    import service.durability.store

    monkeypatch.setattr(service.durability.store, "UPLOAD_CHUNK", 400)
    store = RedisStore(redis_server.url, prefix="c")
    setrange, calls = store.client.setrange, []

    def cut_short(key, offset, value):
        calls.append(offset)
        if len(calls) > 2:
            raise ConnectionError("killed")
        return setrange(key, offset, value)

    monkeypatch.setattr(store.client, "setrange", cut_short)
    with pytest.raises(ConnectionError):
        store.save("m", 1, bytes(encode("m", 1, {}, trained_state())), retention=2)
    [upload] = store.client.keys("c:model:{m}:upload:*")
    assert 0 < store.client.pttl(upload) <= service.durability.store.UPLOAD_TTL_MS
    store.close()


def test_redis_keys_of_the_layout_before_hash_tags_are_moved(redis_server):
    """A model written before the keys had hash tags (``{prefix}:model:<name>:...``) is
    found again after the upgrade, with its incarnation and log; once only."""
    store = RedisStore(redis_server.url, prefix="u")
    client = store.client
    client.set("u:model:m:snapshot:3", bytes(encode("m", 3, {}, trained_state())))
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
