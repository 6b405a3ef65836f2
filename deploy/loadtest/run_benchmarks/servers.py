"""The servers under measurement: the service as deployed and the bare FastAPI baseline,
each a subprocess on a free loopback port with its log in the run's directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.servers import ROOT, SERVE, ServiceProcess

#: the server processes: the service as deployed, and the bare FastAPI baseline
COMMANDS = {
    "service": SERVE,
    "bare": (sys.executable, "-m", "deploy.loadtest.bare_app"),
}


def server(
    name: str,
    directory: Path,
    log_level: str,
    cpus: set[int] | None,
    extra_env: dict[str, str] | None = None,
) -> ServiceProcess:
    """The server ``name`` (of :data:`COMMANDS`), not started: local snapshots in
    ``directory`` every hour (none during the runs), its log in ``directory/NAME.log``, on
    ``cpus``, in this process's environment with ``extra_env`` (BLAS threads included: set
    them there)."""
    env = {
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache")),
        "LORENTZTRON_SNAPSHOT_DIR": str(directory / "snapshots"),
        "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
        "LORENTZTRON_LOG_LEVEL": log_level,
        "LORENTZTRON_REDIS_URL": None,  # local snapshots
        **(extra_env or {}),
    }
    return ServiceProcess(
        env,
        directory / f"{name}.log",
        command=COMMANDS[name],
        cpus=cpus,
        one_blas_thread=False,
    )
