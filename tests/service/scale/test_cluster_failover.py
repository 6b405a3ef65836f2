"""A Redis Cluster master SIGKILLed under load, its replica promoted: with
``appendfsync always`` on every node and ``LORENTZTRON_REDIS_WAIT_REPLICAS=1`` (an append
is acknowledged once the master's replica has it), every acknowledged example survives in
the promoted replica's log and in the final model. Requests that reached the dead master
before the promotion are refused (503: not acknowledged; such a record may or may not be
in the log, and if it is, it is learned like any other)."""

from __future__ import annotations

import time

import httpx
import redis

from benchmarks.servers import ServiceProcess, start_all, stop_all
from service.scale.keys import RedisKeys
from tests.service.cluster import RedisClusterNodes
from tests.service.conftest import wait_for
from tests.service.fleet import Feedback, check_models, published, spec

PREFIX = "failover"
N_MODELS = 6
NAMES = [spec(i)["name"] for i in range(N_MODELS)]


def test_a_master_killed_under_load(tmp_path):
    nodes = RedisClusterNodes(tmp_path / "cluster", masters=3, replicas=1).start()
    common = {
        "LORENTZTRON_REDIS_URL": nodes.url,
        "LORENTZTRON_REDIS_CLUSTER": "true",
        "LORENTZTRON_REDIS_WAIT_REPLICAS": "1",
        "LORENTZTRON_REDIS_PREFIX": PREFIX,
        "LORENTZTRON_LEASE_TTL": "5",
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_SNAPSHOT_INTERVAL": "1",
        "LORENTZTRON_POLL_INTERVAL": "0.5",
        "LORENTZTRON_LOG_TRIM": "false",
        "LORENTZTRON_LOG_LEVEL": "warning",
    }
    keys = RedisKeys(PREFIX)
    learner = ServiceProcess({**common, "LORENTZTRON_ROLE": "learner"}, tmp_path / "learner.log")
    api = ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, tmp_path / "api.log")
    feedback = None
    client = None
    try:
        start_all((learner, api))
        for i in range(N_MODELS):
            response = httpx.post(f"{api.url}/v1/models", json=spec(i), timeout=30)
            assert response.status_code == 201, response.text
        feedback = Feedback([api.url], N_MODELS, threads=3).start()
        time.sleep(2)
        victim = nodes.master_of(keys.log(NAMES[0]))
        assert victim is not None  # (the cluster is ok: every slot has its master)
        before = feedback.count
        nodes.kill(victim)
        assert nodes.wait_promoted(keys.log(NAMES[0])) != victim
        wait_for(lambda: feedback.count > before + 50, timeout=30)
        feedback.stop()

        client = redis.RedisCluster(host="127.0.0.1", port=nodes.live_ports()[0])
        wait_for(lambda: published(client, keys, NAMES), timeout=60)
        check_models(client, keys, feedback.acknowledged)
    finally:
        if feedback is not None:
            feedback.stop()
        stop_all((api, learner))
        if client is not None:
            client.close()
        nodes.stop()
