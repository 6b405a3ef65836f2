"""``lorentztron serve``: process set-up before uvicorn starts."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

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
    for command in ("serve", "learn", "eval", "export", "import", "challenger", "promote"):
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


# -- a served model's members ----------------------------------------------------------------
@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from service.config import Settings
    from service.main import create_app
    from tests.service.test_end_to_end import ServerThread

    directory = tmp_path_factory.mktemp("members")
    settings = Settings(snapshot_dir=directory, snapshot_interval=3600, write_keys=["w"])
    with ServerThread(create_app(settings)) as running:
        yield running.url


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``lorentztron ARGS`` in this process: exit status, stdout, stderr."""
    try:
        cli.main(list(args))
        status = 0
    except SystemExit as exit:
        status = exit.code
    out, err = capsys.readouterr()
    return status, out, err


def write_files(folder, stream: list[dict]) -> tuple:
    """The examples as svmlight (1-based indices) and as NDJSON."""
    svmlight, ndjson = folder / "held-out.svm", folder / "held-out.ndjson"
    svmlight.write_text(
        "".join(
            f"{e['label']} "
            + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(e["x"]) if v != 0)
            + "\n"
            for e in stream
        )
    )
    ndjson.write_text("".join(json.dumps(e) + "\n" for e in stream))
    return svmlight, ndjson


