"""The entry of the speed study: ``python -m benchmarks.speed_pa [--quick] [--peers ...]``."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import warnings
from pathlib import Path

from benchmarks import speed_pa
from benchmarks.environment import ROOT, environment
from benchmarks.speed_pa.breakdown import breakdown
from benchmarks.speed_pa.learners import PEER_GROUPS, build_learners
from benchmarks.speed_pa.measure import Measurement, measure_stream, warm_up_ours
from benchmarks.speed_pa.report import (
    fmt_us,
    ratio_lines,
    render,
    target_checks,
    write_section,
)
from benchmarks.streams import Stream, mnist_stream, sparse_stream

DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
#: the packages whose versions a run records, per peer group
PEER_PACKAGES = {"river": "river", "sklearn": "scikit-learn", "vw": "vowpalwabbit"}


def log(line: str) -> None:
    print(line, flush=True)


def parse_peers(text: str) -> set[str]:
    if text == "all":
        return set(PEER_GROUPS)
    if text == "none":
        return set()
    peers = {p.strip() for p in text.split(",") if p.strip()}
    unknown = peers - set(PEER_GROUPS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peers {sorted(unknown)}; use {PEER_GROUPS}")
    return peers


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed_pa", description=speed_pa.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (< 30 s)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per number (default 5)")
    parser.add_argument(
        "--peers",
        type=parse_peers,
        default="all",
        help="all, none, or a comma list of river,sklearn,vw",
    )
    parser.add_argument(
        "--streams",
        default="mnist,sparse30,sparse150",
        help="comma list of mnist,sparse30,sparse150",
    )
    parser.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="markdown file whose section to rewrite ('-': print only); the "
        "raw numbers go to speed_pa.json beside it",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds per run above which a peer is timed on a prefix",
    )
    parser.add_argument("--no-breakdown", action="store_true", help="skip the cost breakdown")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    peers = args.peers if isinstance(args.peers, set) else parse_peers(args.peers)
    quick = args.quick
    repeats = args.repeats or (1 if quick else 5)
    budget = args.budget or (0.1 if quick else 2.0)
    min_rows = 8 if quick else 100
    n_mnist, n_sparse = (1000, 2000) if quick else (10_000, 20_000)
    n_features = 1 << (16 if quick else 20)
    started = time.perf_counter()

    streams: list[Stream] = []
    for name in (s.strip() for s in args.streams.split(",") if s.strip()):
        if name == "mnist":
            try:
                streams.append(mnist_stream(n_mnist))
            except (OSError, ValueError) as error:
                log(f"stream mnist skipped: {error}")
        elif name in ("sparse30", "sparse150"):
            nnz = int(name.removeprefix("sparse"))
            streams.append(sparse_stream(name, n_sparse, nnz, n_features, seed=nnz))
        else:
            parser().error(f"unknown stream {name!r}")
    if not streams:
        parser().error("no stream to run")
    learners = build_learners(peers)
    warm_up_ours(streams)

    results: list[Measurement] = []
    for stream in streams:
        log(f"{stream.name}: {stream.description}")
        with warnings.catch_warnings():  # scikit-learn's deprecation of PassiveAggressive
            warnings.simplefilter("ignore")
            results += measure_stream(stream, learners, repeats, budget, min_rows, log)
        stream.drop_views()
        for m in results:
            if m.stream == stream.name and m.median_us is not None:
                log(f"  {m.learner:28s} {m.op:12s} {fmt_us(m.median_us):>8s} us  ({m.rows} rows)")

    breakdown_rows: list[dict] = []
    breakdown_stream = next((s for s in streams if s.name == "sparse150"), None)
    if breakdown_stream is not None and not args.no_breakdown:
        log("breakdown")
        uniform = sparse_stream(
            "sparse150-uniform", breakdown_stream.n_rows, 150, n_features, seed=1150, uniform=True
        )
        breakdown_rows = breakdown(breakdown_stream, uniform, repeats)
        for r in breakdown_rows:
            log(f"  {r['model']:12s} {r['part']:62s} {fmt_us(r['median_us']):>8s} us")

    arguments = sys.argv[1:] if argv is None else argv
    machine = environment(*(PEER_PACKAGES[group] for group in sorted(peers)))
    meta = {
        "command": " ".join(["python -m benchmarks.speed_pa", *arguments]),
        "date": datetime.date.today().isoformat(),
        "cpu": machine["cpu"],
        "cpus": machine["cpus"],
        "versions": machine["versions"],
        "commit": machine["commit"],
        "repeats": repeats,
        "budget_seconds": budget,
        "quick": quick,
        "breakdown_stream": "sparse150",
    }
    section = render(results, streams, learners, breakdown_rows, meta)
    if args.out == "-":
        print(section)
    else:
        out = Path(args.out)
        write_section(out, section)
        raw = {
            "meta": meta,
            "streams": [
                {
                    "name": s.name,
                    "rows": s.n_rows,
                    "features": s.n_features,
                    "mean_nnz": s.mean_nnz,
                    "description": s.description,
                }
                for s in streams
            ],
            "results": [m.as_json() for m in results],
            "ratios": ratio_lines(results, streams),
            "targets": target_checks(results, breakdown_rows),
            "breakdown": breakdown_rows,
        }
        out.with_name("speed_pa.json").write_text(json.dumps(raw, indent=1) + "\n")
        log(f"wrote {out} and {out.with_name('speed_pa.json')}")
    log(f"done in {time.perf_counter() - started:.1f} s")
    return 0
