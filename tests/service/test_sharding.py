"""Sharded learners with failover, as separate processes on loopback: three learners and
two api replicas on one Redis, and again on a three-master Redis Cluster; 30 models,
feedback from several threads through the replicas, one learner SIGKILLed and another
SIGSTOPped past its lease, then resumed.

Checked: every acknowledged example is in its model's log, and the final published models
equal, array for array, an in-process replay of the whole log; every model's fenced
writes came from one lease after the other (tokens never go back: no model was written by
two learners at once); the killed learner's models were taken over within twice the lease
TTL; the paused learner lost its leases; the replicas converge to the published versions.
"""

from __future__ import annotations

import random
import re
import sys
import threading
import time

import httpx
import numpy as np
import redis

from service.feedback_log import decode_record
from service.keys import RedisKeys
from service.kinds import Limits, build, plan
from service.live import LiveModel
from service.schemas import spec_from_json
from service.store import decode
from tests.service.cluster import RedisClusterNodes
from tests.service.conftest import RedisServer, wait_for
from tests.service.server import ServiceProcess

PREFIX = "shard"
TTL = 3.0
N_MODELS = 30
N_FEATURES = 6


def spec(i: int) -> dict:
    return {
        "name": f"m{i:02d}",
        "kind": "dos",
        "params": {"rank": 2, "seed": i},
        "input": {"n_features": N_FEATURES},
        "averaging": {"interval": 4},
    }


class Feedback:
    """Threads posting small feedback batches to random models through random replicas;
    what was acknowledged (200) is kept per model."""

    def __init__(self, urls: list[str], threads: int = 4):
        self.urls = urls
        self.acknowledged: dict[str, list] = {spec(i)["name"]: [] for i in range(N_MODELS)}
        self.refused = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(seed,), daemon=True) for seed in range(threads)
        ]

    def start(self) -> Feedback:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        pick = random.Random(seed)
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                name = f"m{pick.randrange(N_MODELS):02d}"
                X = np.round(rng.standard_normal((2, N_FEATURES)), 3)
                examples = [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]
                try:
                    response = client.post(
                        f"{pick.choice(self.urls)}/v1/models/{name}/feedback",
                        json={"examples": examples},
                    )
                except httpx.HTTPError:
                    response = None
                with self._lock:
                    if response is not None and response.status_code == 200:
                        self.acknowledged[name].extend(
                            (tuple(e["x"]), e["label"]) for e in examples
                        )
                    else:
                        self.refused += 1


def owners(client, keys: RedisKeys) -> dict[str, str | None]:
    result = {}
    for i in range(N_MODELS):
        value = client.get(keys.lease(spec(i)["name"]))
        result[spec(i)["name"]] = None if value is None else value.decode().rsplit(" ", 1)[0]
    return result


def learner_ids(client, keys: RedisKeys, learners: list[ServiceProcess]) -> list[str]:
    """Each learner process's id (its lease values carry it; ids hold the pid)."""
    ids = [m.decode() for m in client.zrange(keys.learners, 0, -1)]
    return [next(i for i in ids if f"-{p.process.pid}-" in i) for p in learners]


def replayed(name: str, header: dict, records: list[bytes]) -> LiveModel:
    """The model rebuilt in this process from its create request and its whole log."""
    model_spec = spec_from_json(header["spec"])
    checked = plan(model_spec, Limits(sys.maxsize, sys.maxsize, 50_000))
    live = LiveModel(name, model_spec, checked, build(checked), 1000)
    live.replay((str(i), record) for i, record in enumerate(records, start=1))
    return live


