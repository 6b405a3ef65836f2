"""Nothing acknowledged is lost: the service runs as a subprocess, concurrent clients send
feedback, the service is killed with SIGKILL at random moments (and, with Redis, Redis is
killed and restarted under load), and the recovered model must equal, array for array, a
reference trained in-process on exactly the logged examples, in log order; every
acknowledged example must be in the log, at the version its response reported."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
import redis

from benchmarks.servers import RedisServer, ServiceProcess
from core.averaging import Averaged
from core.calibration import Calibrated
from core.dos import DoSClassifier
from service.durability.capture import GROUP, MEMBERS, split_service
from service.durability.feedback_log import decode_record
from service.durability.file_log import FileLog
from service.durability.local_store import LocalStore
from service.durability.redis_log import RedisLog
from service.durability.redis_store import RedisStore
from service.durability.store import decode
from service.model.group import loads

N_FEATURES = 6
SPEC = {
    "name": "m",
    "kind": "dos",
    "params": {"rank": 2, "seed": 4},
    "input": {"n_features": N_FEATURES},
    "averaging": {"interval": 7},
}


class Clients:
    """Threads posting small feedback batches of fresh random examples until stopped (with
    ``headers`` on every request, e.g. a write key)."""

    def __init__(self, n_threads: int, seed: int, headers: dict[str, str] | None = None):
        self.url = ""
        self.headers = headers or {}
        self.acked: list[tuple[bytes, int]] = []  # (batch key, version in the response)
        self.sent: set[bytes] = set()
        self.refused = 0
        self.unexpected: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(seed + i,), daemon=True)
            for i in range(n_threads)
        ]

    def start(self):
        for thread in self._threads:
            thread.start()

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, seed: int):
        rng = np.random.default_rng(seed)
        client = httpx.Client(timeout=5, headers=self.headers)
        while not self._stop.is_set():
            X = rng.standard_normal((int(rng.integers(1, 4)), N_FEATURES))
            y = np.where(X[:, 0] + 0.3 * rng.standard_normal(len(X)) > 0, 1, -1)
            key = X.tobytes()
            body = {
                "examples": [{"x": x.tolist(), "label": int(t)} for x, t in zip(X, y, strict=True)]
            }
            with self._lock:
                self.sent.add(key)
            try:
                response = client.post(f"{self.url}/v1/models/m/feedback", json=body)
            except httpx.HTTPError:
                time.sleep(0.02)  # the server is down: retry with new examples
                continue
            if response.status_code == 200:
                with self._lock:
                    self.acked.append((key, response.json()["version"]))
            else:
                with self._lock:
                    self.refused += 1
                    if response.status_code != 503:
                        self.unexpected.append(f"{response.status_code}: {response.text}")
                time.sleep(0.02)
        client.close()


def check_recovery(
    records: list[bytes], clients: Clients, state: dict, version: int, averaged_atol: float = 0.0
):
    """The recovered state against the log; the log against what was sent and acked.
    ``averaged_atol``: the time-averaged arrays, which go through LAPACK (alignment), are
    compared up to that share of their largest entry instead of bit for bit, for a service
    whose BLAS runs other CPU kernels than this process's (a container); the live arrays
    are compared bit for bit always."""
    assert not clients.unexpected, clients.unexpected[:3]
    keys = []
    reference = Averaged(
        model=Calibrated(model=DoSClassifier(n_features=N_FEATURES, rank=2, seed=4)), interval=7
    )
    for record in records:
        batch, targets, _ = decode_record(record)
        keys.append(batch.values.tobytes())
        X = batch.values.reshape(batch.n_rows, N_FEATURES)
        reference.learn_many(X, np.where(targets == 1, 1.0, -1.0))
    assert len(set(keys)) == len(keys), "a record was logged twice"
    assert set(keys) <= clients.sent, "the log holds a batch nobody sent"
    position = {key: i + 1 for i, key in enumerate(keys)}
    for key, acked_version in clients.acked:
        assert key in position, "an acknowledged batch is missing from the log"
        assert position[key] == acked_version, "learned in another order than logged"
    assert version == len(records)
    expected = reference.get_state()["arrays"]
    assert sorted(state["arrays"]) == sorted(expected)
    for name, array in expected.items():
        if averaged_atol and name.startswith("average."):
            atol = averaged_atol * max(1.0, float(np.abs(array).max()))
            assert np.allclose(state["arrays"][name], array, rtol=0.0, atol=atol), name
        else:
            assert np.array_equal(state["arrays"][name], array), name
    assert len(clients.acked) > 20 and len(records) >= len(clients.acked)


def run_with_kills(service: ServiceProcess, clients: Clients, rng, kills: int, between=None):
    service.start()
    created = httpx.post(f"{service.url}/v1/models", json=SPEC, headers=clients.headers)
    assert created.status_code == 201, created.text
    clients.url = service.url
    clients.start()
    for round_ in range(kills):
        time.sleep(rng.uniform(0.4, 1.2))
        if between is not None:
            between(round_)
        service.kill()
        time.sleep(rng.uniform(0.0, 0.2))
        service.start()
        clients.url = service.url
    time.sleep(0.5)
    clients.stop()


def file_log_service(tmp_path) -> ServiceProcess:
    """A service on the file log under ``tmp_path`` (snapshots/, log/, archive/), snapshotting
    often so that the log is trimmed (and archived) while it runs."""
    return ServiceProcess(
        {
            "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
            "LORENTZTRON_LOG_DIR": str(tmp_path / "log"),
            "LORENTZTRON_LOG_ARCHIVE_DIR": str(tmp_path / "archive"),
            "LORENTZTRON_SNAPSHOT_INTERVAL": "0.3",
            "LORENTZTRON_LOG_SNAPSHOT_RECORDS": "40",
            "LORENTZTRON_LOG_LEVEL": "warning",
        },
        tmp_path / "service.log",
    )


def test_file_log_survives_sigkill(tmp_path):
    snapshots, log, archive = tmp_path / "snapshots", tmp_path / "log", tmp_path / "archive"
    service = file_log_service(tmp_path)
    clients = Clients(4, seed=10)
    try:
        run_with_kills(service, clients, np.random.default_rng(0), kills=4)
        version = httpx.get(f"{service.url}/v1/models/m").json()["version"]
        assert httpx.post(f"{service.url}/v1/models/m/snapshots").status_code == 201
    finally:
        service.kill()
    _, state = decode(LocalStore(snapshots).load("m"))
    records = [r for _, r in FileLog(archive).read_after("m", None)]
    positions = [p for p, _ in FileLog(archive).read_after("m", None)]
    live = list(FileLog(log).read_after("m", None))
    positions += [p for p, _ in live]
    records += [r for _, r in live]
    assert positions == list(range(1, len(records) + 1)), "the log has a gap or a repeat"
    assert list(archive.glob("m/*.log")), "no snapshot trimmed the log during the test"
    check_recovery(records, clients, state, version)


def test_redis_log_survives_sigkill_and_redis_restarts(tmp_path):
    """No snapshot but the model's first during the run (the file-log test covers trimming),
    so the whole stream is there to read at the end, before the final snapshot trims it."""
    redis_server = RedisServer(tmp_path / "redis", appendfsync="always")
    (tmp_path / "redis").mkdir()
    redis_server.start()
    service = ServiceProcess(
        {
            "LORENTZTRON_REDIS_URL": redis_server.url,
            "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
            "LORENTZTRON_LOG_LEVEL": "warning",
        },
        tmp_path / "service.log",
    )
    clients = Clients(4, seed=20)

    def restart_redis(round_: int):
        if round_ % 2 == 0:  # Redis dies under load, then comes back from its AOF
            redis_server.kill()
            time.sleep(0.3)
            redis_server.start()
            time.sleep(0.3)

    try:
        run_with_kills(service, clients, np.random.default_rng(1), kills=4, between=restart_redis)
        version = httpx.get(f"{service.url}/v1/models/m").json()["version"]
        client = redis.Redis.from_url(redis_server.url)
        records = [r for _, r in RedisLog(client).read_after("m", None)]
        client.close()
        assert httpx.post(f"{service.url}/v1/models/m/snapshots").status_code == 201
        store = RedisStore(redis_server.url)
        _, state = decode(store.load("m"))
        store.close()
    finally:
        service.kill()
        redis_server.stop()
    assert clients.refused > 0, "Redis was never down while clients were sending"
    check_recovery(records, clients, state, version)


@pytest.mark.parametrize("fsync", ["batch", "none"])
def test_log_fsync_setting_reaches_the_log(tmp_path, fsync):
    from service.config import Settings
    from service.main import make_log, make_store

    settings = Settings(snapshot_dir=tmp_path, log_fsync=fsync)
    journal = make_log(settings, make_store(settings))
    assert isinstance(journal, FileLog) and journal.fsync == fsync
    assert journal.directory == tmp_path / ".log"
    assert make_log(Settings(snapshot_dir=tmp_path, feedback_log=False), None) is None


def group_state(state: dict) -> tuple[dict, dict, dict]:
    """A snapshot's champion arrays, its challengers' arrays (by name) and its group state
    (``service.model.group``: comparisons, detector, policies, counts)."""
    estimator, service = split_service(state)
    members = {}
    for name, blob in service.get(MEMBERS, {}).get("arrays", {}).items():
        members[name] = split_service(decode(bytes(blob))[1])[0]["arrays"]
    return estimator["arrays"], members, loads(service[GROUP]["arrays"]["state"])


def test_a_model_with_challengers_survives_sigkill_bit_exact(tmp_path):
    """A champion with a challenger, a drift detector and the comparisons between every
    member and variant, learning through SIGKILLs (the file log trimmed by snapshots): the
    recovered group equals, array for array and statistic for statistic, a group that
    learned the logged records in order in this process."""
    from service.config import Settings
    from service.main import create_app
    from tests.service.conftest import TestClient

    snapshots, log, archive = tmp_path / "snapshots", tmp_path / "log", tmp_path / "archive"
    service = file_log_service(tmp_path)
    spec = {**SPEC, "drift": {"detector": "page_hinkley", "params": {"threshold": 5.0}}}
    challenger = {"name": "c1", "kind": "dos", "params": {"rank": 1, "seed": 5}}
    clients = Clients(3, seed=30)
    rng = np.random.default_rng(2)
    try:
        service.start()
        assert httpx.post(f"{service.url}/v1/models", json=spec).status_code == 201
        added = httpx.post(f"{service.url}/v1/models/m/challengers", json=challenger)
        assert added.status_code == 201, added.text
        clients.url = service.url
        clients.start()
        for _ in range(3):
            time.sleep(rng.uniform(0.4, 1.2))
            service.kill()
            service.start()
            clients.url = service.url
        time.sleep(0.5)
        clients.stop()
        info = httpx.get(f"{service.url}/v1/models/m").json()
        assert info["challengers"] == ["c1"]
        assert httpx.post(f"{service.url}/v1/models/m/snapshots").status_code == 201
    finally:
        service.kill()
    assert not clients.unexpected, clients.unexpected[:3]
    _, state = decode(LocalStore(snapshots).load("m"))
    records = [r for _, r in FileLog(archive).read_after("m", None)]
    records += [r for _, r in FileLog(log).read_after("m", None)]
    assert len(clients.acked) > 20 and list(archive.glob("m/*.log"))
    with TestClient(create_app(Settings(snapshot_dir=tmp_path / "reference"))) as client:
        assert client.post("/v1/models", json=spec).status_code == 201
        assert client.post("/v1/models/m/challengers", json=challenger).status_code == 201
        for record in records:
            batch, targets, _ = decode_record(record)
            X = batch.values.reshape(batch.n_rows, N_FEATURES)
            body = [
                {"x": x.tolist(), "label": 1 if t == 1 else -1}
                for x, t in zip(X, targets, strict=True)
            ]
            assert client.post("/v1/models/m/feedback", json={"examples": body}).status_code == 200
        assert client.post("/v1/models/m/snapshots").status_code == 201
    _, expected = decode(LocalStore(tmp_path / "reference").load("m"))
    champion, members, group = group_state(state)
    champion_ref, members_ref, group_ref = group_state(expected)
    assert (
        group["examples"]
        == group_ref["examples"]
        == sum(decode_record(r)[0].n_rows for r in records)
    )
    assert sorted(group["comparisons"]) == ["c1/averaged", "c1/live", "original/averaged"]
    assert group["detector"]["scalars"]["n"] == group["examples"]
    assert group == group_ref
    assert sorted(members) == sorted(members_ref) == ["c1"]
    for arrays, reference in ((champion, champion_ref), (members["c1"], members_ref["c1"])):
        assert sorted(arrays) == sorted(reference)
        for name, array in reference.items():
            assert np.array_equal(arrays[name], array), name
