"""The entry of the load generator: ``python -m deploy.loadtest.loadgen [--mode ...]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from deploy.loadtest import loadgen
from deploy.loadtest.loadgen.config import KINDS, MODES, LoadConfig
from deploy.loadtest.loadgen.generator import run
from deploy.loadtest.loadgen.report import format_summary, format_sweep
from deploy.loadtest.loadgen.sweep import sweep

#: what the printed summary's rows mean (``--help``'s epilog)
OUTPUT = """\
the summary's rows:
  all / predict / feedback / bulk  latency of the answered requests, ms: in closed loop
      from sending to the whole answer; in open loop from the request's due time on the
      fixed schedule (so that the generator's own delays are counted, not hidden)
  send lag  open loop only: how late the generator started requests after their due
      time, ms. Near zero: the schedule was kept. Large (p50 above a millisecond or so):
      the generator itself could not keep up (its CPU, its event loop), and the latencies
      above include that wait: lower --rate, or see "generator CPU"
  generator CPU  the generator's own CPU time, and the share of one core it used
"""


def parse_args(argv: list[str] | None = None) -> tuple[LoadConfig, dict]:
    """The run's options, and the others (``json``, ``sweep``, ``sweep_factor``,
    ``sweep_max``, ``p99_max``)."""
    defaults = LoadConfig()
    parser = argparse.ArgumentParser(
        prog="python -m deploy.loadtest.loadgen",
        description=loadgen.__doc__.split("\n\n")[0],
        epilog=OUTPUT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--url", default=defaults.url, help="service base URL (default %(default)s)")
    add("--mode", choices=MODES, default=defaults.mode)
    add("--rate", type=float, help="open loop: requests/s on a fixed schedule")
    add(
        "--concurrency",
        type=int,
        default=defaults.concurrency,
        help="closed loop: clients; open loop: most connections (default %(default)s)",
    )
    add("--duration", type=float, default=defaults.duration, help="measured seconds")
    add("--warmup", type=float, default=defaults.warmup, help="unmeasured seconds first")
    add("--drain-timeout", type=float, default=defaults.drain_timeout)
    add("--max-requests", type=int, default=defaults.max_requests)
    add("--max-inflight", type=int, default=defaults.max_inflight, help="open loop cap")
    add("--timeout", type=float, default=defaults.timeout, help="per request, seconds")
    add("--kind", choices=KINDS, default=defaults.kind)
    add("--rank", type=int, default=defaults.rank)
    add("--n-features", type=int, default=defaults.n_features, help="hashed buckets")
    add("--nnz", type=int, default=defaults.nnz, help="non-zeros per example")
    add("--batch", type=int, default=defaults.batch, help="bulk: examples per body")
    add("--bulk-bodies", type=int, default=defaults.bulk_bodies, help="distinct bulk bodies")
    add("--pool", type=int, default=defaults.pool, help="distinct single examples")
    add("--feedback-fraction", type=float, default=defaults.feedback_fraction)
    add("--label-noise", type=float, default=defaults.label_noise)
    add("--averaging-interval", type=int, help="model's averaging interval (service default)")
    add("--variant", choices=("live", "averaged"), default=defaults.variant)
    add(
        "--client",
        choices=("raw", "httpx"),
        default=defaults.client,
        help="raw (the default): HTTP/1.1 keep-alive over plain asyncio streams, the same "
        "requests and the same latency (from the due time to the whole answer) for a "
        "fraction of httpx's CPU, which otherwise competes with the server measured on one "
        "machine; httpx: an httpx.AsyncClient (needed for https)",
    )
    add("--seed", type=int, default=defaults.seed)
    add(
        "--model",
        help="use this existing model (its input size and classes are read from the service)",
    )
    add("--key", default=os.environ.get("LORENTZTRON_KEY"), help="bearer key ($LORENTZTRON_KEY)")
    add("--sweep", action="store_true", help="open loop at rising rates from --rate: the knee")
    add("--sweep-factor", type=float, default=2.0, help="rate multiplier per sweep step")
    add("--sweep-max", type=float, default=20_000.0, help="the last sweep rate at most")
    add("--p99-max", type=float, default=50.0, help="sweep: the p99 bound, milliseconds")
    add("--keep-model", action="store_true", help="do not delete the created model")
    add("--allow-remote", action="store_true", help="allow a non-loopback --url")
    add("--json", type=Path, help="write the summary (or the sweep) to this JSON file")
    args = vars(parser.parse_args(argv))
    options = {name: args.pop(name) for name in ("json", "sweep", "sweep_factor", "sweep_max")}
    options["p99_max"] = args.pop("p99_max")
    return LoadConfig(**args), options


def main(argv: list[str] | None = None) -> int:
    config, options = parse_args(argv)
    try:
        config.check()
        if options["sweep"]:
            result = sweep(
                config, options["sweep_factor"], options["sweep_max"], options["p99_max"]
            )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not options["sweep"]:
        result = run(config)
    print(format_sweep(result) if options["sweep"] else format_summary(result))
    if options["json"] is not None:
        options["json"].write_text(json.dumps(result, indent=1) + "\n")
    if options["sweep"]:
        return 0 if result["knee_rate"] is not None else 1
    return 0 if result["errors"] == 0 else 1
