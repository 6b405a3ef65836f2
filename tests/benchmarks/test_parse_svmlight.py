"""The svmlight parsing benchmark: every parser timed on the same bodies, checked identical."""

import numpy as np

from benchmarks.environment import environment
from benchmarks.parse_svmlight import markdown, measure, mnist_body, parsers, same_arrays


def test_small_run_times_every_parser_on_identical_arrays():
    bodies = measure(repeats=2, batch=300, mnist_rows=20)
    assert bodies["mnist"]["values"] == 20 * 784 and bodies["mnist"]["rows"] == 20
    assert bodies["bulk"]["rows"] == 300 and bodies["bulk"]["values"] == 300 * 30
    for body in bodies.values():
        assert set(body["parsers"]) == set(parsers())
        for row in body["parsers"].values():
            assert row["identical"] and len(row["seconds_cpu"]) == 2
            assert row["values_per_s"] > 0
    section = markdown({"environment": environment(), "repeats": 2, "bodies": bodies})
    assert section.count("| mnist (20 rows, 15,680 values") == len(parsers())
    assert "| NO |" not in section


def test_same_arrays_sees_one_bit():
    body, _ = mnist_body(3)
    parse = parsers()["parse_svmlight (Eisel-Lemire)"]
    X, y = parse(body)
    assert same_arrays((X, y), parse(body))
    other = X.copy()
    other.data[0] = np.nextafter(other.data[0], 2.0)
    assert not same_arrays((other, y), (X, y))
    assert not same_arrays((X, -y), (X, y))
