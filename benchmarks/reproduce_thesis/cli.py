"""The entry of the thesis reproduction: ``python -m benchmarks.reproduce_thesis [--quick]``."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks import reproduce_thesis
from benchmarks.environment import ROOT, environment
from benchmarks.reproduce_thesis.figure74 import run_figure
from benchmarks.reproduce_thesis.report import write_outputs
from benchmarks.reproduce_thesis.table61 import THESIS_TABLE_6_1, run_problem, table_checks

COMMAND = "python -m benchmarks.reproduce_thesis"


@dataclass
class Settings:
    """What one run does: the Table 6.1 problems and the Figure 7.4 tests; ``quick`` shrinks
    both to seconds."""

    quick: bool
    problems: tuple[str, ...] = tuple(THESIS_TABLE_6_1)
    tests: int = 500
    exponents: tuple[float, ...] = (0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0)
    train: int = 50  # per class
    test: int = 200  # per class
    seed: int = 0

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if quick:
            return cls(True, ("mcp100", "mcp124-1"), tests=3, exponents=(0.0, -1.5, -3.0))
        return cls(False)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=reproduce_thesis.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="two problems, three tests")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output directory")
    parser.add_argument("--from-json", type=Path, help="rebuild outputs from a saved JSON")
    parser.add_argument("--no-figure", action="store_true", help="only Table 6.1")
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(args.from_json.read_text())
        write_outputs(result, args.out)
        return result
    settings = Settings.make(args.quick)
    started = time.perf_counter()
    print("Table 6.1")
    rows = [run_problem(name) for name in settings.problems]
    result = {
        "settings": asdict(settings),
        "command": COMMAND + (" --quick" if args.quick else ""),
        "environment": environment(),
        "table_6_1": rows,
        "checks": table_checks(rows),
    }
    if not args.no_figure:
        print("Figure 7.4")
        result["figure_7_4"] = run_figure(settings)
    result["seconds"] = time.perf_counter() - started
    write_outputs(result, args.out)
    print(json.dumps(result["checks"]))
    return result
