"""The PQR reproduction's quick mode end to end, on a9a and a synthetic MovieLens folder."""

import json

import pytest

from benchmarks.peers import available
from benchmarks.reproduce_pqr.cli import main
from tests.benchmarks.reproduce_pqr.movielens_folder import write_movielens


def test_quick_mode_end_to_end(tmp_path):
    write_movielens(tmp_path / "ml", n_ratings=1500)
    out = tmp_path / "out"
    result = main(["--quick", "--movielens", str(tmp_path / "ml"), "--out", str(out)])
    saved = json.loads((out / "reproduce_pqr.json").read_text())
    assert saved["settings"]["mode"] == "quick"
    models = [row["model"] for row in result["a9a"]["rows"]]
    assert models[:4] == ["LR", "PQR (k=4)", "PQR (k=16)", "PQR (k=16, warm-up 200)"]
    peers = {"River FM"} if available("river") else set()
    if available("vowpalwabbit"):
        peers |= {"VW --ftrl", "VW --ftrl -q aa", "VW --lrq (rank 4)"}
    assert peers <= set(models)  # the bench extra's peers, when installed
    for row in result["a9a"]["rows"]:
        assert 0.6 < row["auc"] <= 1.0 and 0.0 < row["log_loss"] < 1.0
        assert row["time_vs_lr"] > 0 and row["model_size"] > 0
    assert result["a9a"]["rows"][0]["time_vs_lr"] == 1.0
    speed = {(row["stream"], row["model"]) for row in result["speed"]["rows"]}
    assert {("a9a", "LR"), ("a9a", "PQR (k=16)"), ("hashed 2^20", "PQR (k=20)")} <= speed
    assert len(result["movielens"]["rows"]) == 3
    document = (out / "pqr.md").read_text()
    assert "<!-- pqr-results:begin -->" in document and "| PQR (k=16) |" in document
    assert "Table 3 (ML100K)" in document
    benchmarks = (out / "benchmarks.md").read_text()
    assert "<!-- pqr:begin -->" in benchmarks and "| hashed 2^20 | LR |" in benchmarks
    assert "Written by `python -m benchmarks.reproduce_pqr --quick`" in benchmarks
    if available("matplotlib"):
        assert (out / "reproduce_pqr.png").stat().st_size > 10_000
    # the outputs can be rebuilt from the saved results without learning
    rebuilt = tmp_path / "rebuilt"
    main(["--from-json", str(out / "reproduce_pqr.json"), "--out", str(rebuilt)])
    assert (rebuilt / "pqr.md").read_text() == document
    assert (rebuilt / "benchmarks.md").read_text() == benchmarks


def test_help(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "python -m benchmarks.reproduce_pqr" in capsys.readouterr().out
