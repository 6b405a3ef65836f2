"""Sharded learners with failover, as separate processes on loopback: three learners and
two api replicas on one Redis, and again on a three-master Redis Cluster; 30 models,
feedback from several threads through the replicas, one learner SIGKILLed and another
SIGSTOPped past its lease, then resumed.

Checked (``tests.service.fleet.check_models``): every acknowledged example is in its
model's log, and the final published models equal, array for array, an in-process replay
of the whole log; every model's fenced writes came from one lease after the other (tokens
never go back: no model was written by two learners at once). And: new models are placed
ten per learner; the killed learner's models are taken over within twice the lease TTL;
the paused learner lost its leases, and once resumed gets half of the models handed over
(the rebalance of a learner that joins); the replicas converge to the published versions.
"""

from __future__ import annotations

import re
import time

import httpx
import redis

from benchmarks.servers import RedisServer, ServiceProcess, start_all, stop_all
from service.scale.keys import RedisKeys
from tests.service.cluster import RedisClusterNodes
from tests.service.conftest import wait_for
from tests.service.fleet import Feedback, check_models, published, spec

PREFIX = "shard"
TTL = 3.0
N_MODELS = 30
NAMES = [spec(i)["name"] for i in range(N_MODELS)]


def owners(client, keys: RedisKeys) -> dict[str, str | None]:
    values = [client.get(keys.lease(name)) for name in NAMES]
    return {
        name: None if value is None else value.decode().rsplit(" ", 1)[0]
        for name, value in zip(NAMES, values, strict=True)
    }


def learner_ids(client, keys: RedisKeys, learners: list[ServiceProcess]) -> list[str]:
    """Each learner process's id (ids hold the pid)."""
    ids = [m.decode() for m in client.zrange(keys.learners, 0, -1)]
    return [next(i for i in ids if f"-{p.process.pid}-" in i) for p in learners]


def takeover_times(client, keys: RedisKeys, names: list[str], gone: str) -> dict[str, float]:
    """Seconds until each model of a learner that just died or stopped has another owner."""
    started, times = time.monotonic(), {}

    def taken() -> bool:
        now = owners(client, keys)
        for name in names:
            if name not in times and now[name] not in (None, gone):
                times[name] = time.monotonic() - started
        return len(times) == len(names)

    wait_for(taken, timeout=4 * TTL, period=0.05)
    return times


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
        start_all((*learners, *replicas))
        urls = [r.url for r in replicas]
        for i in range(N_MODELS):
            response = httpx.post(f"{urls[i % 2]}/v1/models", json=spec(i), timeout=30)
            assert response.status_code == 201, response.text
        ids = learner_ids(client, keys, learners)
        wait_for(
            lambda: (
                sorted(list(owners(client, keys).values()).count(i) for i in ids) == [10, 10, 10]
            ),
            timeout=30,
        )

        feedback = Feedback(urls, N_MODELS).start()
        time.sleep(2)
        killed = [name for name, owner in owners(client, keys).items() if owner == ids[0]]
        learners[0].kill()
        # taken over (restored, learning) within twice the lease TTL
        assert max(takeover_times(client, keys, killed, ids[0]).values()) < 2 * TTL

        paused = [name for name, owner in owners(client, keys).items() if owner == ids[1]]
        learners[1].pause()
        times = takeover_times(client, keys, paused, ids[1])
        assert max(times.values()) < 2 * TTL and {owners(client, keys)[n] for n in paused} == {
            ids[2]
        }
        time.sleep(0.5)
        learners[1].resume()
        # the resumed learner lost its models; it gets its share back, handed over under load
        wait_for(
            lambda: (
                sorted(list(owners(client, keys).values()).count(i) for i in ids[1:]) == [15, 15]
            ),
            timeout=60,
            period=0.2,
        )
        feedback.stop()
        assert feedback.count > 100, (feedback.count, feedback.refused)

        wait_for(lambda: published(client, keys, NAMES), timeout=60)
        metrics = httpx.get(f"{learners[1].url}/metrics", timeout=10).text
        losses = re.search(r"^lorentztron_lease_losses_total (\S+)$", metrics, re.M)
        assert losses and float(losses.group(1)) >= len(paused)
        taken_metrics = httpx.get(f"{learners[2].url}/metrics", timeout=10).text
        assert re.search(r"^lorentztron_takeover_seconds_count [1-9]", taken_metrics, re.M)

        check_models(client, keys, feedback.acknowledged)

        def converged() -> bool:
            for replica in replicas:
                for name in NAMES:
                    answer = httpx.get(f"{replica.url}/v1/models/{name}", timeout=10)
                    if answer.json()["version"] != int(client.get(keys.latest(name))):
                        return False
            return True

        wait_for(converged, timeout=30, period=0.5)
    finally:
        if feedback is not None:
            feedback.stop()
        if learners[1].process is not None:
            learners[1].resume()
        stop_all((*replicas, *learners))
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