def test_challengers_eval_promote_pause_and_resume(service, capsys, tmp_path):
    """The members' commands against a real server: a DoS challenger beside a linear
    champion, every member and variant scored on held-out files (svmlight and NDJSON say
    the same, and what they say is what predict answers), promoted, learning paused and
    resumed, and the service's refusals as one line with their code."""
    from service import client as lz
    from tests.service.http.routes.test_members import examples

    remote = ("--url", service, "--key", "w")
    with lz.Client(service, key="w") as client:
        client.create("m", kind="linear-pa", n_features=4)
    status, out, err = run(
        capsys, "challenger", "add", "m", "c1", "--kind", "dos", "--param", "rank=2",
        "--averaging-interval", "50", *remote,
    )  # fmt: skip
    assert status == 0 and "added challenger 'c1' (dos)" in out, err
    status, _, err = run(capsys, "challenger", "add", "m", "c1", "--kind", "dos", *remote)
    assert status == 2 and err.startswith("lorentztron challenger: error: member_exists: ")
    assert len(err.strip().splitlines()) == 1
    status, _, err = run(capsys, "challenger", "add", "m", "c2", "--kind", "dos", "--url", service)
    assert status == 2 and "unauthorized" in err
    with lz.Client(service, key="w") as client:
        client.feedback("m", [e["x"] for e in examples(600)], [e["label"] for e in examples(600)])

    held_out = examples(300, seed=9)
    svmlight, ndjson = write_files(tmp_path, held_out)
    status, out, err = run(
        capsys, "eval", "m", str(svmlight), "--json", "--batch-size", "64", *remote
    )
    assert status == 0, err
    result = json.loads(out)
    assert result["metric"] == "accuracy" and result["task"] == "classification"
    rows = {(r["member"], r["variant"]): r for r in result["rows"]}
    assert set(rows) == {
        ("original", "live"),
        ("original", "averaged"),
        ("c1", "live"),
        ("c1", "averaged"),
    }
    assert [k for k, r in rows.items() if r["serving"]] == [("original", "live")]
    with lz.Client(service) as client:
        info, [c1] = client.model("m"), client.challengers("m")
        for (member, variant), row in rows.items():
            answer = client.predict("m", [e["x"] for e in held_out], variant=variant, member=member)
            right = sum(
                p["label"] == e["label"]
                for p, e in zip(answer["predictions"], held_out, strict=True)
            )
            assert row["examples"] == 300 and row["accuracy"] == right / 300, (member, variant)
            shown = (info if member == "original" else c1)["variants"][variant]
            assert (
                row["progressive"] == shown["metrics"] and row["comparison"] == shown["comparison"]
            )
    assert rows["c1", "live"]["accuracy"] > rows["original", "live"]["accuracy"] + 0.1
    status, out, err = run(capsys, "eval", "m", str(ndjson), "--json", *remote)
    assert status == 0 and json.loads(out) == result, err
    status, out, err = run(
        capsys, "eval", "m", str(svmlight), str(ndjson), "--variant", "live", *remote
    )
    assert status == 0, err
    lines = out.splitlines()
    assert "on 600 examples" in lines[0]
    assert lines[1].split() == [
        "member",
        "variant",
        "serving",
        "examples",
        "accuracy",
        "progressive",
        "recent",
        "seen",
        "verdict",
    ]
    original, challenger = (line.split() for line in lines[2:])
    assert original[:4] == ["original", "live", "yes", "600"] and original[-1] == "-"
    assert challenger[:3] == ["c1", "live", "600"] and challenger[-1] == "better"
    assert challenger[3] == f"{rows['c1', 'live']['accuracy']:.4f}"
    for refused, message in (
        (("eval", "m"), "give a model file"),
        (("eval", "m", str(svmlight), "--predictions", "p"), "--predictions is for"),
        (("eval", "nope", str(svmlight)), "model_not_found"),
        (("eval", "m", str(tmp_path / "missing")), "no such file"),
    ):
        status, _, err = run(capsys, *refused, *remote)
        assert status == 2 and message in err, (refused, err)

    status, out, _ = run(capsys, "challenger", "list", "m", *remote)
    table = [line.split() for line in out.splitlines()]
    assert table[0][:3] == ["challenger", "kind", "variant"]
    assert [row[:4] for row in table[1:]] == [
        ["c1", "dos", "live", "600"],
        ["c1", "dos", "averaged", "600"],
    ]
    assert table[1][-1] == "better"
    status, out, _ = run(capsys, "challenger", "list", "m", "--json", *remote)
    assert [c["name"] for c in json.loads(out)["challengers"]] == ["c1"]

    status, out, err = run(capsys, "promote", "m", "c1", "--variant", "averaged", *remote)
    assert status == 0 and "'m' serves 'c1' (dos, averaged); challengers: original" in out, err
    status, out, _ = run(capsys, "eval", "m", str(svmlight), "--json", *remote)
    served = [(r["member"], r["variant"]) for r in json.loads(out)["rows"] if r["serving"]]
    assert served == [("c1", "averaged")]
    status, _, err = run(capsys, "challenger", "remove", "m", "c1", *remote)
    assert status == 2 and "member_serves" in err
    status, _, err = run(capsys, "promote", "m", "nope", *remote)
    assert status == 2 and "member_not_found" in err

    status, out, err = run(capsys, "pause", "m", *remote)
    assert status == 0 and "'m' paused: 600 examples learned, backlog 0" in out, err
    with lz.Client(service, key="w") as client:
        assert (
            client.feedback("m", [e["x"] for e in held_out], [e["label"] for e in held_out])[
                "learned"
            ]
            == 0
        )
    status, out, err = run(capsys, "resume", "m", *remote)
    assert status == 0 and "'m' learning: 900 examples learned, backlog 0" in out, err
    run(capsys, "pause", "m", *remote)
    with lz.Client(service, key="w") as client:
        client.feedback("m", [e["x"] for e in held_out], [e["label"] for e in held_out])
    status, out, err = run(capsys, "resume", "m", "--discard", *remote)
    assert status == 0 and "'m' learning: 900 examples learned, backlog 0" in out, err

    status, out, err = run(capsys, "challenger", "remove", "m", "original", *remote)
    assert status == 0 and "removed challenger 'original' from 'm'" in out, err
    status, out, _ = run(capsys, "challenger", "list", "m", *remote)
    assert out.strip() == "'m' has no challengers"


def test_eval_of_a_served_regression_model_reports_rmse(service, capsys, tmp_path):
    from service import client as lz

    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 3)).round(3)
    y = (X[:, 0] - 2 * X[:, 1]).round(3)
    with lz.Client(service, key="w") as client:
        client.create("r", kind="pqr", n_features=3, params={"task": "regression"})
        client.feedback("r", X[:300], y[:300])
        answer = client.predict("r", X[300:])
    path = tmp_path / "r.ndjson"
    path.write_text(
        "".join(
            json.dumps({"x": x.tolist(), "label": float(t)}) + "\n"
            for x, t in zip(X[300:], y[300:], strict=True)
        )
    )
    status, out, err = run(
        capsys, "eval", "r", str(path), "--json", "--variant", "live", "--url", service
    )
    assert status == 0, err
    [row] = json.loads(out)["rows"]
    expected = np.sqrt(
        np.mean(
            [(p["label"] - t) ** 2 for p, t in zip(answer["predictions"], y[300:], strict=True)]
        )
    )
    assert json.loads(out)["metric"] == "rmse" and row["rmse"] == pytest.approx(expected, rel=1e-12)
    assert row["serving"] and row["progressive"]["rmse"] is not None


