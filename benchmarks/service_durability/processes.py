"""The processes of the durability measurements: servers (:mod:`benchmarks.servers`) as the
measurements configure them, a learner and a replica over Redis, and the load generator."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.servers import ROOT, RedisServer, ServiceProcess, start_all

#: the load generator (``python -m deploy.loadtest.loadgen``), run from the repository root
LOADGEN = (sys.executable, "-m", "deploy.loadtest.loadgen")
#: the model every measurement serves (DoS over hashed features)
MODEL = {"kind": "dos", "rank": 16, "n_features": 1 << 18, "nnz": 30}


def service(env: dict, log_path: Path | None = None) -> ServiceProcess:
    """A server (``service.ops.cli serve``, not started) with ``env``, logging warnings only
    (to ``log_path``, or nowhere) and snapshotting hourly (not during a measurement)."""
    return ServiceProcess(
        {"LORENTZTRON_LOG_LEVEL": "warning", "LORENTZTRON_SNAPSHOT_INTERVAL": "3600", **env},
        log_path,
    )


def loadgen(url: str, mode: str, duration: float, extra: list[str] | None = None) -> dict:
    """One run of the load generator against ``url``; its JSON summary."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [
            *LOADGEN, "--url", url, "--mode", mode, "--client", "raw",
            "--duration", str(duration), "--warmup", "1", "--kind", MODEL["kind"],
            "--rank", str(MODEL["rank"]), "--n-features", str(MODEL["n_features"]),
            "--nnz", str(MODEL["nnz"]), "--json", out.name, *(extra or []),
        ]  # fmt: skip
        subprocess.run(args, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


@contextlib.contextmanager
def learner_and_replica(
    directory: Path, rank: int, n_features: int, env: dict | None = None, logs: Path | None = None
):
    """Redis, one learner and one api replica, and a DoS model "m" of ``rank`` over
    ``n_features`` hashed features that the learner has taken: yields the (learner, api,
    Redis) URLs. With ``logs``, the learner's and the replica's output go to
    ``learner.log`` and ``api.log`` there."""
    with RedisServer(directory, appendfsync="everysec").start() as redis_server:
        env = {"LORENTZTRON_REDIS_URL": redis_server.url, **(env or {})}
        learner = service(
            {**env, "LORENTZTRON_ROLE": "learner"}, logs / "learner.log" if logs else None
        )
        api = service({**env, "LORENTZTRON_ROLE": "api"}, logs / "api.log" if logs else None)
        with learner, api:
            start_all((learner, api))
            spec = {
                "name": "m",
                "kind": "dos",
                "params": {"rank": rank},
                "input": {"hashed": n_features},
            }
            assert httpx.post(f"{api.url}/v1/models", json=spec, timeout=60).status_code == 201
            deadline = time.monotonic() + 60
            while httpx.get(f"{learner.url}/v1/models/m").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            yield learner.url, api.url, redis_server.url
