"""``lorentztron serve --workers N``: N HTTP processes behind one port, under one supervisor.

The roles deployment (``service.scale.roles``) on one host, started as one command: the
supervising process binds the port once and starts N api replicas (``ROLE=api``) that
inherit the listening socket, so the kernel spreads connections over them, and, for the
``all`` role, one learner (``ROLE=learner``, on a unix socket of its own beside the
metrics). Every guarantee is the roles deployment's: one writer per model (the learner's
lease and fencing), feedback acknowledged once it is in the model's Redis log, keyed
retries answered once (the answer stored beside the log, in the append's script), versions
loaded whole. A child that dies is started again (after a backoff when it keeps dying);
SIGTERM or SIGINT stops the api processes first (in-flight requests finish), then the
learner (its models handed over or snapshotted, as on any learner's SIGTERM).

Without Redis there is no log the processes can share: more than one worker is refused.
Metrics: every child writes its values to files under ``PROMETHEUS_MULTIPROC_DIR`` (one
directory per role, ``service.ops.multiprocess``), which any api process reads at a scrape.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import logging.config
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

log = logging.getLogger("lorentztron.workers")

#: the factory every child serves
APP = "service.main:create_app"
#: connections the kernel queues for the api processes to accept
BACKLOG = 2048
#: seconds a child must live for its next death to be restarted without backoff
STABLE_SECONDS = 10.0
#: restart delays of a child that keeps dying (then the last one, again and again)
BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0)
#: seconds each group of children (api processes, then the learner) has to stop on SIGTERM
#: before it is killed; under compose's ``stop_grace_period`` (30 s)
STOP_TIMEOUT = 25.0
#: Linux ``prctl(PR_SET_PDEATHSIG)``: a child is sent SIGTERM when its supervisor dies
PR_SET_PDEATHSIG = 1


def check(settings) -> None:
    """ValueError (one line, naming the variable) when ``settings.workers`` cannot be run."""
    if settings.workers == 1:
        return
    if not settings.redis_url:
        raise ValueError(
            f"--workers {settings.workers} (LORENTZTRON_WORKERS) needs LORENTZTRON_REDIS_URL: "
            "the worker processes share the feedback log, snapshots and leases through Redis "
            "(without it, run one process per port)"
        )
    if not settings.feedback_log:
        raise ValueError(
            "--workers above 1 needs the feedback log (LORENTZTRON_FEEDBACK_LOG=true): the api "
            "processes acknowledge feedback once it is in the log the learner reads"
        )
    if settings.role == "learner":
        raise ValueError(
            "--workers applies to HTTP processes (LORENTZTRON_ROLE=all or api); start more "
            "learners as processes of their own"
        )


class Child:
    """One supervised process: its role, its command and environment, its restarts."""

    def __init__(self, name: str, role: str, command: list[str], env: dict, metrics: Path):
        self.name, self.role, self.command, self.env, self.metrics = (
            name,
            role,
            command,
            env,
            metrics,
        )
        self.process: subprocess.Popen | None = None
        self.started = 0.0
        self.failures = 0  # deaths in a row, each within STABLE_SECONDS of its start
        self.due = 0.0  # when a dead child is started again
        self.restarts = 0

    def start(self, keep_fds: tuple[int, ...] = ()) -> None:
        self.process = subprocess.Popen(
            self.command,
            env=self.env,
            pass_fds=keep_fds,
            process_group=0,  # a terminal's Ctrl-C reaches the supervisor only
            preexec_fn=_die_with_parent,
        )
        self.started = time.monotonic()
        log.info("started %s (pid %d)", self.name, self.process.pid)

    def died(self) -> int | None:
        """The exit status if the process has exited (its live metrics then go)."""
        if self.process is None or self.process.poll() is None:
            return None
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(self.process.pid, str(self.metrics))
        return self.process.returncode

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)


def _die_with_parent() -> None:  # pragma: no cover (runs in the child before exec)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class Supervisor:
    """Binds the port, starts the children, restarts the ones that die, stops them all on
    SIGTERM or SIGINT (``run`` returns then)."""

    def __init__(self, settings, host: str | None = None, port: int | None = None):
        self.settings = settings
        self.host = host or settings.host
        self.port = port if port is not None else settings.port
        self.stopping = threading.Event()
        self.children: list[Child] = []
        self.socket: socket.socket | None = None
        self.directory: Path | None = None  # ours to remove
        self.metrics: Path | None = None

    def run(self) -> None:
        import uvicorn

        config = uvicorn.Config(APP, host=self.host, port=self.port, backlog=BACKLOG)
        self.socket = config.bind_socket()  # inheritable; the port stays open across restarts
        self.directory = Path(tempfile.mkdtemp(prefix="lorentztron-workers-"))
        self.metrics = Path(
            os.environ.get("PROMETHEUS_MULTIPROC_DIR") or self.directory / "metrics"
        )
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._start_children()
            self._watch()
        finally:
            self._stop_children()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.socket.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- children ----------------------------------------------------------------------
    def _child(self, name: str, role: str, where: list[str]) -> Child:
        metrics = self.metrics / role
        if metrics.exists():  # a previous run's values are not this one's
            for stale in metrics.glob("*.db"):
                stale.unlink()
        metrics.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "LORENTZTRON_ROLE": role,
            "LORENTZTRON_WORKERS": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        }
        command = [sys.executable, "-m", "service.ops.workers", *where]
        return Child(name, role, command, env, metrics)

    def _start_children(self) -> None:
        fd = self.socket.fileno()
        if self.settings.role == "all":
            uds = str(self.directory / "learner.sock")
            self.children.append(self._child("learner", "learner", ["--uds", uds]))
        for i in range(self.settings.workers):
            self.children.append(self._child(f"api-{i + 1}", "api", ["--fd", str(fd)]))
        log.info(
            "%d api processes%s on %s:%d",
            self.settings.workers,
            " and a learner" if self.settings.role == "all" else "",
            self.host,
            self.port,
        )
        for child in self.children:
            child.start(self._fds(child))

    def _fds(self, child: Child) -> tuple[int, ...]:
        """The listening socket, for the api processes only."""
        return (self.socket.fileno(),) if child.role == "api" else ()

    def _watch(self) -> None:
        while not self.stopping.wait(0.1):
            now = time.monotonic()
            for child in self.children:
                if child.process is None:
                    if now >= child.due:
                        child.restarts += 1
                        # a test's failpoints stop the first run of each child; what
                        # replaces it runs clean (service.ops.failpoints)
                        child.env.pop("LORENTZTRON_FAILPOINTS", None)
                        child.start(self._fds(child))
                    continue
                status = child.died()
                if status is None:
                    continue
                lived = now - child.started
                child.failures = child.failures + 1 if lived < STABLE_SECONDS else 0
                delay = BACKOFF[min(child.failures, len(BACKOFF) - 1)] if child.failures else 0.0
                log.warning(
                    "%s (pid %d) exited with status %s after %.1f s; starting it again in %.1f s",
                    child.name,
                    child.process.pid,
                    status,
                    lived,
                    delay,
                )
                child.process, child.due = None, now + delay

    def _stop(self, signum, frame) -> None:
        self.stopping.set()

    def _stop_children(self) -> None:
        """The api processes first (they finish their requests; what they acknowledged is in
        the log), then the learner (it hands its models over or snapshots them)."""
        for role in ("api", "learner"):
            group = [c for c in self.children if c.role == role and c.process is not None]
            for child in group:
                child.signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            for child in group:
                try:
                    child.process.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop in %.0f s: killed", child.name, STOP_TIMEOUT)
                    child.process.kill()
                    child.process.wait()
                child.died()


def supervise(settings, host: str | None = None, port: int | None = None) -> None:
    """``lorentztron serve`` with ``settings.workers`` above 1 (``check`` first)."""
    from service.ops.cli import configure_logging

    check(settings)
    logging.config.dictConfig(configure_logging(settings.log_level))
    Supervisor(settings, host, port).run()


def child(argv: list[str] | None = None) -> None:
    """A supervised process: the app on the inherited listening socket (``--fd``), or on
    a unix socket (``--uds``, the learner)."""
    import uvicorn

    from service.ops.cli import configure_process, load_settings, uvicorn_options

    parser = argparse.ArgumentParser(prog="python -m service.ops.workers")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--fd", type=int, help="the listening socket, inherited")
    where.add_argument("--uds", help="a unix socket to listen on")
    args = parser.parse_args(argv)
    settings = load_settings()
    configure_process(settings)
    options = uvicorn_options(settings)
    if args.uds:
        uvicorn.run(APP, **{**options, "uds": args.uds})
        return
    server = uvicorn.Server(uvicorn.Config(APP, **options))
    server.run(sockets=[socket.socket(fileno=args.fd)])


if __name__ == "__main__":
    child()
