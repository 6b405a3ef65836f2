"""The speed section: written in place, and the breakdown read as sums."""

from benchmarks.speed_pa.report import BEGIN, END, breakdown_summary, fmt_ratio, write_section


def test_section_is_replaced_in_place_and_file_created(tmp_path):
    path = tmp_path / "new" / "benchmarks.md"
    write_section(path, "first\n")
    assert path.read_text().startswith("# Benchmarks")
    path.write_text(path.read_text() + "\ntrailing text\n")
    write_section(path, "second\n")
    text = path.read_text()
    assert "first" not in text and f"{BEGIN}\nsecond\n{END}\n" in text
    assert text.endswith("trailing text\n")


def test_breakdown_summary_adds_up_the_pieces():
    parts = {
        "learn_one (whole call)": 6.0,
        "dos_step kernel alone": 4.0,
        "dos_learn_one kernel (scratch allocated inside)": 4.5,
        "as_row(x) (validation)": 1.0,
        "check_binary_label(y)": 0.1,
        "dos_step on an empty row of a 1-feature model (call floor)": 0.4,
        "dos_step kernel alone, ids folded into 2^12 (cache-resident)": 2.5,
        "learn_many (whole call)": 4.2,
        "dos_learn_batch kernel alone": 3.5,
        "as_batch(csr) (validation)": 0.2,
        "dos_learn_batch kernel alone, ids folded into 2^12 (cache-resident)": 1.5,
    }
    rows = [{"model": "DoS rank 16", "part": p, "median_us": us} for p, us in parts.items()]
    summary = "\n".join(breakdown_summary(rows))
    assert "`learn_one` = 6.00 µs: the `dos_step` call 4.00 µs" in summary
    assert "scratch allocation 0.50 µs" in summary and "method calls 0.40 µs" in summary
    assert "about 1.50 µs per example are memory stalls" in summary
    assert breakdown_summary(rows[:-1]) == []  # a missing piece: no sums
    assert fmt_ratio(2.0) == "2.0x faster" and fmt_ratio(0.25) == "4.0x slower"
