"""The benchmark scripts' shared markdown section writer."""

from benchmarks.markdown import replace_section


def test_replace_section_keeps_other_sections(tmp_path):
    path = tmp_path / "benchmarks.md"
    replace_section(path, "<!-- pqr:begin -->", "<!-- pqr:end -->", "first", "# Benchmarks\n")
    path.write_text(path.read_text() + "\n<!-- pa:begin -->\nother\n<!-- pa:end -->\n")
    replace_section(path, "<!-- pqr:begin -->", "<!-- pqr:end -->", "second", "unused")
    text = path.read_text()
    assert text.startswith("# Benchmarks") and "other" in text and "first" not in text
    assert text.count("<!-- pqr:begin -->") == 1 and "second" in text
