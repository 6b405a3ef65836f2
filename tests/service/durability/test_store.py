"""The snapshot format (``service.durability.store``): a bit-exact round trip, corruption
detected; and ``exercise_store``, the contract of a ``SnapshotStore`` that every backend's
tests run."""

import numpy as np
import pytest

from core.averaging import Averaged
from core.base import state_digest
from core.dos import DoSClassifier
from service.durability.store import SnapshotError, decode, encode, read_header


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
