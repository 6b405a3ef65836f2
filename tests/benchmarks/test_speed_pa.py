"""The speed benchmark's quick mode runs end to end and writes its table (no timing asserts:
speed is measured in benchmarks/, not asserted in tests)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed_pa.py"


@pytest.fixture(scope="module")
def speed_pa():
    spec = importlib.util.spec_from_file_location("speed_pa", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_quick_run_writes_its_section_and_raw_numbers(speed_pa, tmp_path):
    out = tmp_path / "docs" / "benchmarks.md"
    out.parent.mkdir()
    out.write_text("# Benchmarks\n\nintro\n\n<!-- other:begin -->\nkept\n<!-- other:end -->\n")

    assert speed_pa.main(["--quick", "--peers", "none", "--out", str(out)]) == 0

    text = out.read_text()
    assert text.startswith("# Benchmarks\n\nintro\n")
    assert "<!-- other:begin -->\nkept\n<!-- other:end -->" in text
    assert text.count(speed_pa.BEGIN) == 1 and text.count(speed_pa.END) == 1
    section = text.split(speed_pa.BEGIN)[1].split(speed_pa.END)[0]
    assert f"## {speed_pa.SECTION_TITLE}" in section
    assert "### sparse150" in section and "### sparse30" in section
    for learner in ("LinearPA", "DoS rank 1", "DoS rank 4", "DoS rank 16"):
        assert f"| {learner} | " in section
    assert "| River" not in section and "| VW" not in section
    assert "### Where the time goes" in section

    raw = json.loads(out.with_name("speed_pa.json").read_text())
    ours = [r for r in raw["results"] if r["learner"] == "DoS rank 16" and r["error"] is None]
    assert {r["op"] for r in ours} == {"learn_one", "predict_one", "batch"}
    assert all(r["median_us"] > 0 and r["rows"] > 0 for r in ours)
    assert {r["part"] for r in raw["breakdown"]} >= {
        "learn_one (whole call)",
        "as_row(x) (validation)",
    }


def test_section_is_replaced_in_place_and_file_created(speed_pa, tmp_path):
    path = tmp_path / "new" / "benchmarks.md"
    speed_pa.write_section(path, "first\n")
    assert path.read_text().startswith("# Benchmarks")
    path.write_text(path.read_text() + "\ntrailing text\n")
    speed_pa.write_section(path, "second\n")
    text = path.read_text()
    assert "first" not in text and f"{speed_pa.BEGIN}\nsecond\n{speed_pa.END}\n" in text
    assert text.endswith("trailing text\n")
