"""The images of the container tests, built here since no registry is reachable from the
test machines (package registries are).

- The **Python base**: Debian bookworm made by ``debootstrap`` (minbase, Python 3.11 with venv
  and pip, CA certificates), a ``python`` command and the host's CA bundle added, imported
  into the engine under a name that is a digest of its recipe: a machine that made it once
  reuses it (the cold path takes about a minute). It stands in for ``python:3.11-slim``.
- The **service image**: the project's Dockerfile as written, only ``PYTHON_IMAGE`` set to
  that base (pip in the build container installs from PyPI).
- **Stand-ins** for the compose file's Redis and Prometheus images, built from Debian's
  packages (``standins/``) and named ``lorentztron-standin/...``. While a stack runs they also
  carry the names the compose file uses (:class:`BorrowedNames`), given back afterwards.

Grafana has no stand-in (no Debian package, no reachable image): tests/deploy/grafana checks
its files and the stack tests leave the service out, by name.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
import subprocess
from pathlib import Path

from tests.deploy.containers.engine import ROOT, Engine
from tests.system import require_program

STANDIN = "lorentztron-standin"
#: the label that marks an image as ours (a stand-in or the test build), never a real one
LABEL = "org.lorentztron.stand-in"
STANDINS = Path(__file__).with_name("standins")
SUITE = "bookworm"
PACKAGES = ("python3.11", "python3.11-venv", "python3-pip", "ca-certificates")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: the service image as the tests build it (also tagged with the compose file's name)
SERVICE_BUILD = "lorentztron-test/lorentztron:build"


def debian_mirror() -> str | None:
    """The Debian mirror the host's apt uses (debootstrap's default when none is found)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in sources:
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and line.split()[1:]:
                uri = line.split()[1]
                if uri.rstrip("/").endswith("/debian"):
                    return uri
    listing = Path("/etc/apt/sources.list")
    if listing.exists():
        for line in listing.read_text().splitlines():
            parts = line.split()
            if parts[:1] == ["deb"] and len(parts) > 2 and parts[2] == SUITE:
                return parts[1]
    return None


def _finish_root(root: Path) -> None:
    """What the base adds to debootstrap's tree: the ``python`` of the Python images, the
    host's CA bundle (package registries may be reached through its authorities; a copy in
    /usr/local/share survives update-ca-certificates), Debian images' policy-rc.d (packages
    installed in a build start no service), and no apt cache or package lists."""
    (root / "usr/bin/python").symlink_to("python3.11")
    shutil.copyfile(CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
    shutil.copyfile(CA_BUNDLE, root / "usr/local/share/ca-certificates/host-bundle.crt")
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    for folder in ("var/cache/apt", "var/lib/apt/lists"):
        for path in (root / folder).iterdir():
            if path.is_file():
                path.unlink()
            elif path.name == "archives":
                for deb in path.glob("*.deb"):
                    deb.unlink()


def base_image(engine: Engine, workdir: Path) -> str:
    """The Python base image's name, made when the engine does not have it."""
    require_program("debootstrap", "debootstrap")
    mirror = debian_mirror()
    command = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE]
    recipe = json.dumps(
        {
            "debootstrap": command + ([mirror] if mirror else []),
            "finish": inspect.getsource(_finish_root),
            "ca": hashlib.sha256(CA_BUNDLE.read_bytes()).hexdigest(),
        }
    )
    name = f"{STANDIN}/python:3.11-{SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    if engine.inspect("image", name) is not None:
        return name
    root = workdir / "base-root"
    try:
        result = subprocess.run(
            [*command, str(root), *([mirror] if mirror else [])],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        _finish_root(root)
        archive = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        engine.docker(
            "import",
            "--change",
            f"LABEL {LABEL}=python",
            "--change",
            'CMD ["python"]',
            "-",
            name,
            stdin=archive.stdout,
        )
        assert archive.wait() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return name


def standin_image(engine: Engine, what: str, base: str) -> str:
    """``standins/<what>`` built on ``base`` (the engine's cache makes a rebuild instant)."""
    name = f"{STANDIN}/{what}:{SUITE}-{base.rpartition('-')[2]}"  # tied to the base
    engine.docker("build", "--build-arg", f"BASE_IMAGE={base}", "-t", name, str(STANDINS / what))
    return name


def service_image(engine: Engine, base: str) -> str:
    """The project's Dockerfile as written, on ``base``."""
    engine.docker("build", "--build-arg", f"PYTHON_IMAGE={base}", "-t", SERVICE_BUILD, str(ROOT))
    return SERVICE_BUILD


class BorrowedNames:
    """Tags our images with the names the compose file uses, for the time of a stack, and
    puts back what those names pointed to before. A stand-in's name that already points to
    a real image (pulled on a machine with a registry) is left to it: the real one is used."""

    def __init__(self, engine: Engine, builds: dict[str, str], standins: dict[str, str]):
        self.engine = engine
        self.names = {**builds, **standins}  # compose name -> our image
        self.standins = set(standins)
        self.previous: dict[str, str | None] = {}
        #: compose name -> the image it runs (ours or the real one)
        self.used: dict[str, str] = {}

    def __enter__(self) -> BorrowedNames:
        for name, ours in self.names.items():
            found = self.engine.inspect("image", name)
            real = found is not None and LABEL not in (found["Config"]["Labels"] or {})
            if real and name in self.standins:
                self.used[name] = name
                continue
            # a stand-in left under the name by an interrupted run is not put back
            self.previous[name] = found["Id"] if real else None
            self.engine.docker("tag", ours, name)
            self.used[name] = ours
        return self

    def __exit__(self, *exc) -> None:
        for name, previous in self.previous.items():
            if previous is not None:
                self.engine.docker("tag", previous, name)
            else:
                self.engine.docker("rmi", name)  # the name only: our own tag keeps the image
