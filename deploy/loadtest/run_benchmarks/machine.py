"""What the benchmarks ran on, and what else was running: the machine, its versions and
commit, its busy processes and CPU time, and a wait for a quiet machine."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

from benchmarks.servers import ROOT


def busy_processes(exclude: set[int], limit: int = 6) -> list[dict]:
    """The processes using the most CPU right now (besides ours), from ``ps``."""
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid=,pcpu=,args=", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in out.splitlines():
        pid, pcpu, args = line.split(None, 2)
        if int(pid) in exclude or float(pcpu) < 5.0 or args.startswith("ps "):
            continue
        rows.append({"pcpu": float(pcpu), "command": program_of(args)})
        if len(rows) >= limit:
            break
    return rows


def program_of(args: str) -> str:
    """A process's program and script without its arguments (``python -m pytest``, ...)."""
    words = args.split()
    keep = 3 if len(words) > 2 and words[1] in {"-m", "-u", "-X", "-O"} else 2
    return " ".join(words[:keep])[:100]


def environment() -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "service", "core"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()[1::2]
    try:
        cpu_model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu_model = platform.processor()
    versions = {}
    for name in ("fastapi", "uvicorn", "pydantic", "numba", "numpy", "httpx"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:
            versions[name] = None
    for name in ("uvloop", "httptools"):
        try:
            __import__(name)
            versions[name] = "installed"
        except ImportError:
            versions[name] = "not installed"
    return {
        "commit": commit + (f" (with local changes to {', '.join(dirty)})" if dirty else ""),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "packages": versions,
    }


def machine_busy_seconds() -> float:
    """CPU seconds all the machine's CPUs have spent busy since boot (Linux /proc/stat:
    everything but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_load: float | None, max_wait: float) -> float:
    """Wait until the 1-minute load average is at most ``max_load`` (or ``max_wait``
    seconds have passed); returns the seconds waited."""
    if max_load is None:
        return 0.0
    started = time.monotonic()
    while os.getloadavg()[0] > max_load and time.monotonic() - started < max_wait:
        time.sleep(5)
    return time.monotonic() - started
