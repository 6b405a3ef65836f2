"""Predictions per second of ``lorentztron serve --workers N`` on one host, N = 1, 2, 4, 8.

Each N runs ``lorentztron serve --workers N`` on a fresh Redis (N = 1: the one process of
the default, on the same Redis), creates a linear-pa model of 30 features, teaches it a
little, then drives ``POST /v1/models/m/predict`` (one instance of 30 features) with wrk
(``wrk -t2 -c64``, a keep-alive connection each) for ``--duration`` seconds after a
short warm-up. The N are measured in rounds, the order reversed every other round (the
machine is shared: a neighbour's load lands on every N alike), and the table holds the
median of the rounds and each N's median ratio to N = 1 within a round.

    python -m benchmarks.workers                  # the table in docs/scaling.md
    python -m benchmarks.workers --workers 1 2 --rounds 5 --duration 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.environment import ROOT, commit, cpu_name
from benchmarks.markdown import replace_section
from benchmarks.servers import SERVE, RedisServer, ServiceProcess

BEGIN, END = "<!-- workers:begin -->", "<!-- workers:end -->"
DOCS = ROOT / "docs" / "scaling.md"
N_FEATURES = 30
COMMAND = "python -m benchmarks.workers"


def _lua(directory: Path) -> Path:
    """wrk's script: one prediction request, the same every time."""
    x = np.random.default_rng(0).uniform(-1, 1, N_FEATURES).round(3).tolist()
    body = json.dumps({"instances": [{"indices": list(range(N_FEATURES)), "values": x}]})
    script = directory / "predict.lua"
    script.write_text(
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = {json.dumps(body)}\n"
    )
    return script


def _wrk(url: str, script: Path, seconds: float, connections: int) -> tuple[float, int]:
    """(requests per second, non-2xx answers and socket errors) of one wrk run."""
    done = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script),
         f"{url}/v1/models/m/predict"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))
    errors = sum(
        int(n)
        for n in re.findall(
            r"(?:Non-2xx or 3xx responses|connect|read|write|timeout)[: ]+(\d+)", done.stdout
        )
    )
    return rate, errors


def measure(workers: int, script: Path, seconds: float, connections: int, directory: Path):
    """(predict req/s, errors) of one ``serve --workers N`` on a fresh Redis."""
    with RedisServer(directory).start() as redis_server:
        env = {
            "LORENTZTRON_REDIS_URL": redis_server.url,
            "LORENTZTRON_LOG_LEVEL": "warning",
            "LORENTZTRON_WORKERS": str(workers),
        }
        with ServiceProcess(env, directory / f"serve-{workers}.log", command=SERVE) as server:
            server.start()
            spec = {"name": "m", "kind": "linear-pa", "input": {"n_features": N_FEATURES}}
            assert httpx.post(f"{server.url}/v1/models", json=spec, timeout=60).status_code == 201
            rng = np.random.default_rng(1)
            for _ in range(20):
                example = {
                    "indices": list(range(N_FEATURES)),
                    "values": rng.uniform(-1, 1, N_FEATURES).tolist(),
                    "label": int(rng.choice([-1, 1])),
                }
                httpx.post(
                    f"{server.url}/v1/models/m/feedback", json={"examples": [example]}, timeout=30
                ).raise_for_status()
            _wrk(server.url, script, 2, connections)  # warm-up: every process has the model
            return _wrk(server.url, script, seconds, connections)


def render(result: dict) -> str:
    base = result["runs"]["1"]
    lines = [
        "## Workers on one host: predictions per second",
        "",
        f"Written by `{COMMAND}` on {result['date']} (commit {result['commit']}, "
        f"{result['cpus']} CPUs: {result['cpu']}; load average before {result['load'][0]:.2f}, "
        f"after {result['load'][1]:.2f}). `lorentztron serve --workers N` on a fresh Redis "
        "(N = 1: the one process of the default), `POST /v1/models/m/predict` of one "
        f"instance of {N_FEATURES} features (linear-pa) driven by wrk "
        f"(`wrk -t2 -c{result['connections']} -d{result['duration']:g}s`) on the same "
        "machine; the N measured in turn, the order reversed every other round, "
        f"{result['rounds']} rounds. The machine is shared with other work (the load "
        "averages): read the medians, and the ratios measured within a round.",
        "",
        "| workers | cores | req/s (median) | req/s (each round) | ratio to 1 worker "
        "(median of rounds) | errors |",
        "|---:|---:|---:|---|---:|---:|",
    ]
    for n, rates in result["runs"].items():
        ratios = [r / b for r, b in zip(rates, base, strict=True)]
        lines.append(
            f"| {n} | {result['cpus']} | {statistics.median(rates):,.0f} | "
            f"{', '.join(f'{r:,.0f}' for r in rates)} | {statistics.median(ratios):.2f}x | "
            f"{result['errors'][n]} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--no-docs", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    if 1 not in args.workers:
        parser.error("--workers must include 1 (the ratios' base)")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    runs = {str(n): [] for n in args.workers}
    errors = {str(n): 0 for n in args.workers}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        script = _lua(directory)
        for round_ in range(args.rounds):
            order = args.workers if round_ % 2 == 0 else args.workers[::-1]
            for n in order:
                rate, failed = measure(n, script, args.duration, args.connections, directory)
                runs[str(n)].append(rate)
                errors[str(n)] += failed
                print(f"round {round_ + 1}: --workers {n}: {rate:,.0f} req/s", flush=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "cpu": cpu_name(),
        "load": (load_before, os.getloadavg()[0]),
        "rounds": args.rounds,
        "duration": args.duration,
        "connections": args.connections,
        "runs": runs,
        "errors": errors,
    }
    table = render(result)
    print(table)
    if not args.no_docs:
        replace_section(DOCS, BEGIN, END, table)


if __name__ == "__main__":
    main()
