"""What a run ran on, as recorded and as one line of a docs page."""

from benchmarks.environment import describe, environment, run_line, versions


def test_the_record_and_its_line():
    record = environment("no-such-package")
    assert record["versions"]["no-such-package"] == "not installed"
    assert {"python", "numpy", "scipy", "numba"} <= set(record["versions"])
    assert record["cpus"] >= 1 and record["cpu"] and record["machine"]
    line = describe(record)
    assert line.startswith(f"{record['machine']}, {record['cpu']}, {record['cpus']} CPUs")
    assert line.endswith(f"Python {versions()['python']}")
    assert run_line({"environment": record}) == line
    assert run_line({"machine": "x86_64, Python 3.11.7"}) == "x86_64, Python 3.11.7"
