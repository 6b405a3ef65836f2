"""A real Redis Cluster on loopback ports for the tests: ``redis-server --cluster-enabled
yes`` nodes joined by ``redis-cli --cluster create``, with AOF ``appendfsync always``."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from benchmarks.servers import free_port


class RedisClusterNodes:
    """``masters`` masters, each with ``replicas`` replicas, in ``directory``."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 0):
        self.directory = directory
        self.masters = masters
        self.replicas = replicas
        self.ports = [_data_port() for _ in range(masters * (1 + replicas))]
        self.processes: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, timeout: float = 30.0) -> RedisClusterNodes:
        """Start the nodes and join them (every node stopped if that fails)."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> RedisClusterNodes:
        binary = shutil.which("redis-server")
        cli = shutil.which("redis-cli")
        if binary is None or cli is None:
            pytest.fail("redis-server is not installed (make test installs it with apt-get)")
        for port in self.ports:
            folder = self.directory / f"node-{port}"
            folder.mkdir(parents=True, exist_ok=True)
            self.processes[port] = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(folder),
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    str(free_port()),
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                    "--logfile",
                    "redis.log",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        for port in self.ports:
            _wait_ping(port, timeout)
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
        self.wait_ok(timeout)
        return self

    def live_ports(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every live node says the cluster is ok and has its masters' slots."""
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for port in self.live_ports():
                try:
                    client = redis.Redis(port=port, socket_timeout=1)
                    info = client.cluster("info")
                    client.close()
                    states.append(info.get("cluster_state") == "ok")
                except redis.RedisError:
                    states.append(False)
            if states and all(states):
                return
            assert time.monotonic() < deadline, "the Redis Cluster did not become ok"
            time.sleep(0.1)

    def master_of(self, key: str) -> int | None:
        """The port of the master serving ``key``'s slot, as a live node sees it (None: no
        master serves it, as for a moment during a failover)."""
        client = redis.Redis(port=self.live_ports()[0], socket_timeout=1)
        try:
            slot = client.cluster("keyslot", key)
            for start, end, master, *_ in client.cluster("slots"):
                if start <= slot <= end:
                    return int(master[1])
            return None
        finally:
            client.close()

    def wait_promoted(self, key: str, timeout: float = 30.0) -> int:
        """Until a live node serves ``key``'s slot and the cluster is ok; its port."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                port = self.master_of(key)
                if port is not None and port in self.live_ports():
                    self.wait_ok(timeout)
                    return port
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline, "no replica was promoted"
            time.sleep(0.1)

    def kill(self, port: int) -> None:
        """SIGKILL one node: it keeps only what its append-only file has on disk."""
        process = self.processes[port]
        process.kill()
        process.wait(timeout=10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _data_port() -> int:
    """A free port Redis accepts in a cluster (at most 55535, whatever the bus port)."""
    while True:
        port = free_port()
        if port <= 55535:
            return port


def _wait_ping(port: int, timeout: float) -> None:
    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, f"redis-server on port {port} did not start"
            time.sleep(0.05)
    client.close()
