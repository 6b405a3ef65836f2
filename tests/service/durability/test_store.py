"""The snapshot format (``service.durability.store``): a bit-exact round trip, corruption
detected; and ``exercise_store``, the contract of a ``SnapshotStore`` that every backend's
tests run."""

import hashlib
import json
import math
import struct
import time

import numpy as np
import pytest

from core.averaging import Averaged
from core.dos import DoSClassifier
from core.metrics import ProgressiveValidation
from core.mofm.reservoir import Reservoir
from core.registry import state_digest
from service.durability import capture
from service.durability.capture import ANSWERS, MODEL, PROGRESSIVE, RESERVOIR
from service.durability.store import MAGIC, SnapshotError, decode, encode, read_header

#: a create request (snapshots keep the model's)
DOS = {"name": "m", "kind": "dos", "input": {"n_features": 5}}


def trained_state(seed=0):
    model = Averaged(model=DoSClassifier(n_features=5, rank=3, seed=seed), interval=3)
    rng = np.random.default_rng(seed)
    model.learn_many(rng.standard_normal((10, 5)), rng.choice([-1, 1], 10))
    return model.get_state()


def test_round_trip_is_bit_exact():
    state = trained_state()
    blob = encode("m", 7, DOS, state, created_at=123.0)
    header, decoded = decode(blob)
    assert header["model"] == "m" and header["version"] == 7 and header["created_at"] == 123.0
    assert header["spec"] == DOS
    assert state_digest(decoded) == state_digest(state)
    assert read_header(blob)["version"] == 7
    data = bytes(blob)  # (a memoryview of the one buffer it was built in)
    assert b"pickle" not in data and data.startswith(b"LZTSNAP1\n")


def test_an_encoding_at_a_rate_is_the_same_blob_spread_over_time(monkeypatch):
    """With a rate, the copies and the hash go a piece at a time (a learner's full snapshot
    in the background): the same bytes, taking at least twice the payload over the rate."""
    from service.durability import store

    monkeypatch.setattr(store, "PIECE", 256)
    state = trained_state()
    state["arrays"]["wide"] = np.arange(3000.0).reshape(100, 30)  # copied in 94 pieces
    state["arrays"]["strided"] = np.arange(600.0).reshape(20, 30).T  # (not in C order)
    at_once = bytes(encode("m", 7, DOS, state, created_at=123.0))
    payload = len(at_once) - len(store.MAGIC) - 8 - len(json.dumps(read_header(at_once)))
    rate = 2 * payload / 0.3  # bytes/s: 0.3 s for the copies and the hash
    started = time.monotonic()
    paced = bytes(encode("m", 7, DOS, state, created_at=123.0, rate=rate))
    assert time.monotonic() - started >= 0.3 * 0.9
    assert paced == at_once
    header, decoded = decode(paced)
    assert state_digest(decoded) == state_digest(state)


def test_corruption_is_detected():
    blob = bytes(encode("m", 1, DOS, trained_state()))
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
    blobs = {v: encode("m", v, DOS, trained_state(v)) for v in (1, 2, 3)}
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


# -- snapshots built to attack the restore ------------------------------------------------------
SPEC = {"name": "m", "kind": "mofm", "input": {"n_features": 5}, "classes": ["a", "b", "c"]}


def snapshot() -> bytes:
    """A valid snapshot with every part of the service's state: counters, progressive
    metrics, an answer and a refit window."""
    progressive = ProgressiveValidation(window=4, loss="hinge")
    progressive.update([True, False, True, True, False], [0.0, 1.5, 0.0, 0.0, 2.0])
    window = Reservoir(size=3, n_features=5)
    for label in ("a", "c"):
        window.add(np.ones(5), label)
    answer = {"key": "k1", "fingerprint": "0" * 32, "at": 1.7e9, "body": {"version": 1}}
    service = {
        MODEL: {"scalars": {"created_at": 1.7e9, "incarnation": "abc", "examples_learned": 5}},
        PROGRESSIVE: progressive.get_state(),
        ANSWERS: {"arrays": {"table": np.frombuffer(json.dumps(answer).encode(), np.uint8)}},
        RESERVOIR: capture.reservoir_part(window.get_state(), "abc".index),
    }
    state = capture.with_service(trained_state(), service)
    return bytes(encode("m", 3, SPEC, state, created_at=1.7e9, log_position=7))


