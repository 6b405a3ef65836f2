"""Servers in subprocesses on free loopback ports, for the benchmarks and the tests: the service
(``python -m service.ops.cli serve``, or another server command), and redis-server.

One implementation for everything that starts them, so that killing, pausing, restarting on
the same port and waiting for readiness behave the same in a test and in a measurement.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
#: the service as deployed; ``--port N`` is appended
SERVE = (sys.executable, "-m", "service.ops.cli", "serve")


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(
    url: str,
    timeout: float = 120.0,
    process: subprocess.Popen | None = None,
    period: float = 0.05,
) -> float:
    """Seconds until ``url/readyz`` answers 200, asked every ``period`` seconds (the
    benchmarks that time start-ups ask more often). RuntimeError after ``timeout`` seconds,
    or as soon as ``process`` (the server, when it is ours) has exited."""
    started = time.monotonic()
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url} exited with code {process.poll()} before it was ready")
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{url} was not ready after {timeout:g} s")
        time.sleep(period)


class ServiceProcess:
    """The service (or ``command``, a server taking ``--port N``) in a subprocess.

    ``env`` is laid over this process's environment (None removes a variable), with one BLAS
    thread unless ``one_blas_thread`` is false (several servers and their load share a small
    machine); output goes to ``log_path`` (appended: restarts add to it) or nowhere; ``cpus``
    pins the server to those CPUs. Each ``launch`` takes a free port unless given one (a
    restart on the same port: ``start(port=...)``). As a context manager it is stopped on
    exit: ``with ServiceProcess(env).start() as server: ...``.
    """

    def __init__(
        self,
        env: dict[str, str | None] | None = None,
        log_path: Path | None = None,
        *,
        command: Sequence[str] = SERVE,
        cpus: set[int] | None = None,
        one_blas_thread: bool = True,
    ):
        blas = {"OPENBLAS_NUM_THREADS": "1"} if one_blas_thread else {}
        merged = {**os.environ, **blas, **(env or {})}
        self.env = {name: value for name, value in merged.items() if value is not None}
        self.log_path = log_path
        self.command = list(command)
        self.cpus = cpus
        self.process: subprocess.Popen | None = None
        self.url = ""
        self._log = None

    def start(self, timeout: float = 120.0, port: int | None = None) -> ServiceProcess:
        """Launch and wait until ready (killed if it is not)."""
        self.launch(port)
        try:
            return self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def launch(self, port: int | None = None) -> ServiceProcess:
        """Start the process without waiting for it (``wait_ready``)."""
        port = port or free_port()
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        output = self._log or subprocess.DEVNULL
        cpus = self.cpus
        self.process = subprocess.Popen(
            [*self.command, "--port", str(port)],
            env=self.env,
            cwd=ROOT,
            stdout=output,
            stderr=output,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        self.url = f"http://127.0.0.1:{port}"
        return self

    def wait_ready(self, timeout: float = 120.0) -> ServiceProcess:
        """Wait until ``/readyz`` answers 200 (RuntimeError, naming the log, if it does not)."""
        try:
            wait_ready(self.url, timeout, self.process)
        except RuntimeError as error:
            if self.log_path is None:
                raise
            raise RuntimeError(f"{error}; its log: {self.log_path}") from None
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server so far (Linux ``/proc``)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs (no final snapshot, no flush)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self._forget()

    def pause(self) -> None:
        """SIGSTOP: the process (every thread of it) stops where it is, holding its state."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (the shutdown hooks run), then wait for it."""
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
            self._forget()

    def _forget(self) -> None:
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_all(processes: Iterable[ServiceProcess]) -> None:
    """Start several servers at once (their start-ups overlap) and wait until all are ready."""
    processes = list(processes)
    for process in processes:
        process.launch()
    for process in processes:
        process.wait_ready()


def stop_all(processes: Iterable[ServiceProcess]) -> None:
    """Stop several servers at once: SIGTERM to each, then wait for each."""
    processes = list(processes)
    for process in processes:
        if process.process is not None:
            process.process.terminate()
    for process in processes:
        process.reap()


class RedisServer:
    """A real redis-server on a free loopback port (the same one across restarts), in its own
    directory; with an append-only file synced ``appendfsync`` when given. As a context
    manager it is stopped on exit: ``with RedisServer(directory).start() as redis_server:``."""

    def __init__(self, directory: Path, appendfsync: str | None = None):
        self.directory = directory
        self.port = free_port()
        self.appendfsync = appendfsync
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start it and wait until it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        args = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
            "--save", "", "--daemonize", "no", "--logfile", "",
        ]  # fmt: skip
        if self.appendfsync:
            args += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        self.kill()
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: Redis keeps only what its append-only file has on disk."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
