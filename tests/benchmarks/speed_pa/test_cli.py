"""The speed study's quick mode end to end: its section and raw numbers written, the rest of
the file kept (no timing asserts: speed is measured in benchmarks/, not asserted in tests)."""

import json

import pytest

from benchmarks.speed_pa.cli import main
from benchmarks.speed_pa.report import BEGIN, END, SECTION_TITLE


def test_quick_run_writes_its_section_and_raw_numbers(tmp_path):
    out = tmp_path / "docs" / "benchmarks.md"
    out.parent.mkdir()
    out.write_text("# Benchmarks\n\nintro\n\n<!-- other:begin -->\nkept\n<!-- other:end -->\n")

    assert main(["--quick", "--peers", "none", "--out", str(out)]) == 0

    text = out.read_text()
    assert text.startswith("# Benchmarks\n\nintro\n")
    assert "<!-- other:begin -->\nkept\n<!-- other:end -->" in text
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    section = text.split(BEGIN)[1].split(END)[0]
    assert f"## {SECTION_TITLE}" in section
    assert "`python -m benchmarks.speed_pa --quick --peers none --out" in section
    assert "### sparse150" in section and "### sparse30" in section
    for learner in ("LinearPA", "DoS rank 1", "DoS rank 4", "DoS rank 16"):
        assert f"| {learner} | " in section
    assert "| River" not in section and "| VW" not in section
    assert "### Where the time goes" in section and "Read as sums" in section

    raw = json.loads(out.with_name("speed_pa.json").read_text())
    ours = [r for r in raw["results"] if r["learner"] == "DoS rank 16" and r["error"] is None]
    assert {r["op"] for r in ours} == {"learn_one", "predict_one", "batch"}
    assert all(r["median_us"] > 0 and r["rows"] > 0 for r in ours)
    parts = {r["part"]: r for r in raw["breakdown"]}
    assert {"learn_one (whole call)", "as_row(x) (validation)", "dos_step kernel alone"} <= set(
        parts
    )
    assert all(r["error"] is None and r["median_us"] > 0 for r in parts.values())
    assert raw["meta"]["versions"].keys() >= {"python", "numpy", "numba"}


def test_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "python -m benchmarks.speed_pa" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--quick", "--peers", "nobody"])
    with pytest.raises(SystemExit):
        main(["--quick", "--streams", "nothing", "--out", "-"])
