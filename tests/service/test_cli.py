"""``lorentztron serve``: process set-up before uvicorn starts."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from service import cli


def test_serve_tunes_malloc_unless_disabled(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.uvicorn, "run", lambda *args, **kwargs: calls.append("run"))
    monkeypatch.setattr(cli, "tune_malloc", lambda: calls.append("tune") or True)
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(cli.logging, name, getattr(cli.logging, name))  # restored after
    cli.get_settings.cache_clear()
    cli.main(["serve"])
    assert calls == ["tune", "run"]
    assert cli.logging._srcfile is None and not cli.logging.logThreads
    calls.clear()
    monkeypatch.setenv("LORENTZTRON_MALLOC_KEEP_FREED", "false")
    cli.get_settings.cache_clear()
    cli.main(["serve"])
    assert calls == ["run"]
    cli.get_settings.cache_clear()


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_tune_malloc_is_accepted_by_glibc():
    """In a fresh process (the setting is process-wide): glibc accepts both parameters."""
    code = "from service.cli import tune_malloc; print(tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
