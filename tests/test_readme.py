"""The README's walkthrough, run verbatim against a real server: a newcomer who copies it
gets what it says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.servers import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]


def walkthrough() -> str:
    """The shell block between the README's walkthrough markers."""
    text = (ROOT / "README.md").read_text()
    section = text.split("<!-- walkthrough:begin -->")[1].split("<!-- walkthrough:end -->")[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return block


def test_the_walkthrough_runs_as_written(tmp_path):
    env = {
        "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
        "LORENTZTRON_LOG_LEVEL": "warning",
    }
    with ServiceProcess(env, tmp_path / "service.log").start() as server:
        port = server.url.rsplit(":", 1)[1]
        shell = {**os.environ, "PORT": port}
        shell["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{shell['PATH']}"
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", walkthrough()],
            cwd=ROOT,
            env=shell,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert '{"error":{' not in done.stdout, done.stdout[-2000:]  # (no refusal)
        info = json.loads(
            subprocess.run(
                ["curl", "-s", f"{server.url}/v1/models/a9a"], capture_output=True, text=True
            ).stdout
        )
    # what the README says the walkthrough shows
    live, averaged = (info["variants"][v]["metrics"]["accuracy"] for v in ("live", "averaged"))
    assert info["examples_learned"] == 32_562  # the training file and one more
    assert info["challengers"] == ["linear"]
    assert round(live, 2) == 0.79 and round(averaged, 2) == 0.84
    assert info["variants"]["averaged"]["comparison"]["verdict"] == "better"
    table = {tuple(line.split()[:2]): line.split() for line in done.stdout.splitlines()[-4:]}
    assert round(float(table["original", "live"][4]), 2) == 0.77  # on the test file
    assert round(float(table["original", "averaged"][3]), 2) == 0.84


def test_every_relative_link_of_the_readme_and_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_no_tracked_file_holds_a_merge_conflict_marker():
    """A merge resolved by hand once left its markers in two pages of docs/."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    marked = []
    for name in filter(None, files):
        path = ROOT / name.decode()
        if not path.is_file() or path.stat().st_size > 4 << 20:
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # (binary)
        for number, line in enumerate(data.splitlines(), start=1):
            if line.startswith((b"<<<<<<< ", b">>>>>>> ")) or line == b"=======":
                marked.append(f"{name.decode()}:{number}")
    assert not marked, marked
