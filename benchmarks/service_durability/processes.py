"""The processes of the durability measurements: servers, Redis and the load generator, each
started on a free port and stopped when its block ends."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.environment import ROOT

LOADGEN = ROOT / "deploy" / "loadtest" / "loadgen.py"
#: the model every measurement serves (DoS over hashed features)
MODEL = {"kind": "dos", "rank": 16, "n_features": 1 << 18, "nnz": 30}


def free_port() -> int:
    """A free local TCP port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    """A subprocess as a context manager: started on entry, SIGTERM (then kill) on exit."""

    def __init__(self, args, env=None):
        self.args, self.env = args, env

    def __enter__(self):
        self.process = subprocess.Popen(
            self.args,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **(self.env or {})},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def service(env: dict) -> tuple[Process, str]:
    """A server (``service.ops.cli serve``) on a free port with ``env``, and its URL."""
    port = free_port()
    env = {"LORENTZTRON_LOG_LEVEL": "warning", "LORENTZTRON_SNAPSHOT_INTERVAL": "3600", **env}
    cli = [sys.executable, "-m", "service.ops.cli", "serve", "--port", str(port)]
    return Process(cli, env), f"http://127.0.0.1:{port}"


def wait_ready(url: str, timeout: float = 120.0) -> float:
    """Seconds until ``/readyz`` answers 200."""
    started = time.monotonic()
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{url} not ready")
        time.sleep(0.02)


def redis_server(directory: Path, appendfsync: str) -> tuple[Process, str]:
    """A redis-server with an append-only file in ``directory``, and its URL."""
    port = free_port()
    args = [
        shutil.which("redis-server") or "redis-server",
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
        "--appendonly", "yes", "--appendfsync", appendfsync,
    ]  # fmt: skip
    return Process(args), f"redis://127.0.0.1:{port}/0"


def wait_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
    for _ in range(200):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis did not start")


def loadgen(url: str, mode: str, duration: float, extra: list[str] | None = None) -> dict:
    """One run of the load generator against ``url``; its JSON summary."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [
            sys.executable, str(LOADGEN), "--url", url, "--mode", mode, "--client", "raw",
            "--duration", str(duration), "--warmup", "1", "--kind", MODEL["kind"],
            "--rank", str(MODEL["rank"]), "--n-features", str(MODEL["n_features"]),
            "--nnz", str(MODEL["nnz"]), "--json", out.name, *(extra or []),
        ]  # fmt: skip
        subprocess.run(args, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


@contextlib.contextmanager
def learner_and_replica(directory: Path, rank: int, n_features: int, env: dict | None = None):
    """Redis, one learner and one api replica, and a DoS model "m" of ``rank`` over
    ``n_features`` hashed features that the learner has taken: yields (learner, api) URLs."""
    redis_process, redis_url = redis_server(directory, "everysec")
    with redis_process:
        wait_redis(redis_url)
        env = {"LORENTZTRON_REDIS_URL": redis_url, **(env or {})}
        learner, learner_url = service({**env, "LORENTZTRON_ROLE": "learner"})
        api, api_url = service({**env, "LORENTZTRON_ROLE": "api"})
        with learner, api:
            wait_ready(learner_url)
            wait_ready(api_url)
            spec = {
                "name": "m",
                "kind": "dos",
                "params": {"rank": rank},
                "input": {"hashed": n_features},
            }
            assert httpx.post(f"{api_url}/v1/models", json=spec, timeout=60).status_code == 201
            deadline = time.monotonic() + 60
            while httpx.get(f"{learner_url}/v1/models/m").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            yield learner_url, api_url