def run_scenario(tmp_path, url: str, cluster: bool) -> None:
    common = {
        "LORENTZTRON_REDIS_URL": url,
        "LORENTZTRON_REDIS_CLUSTER": "true" if cluster else "false",
        "LORENTZTRON_REDIS_PREFIX": PREFIX,
        "LORENTZTRON_LEASE_TTL": str(TTL),
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.5",
        "LORENTZTRON_SNAPSHOT_INTERVAL": "2",
        "LORENTZTRON_LOG_TRIM": "false",
        "LORENTZTRON_LOG_LEVEL": "warning",
    }
    keys = RedisKeys(PREFIX)
    client = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    learners = [
        ServiceProcess({**common, "LORENTZTRON_ROLE": "learner"}, tmp_path / f"learner{i}.log")
        for i in range(3)
    ]
    replicas = [
        ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, tmp_path / f"api{i}.log")
        for i in range(2)
    ]
    feedback = None
    try:
        for process in (*learners, *replicas):
            process.start()
        urls = [r.url for r in replicas]
        for i in range(N_MODELS):
            response = httpx.post(f"{urls[i % 2]}/v1/models", json=spec(i), timeout=30)
            assert response.status_code == 201, response.text
        ids = learner_ids(client, keys, learners)
        # placed on the least-loaded learner: ten each
        wait_for(
            lambda: (
                sorted(list(owners(client, keys).values()).count(i) for i in ids) == [10, 10, 10]
            ),
            timeout=30,
        )

        feedback = Feedback(urls).start()
        time.sleep(2)
        killed = [name for name, owner in owners(client, keys).items() if owner == ids[0]]
        learners[0].kill()
        killed_at = time.monotonic()
        taken_at = {}

        def taken() -> bool:
            now_owners = owners(client, keys)
            for name in killed:
                if name not in taken_at and now_owners[name] not in (None, ids[0]):
                    taken_at[name] = time.monotonic() - killed_at
            return len(taken_at) == len(killed)

        wait_for(taken, timeout=4 * TTL, period=0.05)
        # taken over (restored, learning) within twice the lease TTL of the kill
        assert max(taken_at.values()) < 2 * TTL, taken_at

        paused = [name for name, owner in owners(client, keys).items() if owner == ids[1]]
        learners[1].pause()
        wait_for(
            lambda: all(owners(client, keys)[name] == ids[2] for name in paused),
            timeout=4 * TTL,
        )
        time.sleep(0.5)
        learners[1].resume()
        time.sleep(2)
        feedback.stop()

        # every logged record learned and published; the resumed learner lost its leases
        def published() -> bool:
            for i in range(N_MODELS):
                name = spec(i)["name"]
                latest = client.get(keys.latest(name))
                if latest is None or int(latest) != client.xlen(keys.log(name)):
                    return False
            return True

        wait_for(published, timeout=60)
        metrics = httpx.get(f"{learners[1].url}/metrics", timeout=10).text
        losses = re.search(r"^lorentztron_lease_losses_total (\S+)$", metrics, re.M)
        assert losses and float(losses.group(1)) >= len(paused)
        taken_metrics = httpx.get(f"{learners[2].url}/metrics", timeout=10).text
        assert re.search(r"^lorentztron_takeover_seconds_count [1-9]", taken_metrics, re.M)

        acknowledged = sum(len(v) for v in feedback.acknowledged.values())
        assert acknowledged > 100, (acknowledged, feedback.refused)
        for i in range(N_MODELS):
            name = spec(i)["name"]
            entries = client.xrange(keys.log(name))
            records = [fields[b"r"] for _, fields in entries]
            logged = []
            for record in records:
                batch, targets, _ = decode_record(record)
                dense = np.zeros((batch.n_rows, N_FEATURES))
                for row in range(batch.n_rows):
                    span = slice(batch.indptr[row], batch.indptr[row + 1])
                    dense[row, batch.indices[span]] = batch.values[span]
                logged += [
                    (tuple(x), 1 if t == 1 else -1) for x, t in zip(dense, targets, strict=True)
                ]
            missing = set(feedback.acknowledged[name]) - set(logged)
            assert not missing, (name, len(missing))

            header, state = decode(
                client.get(keys.snapshot(name, int(client.get(keys.latest(name)))))
            )
            assert header["version"] == len(records)
            live = replayed(name, header, records)
            mine = live.estimator.get_state()["arrays"]
            assert set(mine) == set(state["arrays"])
            for array, values in mine.items():
                np.testing.assert_array_equal(state["arrays"][array], values, err_msg=array)

            # fenced writes: one lease after the other, each token of one learner
            tokens = []
            for _, fields in client.xrange(keys.writes(name)):
                learner, token = fields[b"lease"].decode().rsplit(" ", 1)
                tokens.append((int(token), learner))
            assert tokens == sorted(tokens), name
            assert len({t for t, _ in tokens}) == len(set(tokens)), name

        # replicas converge to the published versions
        def converged() -> bool:
            for replica in replicas:
                for i in range(N_MODELS):
                    name = spec(i)["name"]
                    answer = httpx.get(f"{replica.url}/v1/models/{name}", timeout=10)
                    if answer.json()["version"] != int(client.get(keys.latest(name))):
                        return False
            return True

        wait_for(converged, timeout=30, period=0.5)
    finally:
        if feedback is not None:
            feedback.stop()
        for process in (*replicas, *learners):
            try:
                process.resume() if process.process is not None else None
            except Exception:
                pass
            process.stop()
        client.close()


def test_sharded_learners_on_one_redis(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    try:
        run_scenario(tmp_path, server.url, cluster=False)
    finally:
        server.stop()


def test_sharded_learners_on_a_redis_cluster(tmp_path):
    nodes = RedisClusterNodes(tmp_path / "cluster", masters=3).start()
    try:
        run_scenario(tmp_path, nodes.url, cluster=True)
    finally:
        nodes.stop()
