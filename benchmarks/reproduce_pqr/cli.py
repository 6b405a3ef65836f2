"""The entry of the PQR reproduction: ``python -m benchmarks.reproduce_pqr [--quick]
[--movielens PATH]``."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks import reproduce_pqr
from benchmarks.environment import ROOT, environment
from benchmarks.reproduce_pqr.a9a import run_a9a
from benchmarks.reproduce_pqr.movielens import run_movielens
from benchmarks.reproduce_pqr.report import write_outputs
from benchmarks.reproduce_pqr.settings import Settings
from benchmarks.reproduce_pqr.speed import run_speed

COMMAND = "python -m benchmarks.reproduce_pqr"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=reproduce_pqr.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny subsets and grids (seconds)")
    parser.add_argument("--movielens", type=Path, help="a MovieLens-100K folder (Table 3)")
    parser.add_argument("--no-a9a", action="store_true", help="skip a9a and the speed tables")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output directory")
    parser.add_argument(
        "--from-json", type=Path, help="rebuild the outputs from a saved reproduce_pqr.json"
    )
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = parser().parse_args(argv)
    if args.from_json:
        result = json.loads(args.from_json.read_text())
        write_outputs(result, args.out)
        return result
    settings = Settings.make(args.quick)
    result: dict = {
        "settings": {**asdict(settings), "mode": "quick" if args.quick else "full"},
        "command": COMMAND + (" --quick" if args.quick else ""),
        "environment": environment("river", "vowpalwabbit"),
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        if not args.no_a9a:
            print("a9a (Table 4 analogue)", flush=True)
            result["a9a"], makers = run_a9a(settings, workdir)
            print("speed", flush=True)
            result["speed"] = run_speed(settings, workdir, makers)
            timing = {r["model"]: r for r in result["speed"]["rows"] if r["stream"] == "a9a"}
            for row in result["a9a"]["rows"]:
                row["time_vs_lr"] = timing[row["model"]]["vs_lr"]
        if args.movielens:
            print("MovieLens (Table 3 protocol)", flush=True)
            result["movielens"] = run_movielens(args.movielens, settings)
    result["seconds"] = time.perf_counter() - started
    write_outputs(result, args.out)
    print(f"wrote {args.out}: reproduce_pqr.json, pqr.md ({result['seconds']:.0f} s)", flush=True)
    return result
