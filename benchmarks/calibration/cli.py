"""The entry of the calibration study: ``python -m benchmarks.calibration [--quick]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import calibration
from benchmarks.calibration.report import render, write_outputs
from benchmarks.calibration.study import run_a9a, run_mnist
from benchmarks.environment import ROOT, environment


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.calibration", description=calibration.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small subsets (a smoke test)")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the MNIST digits")
    parser.add_argument("--seed", type=int, default=0, help="seed of the MNIST shuffles")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output folder")
    args = parser.parse_args(argv)
    results = {
        "config": {"quick": args.quick, "epochs": args.epochs, "seed": args.seed},
        "environment": environment(),
        "a9a": run_a9a(args.quick),
        "mnist": run_mnist(args.quick, 1 if args.quick else args.epochs, args.seed),
    }
    command = "python -m benchmarks.calibration" + (" --quick" if args.quick else "")
    write_outputs(results, command, args.out)
    print(render(results, command))
    return results
