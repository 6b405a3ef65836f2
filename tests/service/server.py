"""The service as a real subprocess (``python -m service.ops.cli serve``) on a free port, for
tests that kill it, restart it or run several of them (roles)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


class ServiceProcess:
    def __init__(self, env: dict[str, str], log_path: Path | None = None):
        self.env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **env}
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 90.0, port: int | None = None) -> ServiceProcess:
        return self.launch(port).wait_ready(timeout)

    def launch(self, port: int | None = None) -> ServiceProcess:
        """Start the process without waiting for it (``wait_ready``)."""
        port = port or free_port()
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service.ops.cli", "serve", "--port", str(port)],
            env=self.env,
            cwd=ROOT,
            stdout=output,
            stderr=output,
        )
        self.url = f"http://127.0.0.1:{port}"
        return self

    def wait_ready(self, timeout: float = 90.0) -> ServiceProcess:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"the service did not become ready (exit code {self.process.poll()})"
                )
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs (no final snapshot, no flush)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None

    def pause(self) -> None:
        """SIGSTOP: the process (every thread of it) stops where it is, holding its state."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.reap()

    def reap(self) -> None:
        """Wait for a process told to stop (SIGKILL after 20 s)."""
        if self.process is not None:
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def start_all(processes) -> None:
    """Start several services at once (their start-ups overlap) and wait until all are ready."""
    for process in processes:
        process.launch()
    for process in processes:
        process.wait_ready()


def stop_all(processes) -> None:
    """Stop several services at once: SIGTERM to each, then wait for each."""
    for process in processes:
        if process.process is not None:
            process.process.terminate()
    for process in processes:
        process.reap()


def roles(redis_url: str, directory: Path, replicas: int = 2):
    """A learner and ``replicas`` api replicas (not started) against one Redis, publishing
    and polling quickly, each logging to a file in ``directory``."""
    common = {
        "LORENTZTRON_REDIS_URL": redis_url,
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.5",
        "LORENTZTRON_LOG_LEVEL": "warning",
    }
    learner = ServiceProcess({**common, "LORENTZTRON_ROLE": "learner"}, directory / "learner.log")
    apis = [
        ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, directory / f"api{i}.log")
        for i in range(replicas)
    ]
    return learner, apis
