"""benchmarks/v2_infer.py: its quick mode against a real server under wrk (every scenario's
request answered 200, the same label through v1 and V2, no error during the load), and the
table's ratios, taken within each repeat."""

from benchmarks import v2_infer
from tests.system import require_program


def test_quick_run_measures_every_scenario(capsys):
    require_program("wrk", "wrk")  # (make system-deps installs it)
    assert v2_infer.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for scenario in ("v1 predict", "V2 infer, JSON", "V2 infer, binary"):
        assert any(line.startswith(scenario) and "req/s" in line for line in out.splitlines())


def run(repeat: int, rps: float, cpu: float) -> dict:
    return {
        "repeat": repeat,
        "rps": rps,
        "p50_ms": 1.0,
        "p99_ms": 2.0,
        "server_cpu_us": cpu,
        "non_2xx": 0,
        "load_average": 0.5,
    }


def test_ratios_are_taken_within_each_repeat_then_their_median():
    record = {
        "runs": {
            "v1 predict": [run(0, 1000, 100), run(1, 500, 200), run(2, 800, 100)],
            "V2 infer, JSON": [run(0, 900, 125), run(1, 500, 200), run(2, 400, 200)],
        }
    }
    v1, v2 = v2_infer.summary(record)
    assert v1["ratio"] == 1.0 and v1["rps"] == 800
    assert v2["ratios"] == [0.9, 1.0, 0.5] and v2["ratio"] == 0.9
    assert v2["cpu_ratio"] == 0.8 and v2["server_cpu_us"] == 200
