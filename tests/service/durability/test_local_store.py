"""The local directory store (``service.durability.local_store``)."""

import threading

from core.dos import DoSClassifier
from service.durability.local_store import LocalStore
from service.durability.store import decode, encode
from tests.service.durability.test_store import DOS, exercise_store, trained_state


def test_local_store(tmp_path):
    store = LocalStore(tmp_path / "snaps")
    exercise_store(store)
    # a crashed write leaves a temporary file that never counts as a snapshot
    store.save("m", 1, encode("m", 1, DOS, trained_state()), retention=3)
    (tmp_path / "snaps" / "m" / ".000000000002.snap.999.tmp").write_bytes(b"half")
    assert [meta.version for meta in store.versions("m")] == [1]
    assert decode(store.load("m"))[0]["version"] == 1


def test_local_store_concurrent_saves(tmp_path):
    """Threads saving snapshots of one model at once (the worker's and the snapshot route's)
    all succeed; the latest is the newest version and old ones are pruned."""
    store = LocalStore(tmp_path)
    blob = bytes(encode("m", 0, DOS, trained_state()))
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


def test_local_tombstones(tmp_path):
    store = LocalStore(tmp_path)
    blob = bytes(encode("m", 0, DOS, DoSClassifier(n_features=2, rank=1).get_state()))
    store.save("m", 0, blob, retention=3)
    store.mark_deleting("m")
    assert store.deleting() == ["m"] and store.models() == []
    store.delete("m")
    store.clear_deleting("m")
    assert store.deleting() == [] and not (tmp_path / "m").exists()
