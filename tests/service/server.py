"""The roles deployment as real subprocesses for the tests: a learner and api replicas over one
Redis (the processes themselves: :class:`benchmarks.servers.ServiceProcess`)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.servers import ServiceProcess


def roles(redis_url: str, directory: Path, replicas: int = 2, env: dict | None = None):
    """A learner and ``replicas`` api replicas (not started) against one Redis, publishing
    and polling quickly, each logging to a file in ``directory``; ``env``: more variables
    for all of them."""
    common = {
        "LORENTZTRON_REDIS_URL": redis_url,
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.5",
        "LORENTZTRON_LOG_LEVEL": "warning",
        **(env or {}),
    }
    learner = ServiceProcess({**common, "LORENTZTRON_ROLE": "learner"}, directory / "learner.log")
    apis = [
        ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, directory / f"api{i}.log")
        for i in range(replicas)
    ]
    return learner, apis