def reencoded(blob: bytes, change) -> bytes:
    """A snapshot with its header changed in place by ``change(header)`` (or replaced by
    what it returns), the payload kept and its checksum right: what the header says is
    all that is wrong."""
    (length,) = struct.unpack_from("<Q", blob, len(MAGIC))
    start = len(MAGIC) + 8
    header = json.loads(blob[start : start + length])
    payload = blob[start + length :]
    header = change(header) or header
    if isinstance(header, dict):
        header["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return MAGIC + struct.pack("<Q", len(head)) + head + payload


def setting(*path, value):
    def change(header):
        for key in path[:-1]:
            header = header[key]
        header[path[-1]] = value

    return change


def in_array(name: str, **descriptor):
    def change(header):
        next(d for d in header["arrays"] if d["name"] == name).update(descriptor)

    return change


def every_scalar(suffix: str, value):
    def change(header):
        for name in header["scalars"]:
            if name.endswith(suffix):
                header["scalars"][name] = value

    return change


def filled_beyond_window(header):
    window = next(d for d in header["arrays"] if d["name"] == PROGRESSIVE + "recent_")
    window = window["shape"][1]
    header["service_scalars"] |= {
        PROGRESSIVE + "n": window + 100,
        PROGRESSIVE + "filled": window + 1,
    }


def overlapping(header):
    """The second array starts where the first does."""
    first, second = header["arrays"][:2]
    second["offset"] = first["offset"]


def as_bytes(header):
    descriptor = next(d for d in header["arrays"] if d["name"] == PROGRESSIVE + "recent_")
    descriptor.update(dtype="|u1", shape=[3, 8 * descriptor["shape"][1]])


def shape_as_digits(header):
    descriptor = next(d for d in header["arrays"] if d["name"] == PROGRESSIVE + "recent_")
    descriptor["shape"] = "".join(map(str, descriptor["shape"]))


SERVICE = "service_scalars"
#: (what, header change): snapshots that decode must refuse with a SnapshotError
BAD_SNAPSHOTS = [
    ("examples_learned a string", setting(SERVICE, MODEL + "examples_learned", value="lots")),
    ("examples_learned negative", setting(SERVICE, MODEL + "examples_learned", value=-7)),
    ("created_at a string", setting(SERVICE, MODEL + "created_at", value="yesterday")),
    ("version negative", setting("version", value=-5)),
    ("version 10^30", setting("version", value=10**30)),
    ("version 2^63+5", setting("version", value=2**63 + 5)),
    ("version true", setting("version", value=True)),
    ("version 1e308", setting("version", value=1e308)),
    ("header created_at a string", setting("created_at", value="yesterday")),
    ("log_position a list", setting("log_position", value=[7])),
    ("n_seen_ 10^40", every_scalar("n_seen_", 10**40)),
    ("loss_sum NaN", setting(SERVICE, PROGRESSIVE + "loss_sum", value=math.nan)),
    ("filled beyond the window", filled_beyond_window),
    ("progressive window as uint8", as_bytes),
    ("service_scalars a list", setting(SERVICE, value=[])),
    ("reservoir rng a string", setting(SERVICE, RESERVOIR + "rng", value="PCG64")),
    ("shape a string", shape_as_digits),
    ("offsets overlapping", overlapping),
    ("dtype unknown to numpy", in_array(PROGRESSIVE + "recent_", dtype="x")),
    ("dtype of strings", in_array(PROGRESSIVE + "recent_", dtype="<U8")),
    ("offset a string", in_array(PROGRESSIVE + "recent_", offset="0")),
    ("shape [1e300]", in_array(PROGRESSIVE + "recent_", shape=[1e300])),
    ("arrays an object", setting("arrays", value={})),
    ("header nested 100k deep", lambda h: b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("header a list", lambda h: b"[]"),
    ("spec a string", setting("spec", value="dos")),
    ("spec a list", setting("spec", value=["dos"])),
    ("spec null", setting("spec", value=None)),
]


def test_a_valid_snapshot_decodes_whole():
    header, state = decode(snapshot())
    assert header["version"] == 3 and header["log_position"] == 7
    assert state["service"]["arrays"][RESERVOIR + "targets"].tolist()[:2] == [0.0, 2.0]


@pytest.mark.parametrize("what,change", BAD_SNAPSHOTS, ids=[what for what, _ in BAD_SNAPSHOTS])
def test_a_snapshot_that_breaks_the_schema_is_refused(what, change):
    with pytest.raises(SnapshotError):
        decode(reencoded(snapshot(), change))
