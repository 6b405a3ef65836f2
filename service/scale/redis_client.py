"""The Redis client: one server, or a Redis Cluster found from any of its nodes."""

from __future__ import annotations


def redis_client(url: str, cluster: bool = False, timeout: float = 2.0):
    """A Redis client: one server, or a Redis Cluster found from any of its nodes. Short
    socket timeouts, so that an outage fails fast and the worker retries."""
    import redis
    from redis.cluster import RedisCluster

    options = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if cluster:
        return RedisCluster.from_url(url, **options)
    return redis.Redis.from_url(url, **options)


def refresh_topology(client) -> None:
    """After an error on a Redis Cluster, learn its topology again (a failover moves a
    master's slots to its promoted replica); nothing for one server."""
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:
        try:
            manager.initialize()
        except Exception:  # the cluster is still failing over: the next error retries
            pass
