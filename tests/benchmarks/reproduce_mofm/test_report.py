"""The Table 2 reproduction's markdown: its shared-file section and its command."""

from benchmarks.reproduce_mofm.report import BEGIN, END, command, write_section


def test_write_section_keeps_the_other_sections(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_section(path, "first")
    assert path.read_text().startswith("# Benchmarks")
    path.write_text(path.read_text() + "\n<!-- other:begin -->\nkeep\n<!-- other:end -->\n")
    write_section(path, "second")
    text = path.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert "second" in text and "first" not in text and "keep" in text


def test_the_command_repeats_the_options_of_the_run():
    assert command({"mode": "full"}) == "python -m benchmarks.reproduce_mofm"
    config = {"mode": "quick", "datasets": ["vowel"], "refit_iter": [7, 3]}
    assert command(config) == (
        "python -m benchmarks.reproduce_mofm --quick --datasets vowel --refit-iter 7 3"
    )