def test_an_error_names_its_line_in_the_file_not_in_the_part(service, capsys, tmp_path):
    """Files are read in parts of ``PART_LINES`` lines: an error in the second part names
    its line in the file (comment and blank lines counted), offline (``learn``, ``eval
    --model``) and against a service (``eval NAME``: a row refused by the parse, or by the
    service)."""
    from service import client as lz
    from service.ops.offline import PART_LINES

    rows = [f"{1 if i % 3 else -1} 1:0.5 3:{i % 7 + 1}\n" for i in range(PART_LINES + 10)]
    rows[PART_LINES : PART_LINES + 2] = ["# a comment\n", "\n"]
    line = PART_LINES + 4  # the bad row's line in the file (the 2nd row of the 2nd part)

    def written(name: str, bad: str):
        path = tmp_path / name
        path.write_text("".join(rows[: line - 1] + [bad] + rows[line:]))
        return path

    good = tmp_path / "good.svm"
    good.write_text("".join(rows))
    model = tmp_path / "good.safetensors"
    learned = ("--kind", "linear-pa", "--n-features", "3", "--quiet", "-o", str(model))
    status, _, err = run(capsys, "learn", str(good), *learned)
    assert status == 0, err
    wide = written("wide.svm", "1 1:1 9:1\n")
    syntax = written("syntax.svm", "1 3:x\n")
    zero = written("zero.svm", "1 0:1\n")
    infinite = written("infinite.svm", "1 1:1e999\n")  # (named by the part's lines)
    lines = f"(lines {PART_LINES + 1} to {len(rows)})"
    index = "feature index 9 exceeds n_features=3"
    for argv, expected in (
        (("learn", str(wide), *learned), f"invalid_input: {wide}:{line}: {index}"),
        (("learn", str(syntax), *learned), f"{syntax}:{line}: not a svmlight row: '1 3:x'"),
        (
            ("learn", str(infinite), *learned),
            f"{infinite} {lines}: labels and values must be finite",
        ),  # fmt: skip
        (
            ("learn", str(zero), *learned),
            f"{zero}:{line}: feature index 0; svmlight indices are 1-based",
        ),
        (
            ("eval", str(wide), "--model", str(model), "--quiet"),
            f"invalid_input: {wide}:{line}: {index}",
        ),
    ):
        status, _, err = run(capsys, *argv)
        assert (status, err) == (2, f"lorentztron {argv[0]}: error: {expected}\n"), argv

    with lz.Client(service, key="w") as client:
        client.create("lines", kind="linear-pa", n_features=3)
    status, _, err = run(capsys, "eval", "lines", str(wide), "--url", service)
    assert (status, err) == (2, f"lorentztron eval: error: {wide}:{line}: {index}\n")
    # NDJSON: a row the service refuses (four values for three features), in a batch of 64
    ndjson = tmp_path / "wide.ndjson"
    examples = [json.dumps({"x": [0.5, 0, 1], "label": 1}) + "\n"] * (PART_LINES + 100)
    examples[PART_LINES] = "\n"
    examples[line - 1] = json.dumps({"x": [0.5, 0, 1, 2], "label": 1}) + "\n"
    ndjson.write_text("".join(examples))
    status, _, err = run(capsys, "eval", "lines", str(ndjson), "--url", service)
    assert status == 2 and err.startswith(
        f"lorentztron eval: error: invalid_input: {ndjson}:{line}: "
    )
    assert "4" in err and "3" in err, err


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


# -- issue 29: what a new user stumbled on ------------------------------------------------------
def test_the_cli_needs_only_the_base_dependencies():
    """``pip install -e .`` is enough for ``lorentztron export``: httpx (service.client's
    one dependency) is a base dependency, not only the test extra's."""
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    names = [d.split(">")[0].split("[")[0].strip() for d in project["project"]["dependencies"]]
    assert "httpx" in names


