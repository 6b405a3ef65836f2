"""The client distribution on its own: clients/python installed with pip into a fresh venv
(``python -m venv``, its own pip, the dependencies from the package index as a user gets
them) brings httpx and its dependencies and no numpy; from there, outside the repository, it
creates a model, learns and predicts plain lists against a real server, splitting a predict
beyond the service's MAX_BATCH."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from service.config import Settings
from service.main import create_app
from tests.service.test_end_to_end import ServerThread

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"

#: what ``pip install ./clients/python`` may bring besides the client: httpx and its own
LIGHT = {"anyio", "certifi", "h11", "httpcore", "httpx", "idna", "sniffio", "typing-extensions"}

SCRIPT = """
import importlib.util, json, sys
import lorentztron_client as lz
assert importlib.util.find_spec("numpy") is None, "numpy is importable"
rows = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5], [0.5, -1.0]] * 3
with lz.Client(sys.argv[1]) as client:
    client.create("light", kind="linear-pa", n_features=2)
    client.feedback("light", rows[:4], [1, -1, 1, -1])
    answer = client.predict("light", rows)
    try:
        client.model("nope")
    except lz.ModelNotFound as error:
        code = error.code
print(json.dumps({"file": lz.__file__, "n": len(answer["predictions"]), "versions":
                  answer["versions"], "max_batch": client.max_batch, "code": code,
                  "numpy": "numpy" in sys.modules}))
"""


def test_the_client_installs_alone_and_works_without_numpy(tmp_path):
    source = tmp_path / "lorentztron-client"  # a copy: pip builds in the source folder
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = [str(python), "-m", "pip", "install", "--quiet", str(source)]
    subprocess.run(install, check=True, timeout=300, capture_output=True)
    print(f"venv and pip install: {time.monotonic() - started:.1f} s")

    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        check=True,
        capture_output=True,
        text=True,
    )
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    brought = names - {"pip", "setuptools", "wheel", "lorentztron-client"}
    assert "lorentztron-client" in names and "httpx" in brought
    assert brought <= LIGHT, brought - LIGHT  # no numpy, scipy, numba, fastapi, ...

    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, max_batch=4)
    with ServerThread(create_app(settings)) as running:
        out = subprocess.run(
            [str(python), "-I", "-c", SCRIPT, running.url],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,  # not the repository: the installed client, nothing else
        )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert Path(found["file"]).is_relative_to(venv), found["file"]
    assert found["n"] == 15 and found["versions"] == [1, 1, 1, 1] and found["max_batch"] == 4
    assert found["code"] == "model_not_found" and not found["numpy"]
