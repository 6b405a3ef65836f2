"""The entry of the service benchmarks: ``python -m deploy.loadtest.run_benchmarks``."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from deploy.loadtest import run_benchmarks
from deploy.loadtest.loadgen.config import KINDS
from deploy.loadtest.run_benchmarks.aggregate import baseline_of
from deploy.loadtest.run_benchmarks.measure import run_scenarios
from deploy.loadtest.run_benchmarks.report import markdown, write_section
from deploy.loadtest.run_benchmarks.scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    """Measure (or ``--render`` saved results), print the section, write it if asked."""
    parser = argparse.ArgumentParser(
        prog="python -m deploy.loadtest.run_benchmarks",
        description=run_benchmarks.__doc__.split("\n\n")[0],
    )
    add = parser.add_argument
    add(
        "--url",
        help="measure the service already running at this URL instead of starting one: no "
        "server is started or stopped, no bare-app baseline, and the server's CPU is not "
        "measured (each run still creates and deletes its own model)",
    )
    add(
        "--key",
        default=os.environ.get("LORENTZTRON_KEY"),
        help="bearer key for a --url service with keys ($LORENTZTRON_KEY)",
    )
    add("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset")
    add("--repeats", type=int, default=3)
    add("--duration", type=float, default=10.0, help="measured seconds per run")
    add("--warmup", type=float, default=2.0, help="unmeasured seconds before each run")
    add("--drain-timeout", type=float, default=30.0)
    add("--predict-rate", type=float, default=500.0, help="the open-loop target rate")
    add("--low-rate", type=float, default=100.0, help="a second, lighter open-loop rate")
    add(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="the generator's HTTP client (raw: asyncio streams, ~10x less CPU than httpx)",
    )
    add("--costs", type=Path, help="JSON of cost_breakdown.py to render under the table")
    add(
        "--render",
        type=Path,
        metavar="JSON",
        help="measure nothing: re-render the section from this results JSON (with --note, "
        "--costs replacing its notes and costs when given)",
    )
    add("--open-connections", type=int, default=64, help="open loop: most connections")
    add("--concurrency", type=int, default=8, help="closed-loop clients")
    add("--bulk-concurrency", type=int, default=2)
    add("--batch", type=int, default=20_000, help="bulk: examples per svmlight body")
    add("--kind", choices=KINDS, default="dos")
    add("--rank", type=int, default=16)
    add("--n-features", type=int, default=1 << 18)
    add("--nnz", type=int, default=30)
    add("--seed", type=int, default=0)
    add("--averaging-interval", type=int, help="the models' (default: the service's)")
    add("--log-level", default="info", help="the server's log level (the service default)")
    add(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of the server (e.g. OPENBLAS_NUM_THREADS=1)",
    )
    add(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="do not measure the bare FastAPI app (bare_app.py) beside the closed loops",
    )
    add("--pin", action="store_true", help="server on CPU 1, generator on CPU 0")
    add(
        "--max-load",
        type=float,
        help="before each run, wait until the 1-minute load average is at most this",
    )
    add("--max-wait", type=float, default=600.0, help="longest wait for --max-load, seconds")
    add("--note", action="append", default=[], help="a paragraph added under the tables")
    add("--notes-file", type=Path, help="markdown added under the tables")
    add("--md", type=Path, help="replace the service section of this markdown file")
    add("--json", type=Path, help="write every run to this JSON file")
    args = parser.parse_args(argv)
    if args.notes_file:
        args.note.append(args.notes_file.read_text())
    if args.render:
        result = json.loads(args.render.read_text())
        for row in result["scenarios"]:  # (the baseline's figures as this version has them)
            bare_runs = result["runs"].get(f"{row['scenario']} (bare)")
            if bare_runs:
                row.update(baseline_of(result["runs"][row["scenario"]], bare_runs))
        if args.note:
            result["notes"] = args.note
        if args.costs:
            result["costs"] = json.loads(args.costs.read_text())
        return publish(result, args)
    names = [name for name in args.scenarios.split(",") if name]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; known: {SCENARIOS}")
    if args.url:
        if args.pin:
            parser.error("--pin places the server it starts: not with --url")
        args.baseline = False  # the bare app is compared with a service started beside it
    if args.pin:
        os.sched_setaffinity(0, {0})
    return publish(run_scenarios(args, names), args)


def publish(result: dict, args: argparse.Namespace) -> int:
    """Print the section, and write it and the results where ``--md`` and ``--json`` say."""
    section = markdown(result)
    print()
    print(section)
    if args.md is not None:
        write_section(args.md, section)
        print(f"wrote the service section of {args.md}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0