def test_a_mistyped_option_prints_the_commands_usage(capsys):
    """``serve --prot`` says what ``serve`` takes, not what ``lorentztron`` does."""
    for argv, command in (
        (["serve", "--prot"], "serve"),
        (["challenger", "list", "m", "--jsn"], "challenger list"),
        (["export", "m", "--force"], "export"),
    ):
        status, _, err = run(capsys, *argv)
        assert status == 2 and err.startswith(f"usage: lorentztron {command} "), err
        assert err.splitlines()[-1] == (
            f"lorentztron {command}: error: unrecognized arguments: {argv[-1]}"
        )


def closed_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    from tests.service.test_end_to_end import free_port

    return f"http://127.0.0.1:{free_port()}"


def test_a_refused_connection_is_one_clear_line_and_fails_fast(capsys, monkeypatch, tmp_path):
    """Every command that talks to a service goes to ``--url``, else ``$LORENTZTRON_URL``;
    nothing listening there is one line that names the URL, within a second, after one line
    per retry that says what failed and when it is tried again (no silent wait)."""
    file = tmp_path / "m.safetensors"
    file.write_bytes(b"not read before the request")
    commands = (
        ("export", "m", "-o", str(tmp_path / "out.safetensors")),
        ("import", str(file), "--name", "m"),
        ("eval", "m", str(file)),
        ("challenger", "add", "m", "c1", "--kind", "dos"),
        ("challenger", "list", "m"),
        ("challenger", "remove", "m", "c1"),
        ("promote", "m", "c1"),
        ("pause", "m"),
        ("resume", "m"),
    )
    for by_option in (True, False):
        url = closed_url()
        if by_option:
            monkeypatch.setenv("LORENTZTRON_URL", "http://127.0.0.1:1")  # --url wins
        else:
            monkeypatch.setenv("LORENTZTRON_URL", url)
        for command in commands:
            argv = [*command, "--url", url] if by_option else list(command)
            started = time.perf_counter()
            status, _, err = run(capsys, *argv)
            elapsed = time.perf_counter() - started
            name = command[0]
            *retries, last = err.splitlines()
            assert status == 2 and last == (
                f"lorentztron {name}: error: cannot reach {url} (connection refused); is the "
                "server running? (set --url or LORENTZTRON_URL)"
            ), (argv, err)
            # (a DELETE without an idempotency key is never sent again)
            assert len(retries) == (0 if command[:2] == ("challenger", "remove") else 2), err
            for attempt, line in enumerate(retries, start=1):
                announced = rf"lorentztron {name}: (GET|POST|PUT) /v1/models/m\S*: "
                announced += rf"connection refused; retry {attempt} of 2 in 0\.\d\d s"
                assert re.fullmatch(announced, line), (argv, line)
            assert elapsed < 1.0, (argv, elapsed)


@pytest.fixture(scope="module")
def open_service(tmp_path_factory):
    """A service without write keys."""
    from service.config import Settings
    from service.main import create_app
    from tests.service.test_end_to_end import ServerThread

    directory = tmp_path_factory.mktemp("open")
    settings = Settings(snapshot_dir=directory, snapshot_interval=3600, write_keys=[])
    with ServerThread(create_app(settings)) as running:
        yield running.url


def test_an_empty_key_is_no_key(open_service, capsys, monkeypatch, tmp_path):
    """``--key $LORENTZTRON_WRITE_KEYS`` with no keys set: ``--key`` without a value, or
    with an empty one, or an empty ``$LORENTZTRON_KEY``, sends no key (a service without
    write keys wants none); an empty ``$LORENTZTRON_URL`` is the default URL."""
    from service import client as lz

    with lz.Client(open_service) as client:
        client.create("k", kind="linear-pa", n_features=3)
    file = tmp_path / "k.safetensors"
    status, out, err = run(capsys, "export", "k", "-o", str(file), "--url", open_service, "--key")
    assert status == 0 and "wrote" in out, err
    status, out, err = run(
        capsys, "import", str(file), "--name", "k2", "--url", open_service, "--key", ""
    )
    assert status == 0 and "created 'k2'" in out, err
    monkeypatch.setenv("LORENTZTRON_KEY", "")
    status, out, err = run(capsys, "pause", "k2", "--url", open_service)
    assert status == 0 and "'k2' paused" in out, err
    monkeypatch.setenv("LORENTZTRON_URL", "")
    assert cli._parser().parse_args(["pause", "k2"]).url == "http://127.0.0.1:8000"
    assert cli._parser().parse_args(["pause", "k2", "--url"]).url == "http://127.0.0.1:8000"
