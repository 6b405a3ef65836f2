"""System programs that some tests need (Prometheus, Chromium), installed from Debian's
packages when missing, as ``make system-deps`` does (tests run as root on CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest

_lock = threading.Lock()
_updated = False


def require_program(program: str, package: str) -> str:
    """The path of ``program``, installing Debian's ``package`` with apt-get when it is
    missing; the test fails (never skips) when that is impossible."""
    global _updated
    with _lock:
        path = shutil.which(program)
        if path is not None:
            return path
        if shutil.which("apt-get") is None or os.geteuid() != 0:
            pytest.fail(f"{program} is missing and cannot be installed (make system-deps)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if not _updated:
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
            _updated = True
        subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, env=env)
        path = shutil.which(program)
        if path is None:
            pytest.fail(f"installing {package} did not provide {program}")
        return path
