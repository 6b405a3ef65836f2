"""The command line: a bulk run and a sweep write their JSON and print their text; bad
options exit with 2."""

from __future__ import annotations

import json

import pytest

from deploy.loadtest.loadgen.cli import main
from tests.deploy.loadtest.loadgen.summaries import SUMMARY_KEYS, no_loadgen_models


def test_bulk_command_line_writes_json(server_url, tmp_path, capsys):
    out = tmp_path / "bulk.json"
    status = main(
        ["--url", server_url, "--mode", "bulk", "--duration", "0.8", "--warmup", "0", "--rank",
         "4", "--n-features", "1024", "--nnz", "10", "--batch", "200", "--pool", "16",
         "--concurrency", "1", "--json", str(out)]
    )  # fmt: skip
    assert status == 0
    summary = json.loads(out.read_text())
    assert set(summary) == SUMMARY_KEYS
    assert summary["mode"] == "bulk" and summary["batch"] == 200
    assert summary["errors"] == 0
    assert summary["examples_learned"] == 200 * summary["ok"]
    assert "bulk (closed loop, 1 clients)" in capsys.readouterr().out


def test_sweep_command_line(server_url, tmp_path, capsys):
    out = tmp_path / "sweep.json"
    status = main(
        ["--url", server_url, "--mode", "predict", "--rate", "20", "--duration", "0.3",
         "--warmup", "0", "--rank", "4", "--n-features", "1024", "--nnz", "10",
         "--sweep", "--sweep-max", "40", "--p99-max", "60000", "--json", str(out)]
    )  # fmt: skip
    assert status == 0 and json.loads(out.read_text())["knee_rate"] == 40.0
    assert "highest rate with p99 <= 60000 ms" in capsys.readouterr().out
    assert no_loadgen_models(server_url)


def test_help_names_the_default_client_and_explains_the_send_lag(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{raw,httpx}" in text and "raw (the default)" in text
    assert "send lag open loop only: how late the generator started requests" in text


def test_bad_options_exit_with_2(capsys):
    assert main(["--url", "http://10.1.2.3:8000"]) == 2
    assert "not a loopback address" in capsys.readouterr().err
    assert main(["--mode", "predict", "--sweep"]) == 2  # a sweep needs --rate
