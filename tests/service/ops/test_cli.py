"""``lorentztron serve``: process set-up before uvicorn starts."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import httpx
import numpy as np

from service.ops import cli


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
    code = "from service.ops.cli import tune_malloc; print(tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert out.stdout.strip() == str(glibc)


# -- the command line as users meet it ----------------------------------------------------------
def lorentztron(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "service.ops.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def test_help_and_version_read_as_plain_text():
    from service.config import Settings

    top = lorentztron("--help")
    assert top.returncode == 0 and "``" not in top.stdout
    for command in ("serve", "learn", "eval", "export", "import"):
        assert command in top.stdout
    serve = lorentztron("serve", "--help").stdout
    for name in Settings.model_fields:
        assert f"LORENTZTRON_{name.upper()} (default" in serve, name
    assert "Seconds between background snapshots" in serve and "``" not in serve
    assert lorentztron("--version").stdout.strip() == "lorentztron 0.1.0"


def test_a_bad_setting_is_one_line_naming_the_variable():
    for env, variable in (
        ({"LORENTZTRON_PORT": "abc"}, "LORENTZTRON_PORT"),
        ({"LORENTZTRON_ROLE": "api", "LORENTZTRON_REDIS_URL": ""}, "LORENTZTRON_ROLE"),
        ({"LORENTZTRON_SNAPSHOT_INTERVAL": "-1"}, "LORENTZTRON_SNAPSHOT_INTERVAL"),
    ):
        run = lorentztron("serve", env=env)
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and variable in lines[0] and "Traceback" not in run.stderr


def test_learn_eval_and_import_into_a_running_service(tmp_path):
    """Learn a model from a9a's first 3,000 lines offline, score a9a.t with it, import the
    file into a real service (the CLI through service.client), export it back: the service
    predicts what the file predicts, and the exported file equals the learned one's arrays."""
    from benchmarks.servers import ServiceProcess
    from core.datasets import data_dir
    from service.durability.interchange import read_tensors

    train = tmp_path / "a9a-head"
    train.write_bytes(b"".join((data_dir() / "a9a" / "a9a").read_bytes().splitlines(True)[:3000]))
    model = tmp_path / "a9a.safetensors"
    learned = lorentztron(
        "learn", str(train), "--kind", "dos", "--param", "rank=4", "--n-features", "123",
        "--averaging-interval", "500", "-o", str(model),
    )  # fmt: skip
    assert learned.returncode == 0, learned.stderr
    assert "learned 3,000 examples" in learned.stdout and "accuracy" in learned.stdout
    assert "100%" in learned.stderr and "examples" in learned.stderr  # the progress lines
    scored = lorentztron(
        "eval", str(data_dir() / "a9a" / "a9a.t"), "--model", str(model), "--json",
        "--variant", "averaged", "--predictions", str(tmp_path / "p.ndjson"),
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads(scored.stdout)
    assert metrics["examples"] == 16281 and 0.7 < metrics["accuracy"] < 1.0
    first = json.loads((tmp_path / "p.ndjson").read_text().splitlines()[0])
    service = ServiceProcess(
        {"LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"), "LORENTZTRON_WRITE_KEYS": "w"}
    ).start()
    try:
        env = {"LORENTZTRON_URL": service.url, "LORENTZTRON_KEY": "w"}
        imported = lorentztron("import", str(model), "--name", "a9a", env=env)
        assert imported.returncode == 0 and "created 'a9a'" in imported.stdout, imported.stderr
        refused = lorentztron("import", str(model), "--name", "a9a", env=env)
        assert refused.returncode == 2 and "model_exists" in refused.stderr
        line = (data_dir() / "a9a" / "a9a.t").read_text().splitlines()[0]
        indices = [int(pair.split(":")[0]) - 1 for pair in line.split()[1:]]
        body = {"instances": [{"indices": indices, "values": [1.0] * len(indices)}]}
        served = httpx.post(f"{service.url}/v1/models/a9a/predict?variant=averaged", json=body)
        assert served.json()["predictions"][0]["score"] == first["score"]
        exported = lorentztron("export", "a9a", "-o", str(tmp_path / "back.safetensors"), env=env)
        assert exported.returncode == 0, exported.stderr
        mine, theirs = (
            read_tensors(p.read_bytes())[0] for p in (model, tmp_path / "back.safetensors")
        )
        assert all(np.array_equal(mine[k], theirs[k]) for k in mine if not k.startswith("service."))
    finally:
        service.stop()


def test_json_lines_carry_the_time_of_each_record():
    """The formatter's time, to the millisecond, across the seconds it caches."""
    formatter = cli.JsonFormatter()
    stamps = []
    for created in (0.5, 1.25, 1.75, 86_400.001, 1.0):
        record = cli.logging.LogRecord(
            "lorentztron", cli.logging.INFO, __file__, 1, "m %s", ("x",), None
        )
        record.created, record.msecs = created, (created - int(created)) * 1000
        line = json.loads(formatter.format(record))
        assert (line["level"], line["logger"], line["message"]) == ("info", "lorentztron", "m x")
        stamps.append(line["ts"])
    assert stamps == [
        "1970-01-01T00:00:00.500Z",
        "1970-01-01T00:00:01.250Z",
        "1970-01-01T00:00:01.750Z",
        "1970-01-02T00:00:00.001Z",
        "1970-01-01T00:00:01.000Z",
    ]
