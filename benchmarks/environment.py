"""What a benchmark ran on: machine, CPU, versions and commit, recorded beside its figures."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the packages whose versions every record carries; peers add their own
PACKAGES = ("numpy", "scipy", "numba")


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo``), or what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit() -> str | None:
    """The short hash of the checked-out commit (None outside a git work tree)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def versions(*packages: str) -> dict[str, str]:
    """Python's version and each package's (``"not installed"`` when it is not)."""
    out = {"python": platform.python_version()}
    for package in (*PACKAGES, *packages):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def environment(*packages: str) -> dict:
    """Machine, CPU, cores, versions (of ``packages`` too) and commit."""
    return {
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "versions": versions(*packages),
        "commit": commit(),
    }


def describe(record: dict) -> str:
    """One line for a docs page: machine, CPU, cores and Python, from :func:`environment`."""
    return (
        f"{record['machine']}, {record['cpu']}, {record['cpus']} CPUs, "
        f"Python {record['versions']['python']}"
    )


def run_line(results: dict) -> str:
    """The environment line of saved results: :func:`describe` of their ``environment``
    record, or the ``machine`` line that results saved before the record existed carry."""
    if "environment" in results:
        return describe(results["environment"])
    return results["machine"]
