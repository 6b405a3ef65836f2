"""The entry of the durability measurements: ``python -m benchmarks.service_durability
[--quick] [--parts ...] [--render JSON]``."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks import service_durability
from benchmarks.environment import commit
from benchmarks.service_durability.freshness import freshness
from benchmarks.service_durability.recovery import recovery
from benchmarks.service_durability.replicas import replicas
from benchmarks.service_durability.report import publish, render
from benchmarks.service_durability.throughput import throughput


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.service_durability",
        description=service_durability.__doc__.split("\n\n")[0],
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--log-lengths", type=int, nargs="+", default=[0, 1_000, 10_000, 50_000])
    parser.add_argument("--parts", default="throughput,recovery,replicas,freshness")
    parser.add_argument("--feedback-rate", type=float, default=1000.0)
    parser.add_argument("--freshness-duration", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="tiny runs, print only")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the tables")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="measure nothing: re-render from this JSON"
    )
    parser.add_argument("--output", type=Path, help="write the results JSON here, not docs/")
    parser.add_argument("--merge", type=Path, metavar="JSON", help="with --render: parts to add")
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
        if args.merge:  # add the parts of another run (e.g. one --parts) to this one
            other = json.loads(args.merge.read_text())
            for part in ("throughput", "recovery", "replicas", "freshness"):
                if other.get(part):
                    result[part] = other[part]
            result["settings"].update(
                {k: v for k, v in other["settings"].items() if k.startswith(("feedback", "fresh"))}
            )
        result["notes"] = args.note or result.get("notes", [])
        publish(result)
        return 0
    if args.quick:
        args.repeats, args.duration, args.batch, args.log_lengths = 1, 1.0, 500, [0, 200]
    result = {
        "environment": {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit(),
            "cpus": os.cpu_count(),
            "load_before": round(os.getloadavg()[0], 2),
        },
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "notes": args.note,
    }
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory(prefix="lorentztron-durability-") as tmp:
        for name, function in (
            ("throughput", throughput),
            ("recovery", recovery),
            ("replicas", replicas),
            ("freshness", freshness),
        ):
            result[name] = function(args, Path(tmp)) if name in parts else []
    result["environment"]["load_after"] = round(os.getloadavg()[0], 2)
    print(render(result))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1, default=str) + "\n")
    elif not args.quick:
        publish(result)
    return 0
