"""``lorentztron serve``: process set-up before uvicorn starts."""

from __future__ import annotations

import platform
import subprocess
import sys

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


def test_tune_malloc_is_accepted_by_glibc_and_a_no_op_elsewhere():
    """In a fresh process (the setting is process-wide): glibc accepts both parameters;
    another C library (musl, macOS) leaves the allocator as it is and says so."""
    code = "from service.cli import tune_malloc; print(tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert out.stdout.strip() == str(glibc)
