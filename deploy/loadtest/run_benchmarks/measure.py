"""The measurements: each scenario run ``--repeats`` times against the service, and back to
back against the bare app where it has a baseline, with the CPU time of everything
involved."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks.servers import ServiceProcess
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.generator import LoadGenerator
from deploy.loadtest.loadgen.report import format_summary
from deploy.loadtest.loadgen.workload import Workload
from deploy.loadtest.run_benchmarks.aggregate import aggregate
from deploy.loadtest.run_benchmarks.machine import (
    busy_processes,
    environment,
    machine_busy_seconds,
    wait_for_quiet,
)
from deploy.loadtest.run_benchmarks.scenarios import (
    BASELINE_RATIOS,
    DESCRIPTIONS,
    scenario_configs,
    targets_of,
)
from deploy.loadtest.run_benchmarks.servers import server as make_server


class RunningServer:
    """A service started elsewhere (``--url``): measured as it is, never started or stopped
    here; its CPU time is unknown (its process may be on another machine)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def cpu_seconds(self) -> None:
        return None


def measure(server: ServiceProcess | RunningServer, config: LoadConfig, workload: Workload) -> dict:
    """One run, with the server's CPU time over the measured phase (warm-up excluded) and
    the CPU that everything else on the machine used meanwhile (both None for a server
    started elsewhere, whose CPU time is unknown)."""
    marks: list[tuple[float, float, float]] = []

    def mark():
        marks.append((server.cpu_seconds(), machine_busy_seconds(), time.process_time()))

    generator = LoadGenerator(config, workload, before_measure=mark, after_measure=mark)
    load_before = os.getloadavg()
    summary = asyncio.run(generator.run())
    summary["loadavg_before"] = [round(x, 2) for x in load_before]
    summary["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    bulk = config.mode == "bulk"
    key = "server_cpu_us_per_example" if bulk else "server_cpu_us_per_request"
    if marks[0][0] is None:  # a running server's (--url): its CPU is not ours to read
        summary.update(other_cpu_share=None, server_cpu_s=None, server_cpu_share=None)
        summary[key] = None
        return summary
    cpu = marks[1][0] - marks[0][0]
    machine = marks[1][1] - marks[0][1]
    client = marks[1][2] - marks[0][2]
    wall = max(summary["elapsed_s"], 1e-9)
    # CPU used by other processes while this run was measured, in cores
    summary["other_cpu_share"] = round(max(0.0, machine - cpu - client) / wall, 4)
    summary["server_cpu_s"] = round(cpu, 4)
    summary["server_cpu_share"] = round(cpu / max(summary["elapsed_s"], 1e-9), 4)
    done = summary["examples_learned"] if bulk else summary["ok"]
    summary[key] = round(1e6 * cpu / done, 2) if done else None
    return summary


def run_scenarios(args: argparse.Namespace, names: list[str]) -> dict:
    """Start the servers, run the scenarios ``names`` as ``args`` say, stop the servers;
    the results: every run, a row per scenario, the machine and what else ran on it."""
    busy: dict[str, dict] = {}
    result: dict = {
        "environment": environment(),
        "settings": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in {"md", "json", "note", "notes_file", "costs", "render", "key"}
        },
        "scenarios": [],
        "runs": {},
        "notes": args.note,
        "costs": json.loads(args.costs.read_text()) if args.costs else None,
    }
    with tempfile.TemporaryDirectory(prefix="lorentztron-bench-") as directory:
        extra_env = dict(item.split("=", 1) for item in args.server_env)
        cpus = {1} if args.pin else None
        kinds = ["service"]
        if args.baseline and BASELINE_RATIOS.keys() & set(names):
            kinds.append("bare")
        if args.url:  # a running service: nothing to start, no baseline beside it
            kinds = []
        servers = {
            kind: make_server(kind, Path(directory), args.log_level, cpus, extra_env)
            for kind in kinds
        }
        try:
            for kind, each in servers.items():
                each.launch()
                print(f"starting the {kind} server on {each.url} ...", flush=True)
                each.wait_ready(timeout=300)
            ours = {os.getpid(), *(each.process.pid for each in servers.values())}
            if args.url:
                servers["service"] = RunningServer(args.url)
                print(f"measuring the service running at {args.url}", flush=True)
            configs = {kind: scenario_configs(args, each.url) for kind, each in servers.items()}
            for name in names:
                config = configs["service"][name]
                workload = Workload(config)
                runs, bare_runs = [], []
                for repeat in range(args.repeats):
                    # the service and the bare app back to back, the order alternating
                    turns = [("service", runs)]
                    if "bare" in servers and name in BASELINE_RATIOS:
                        turns.append(("bare", bare_runs))
                        if repeat % 2:
                            turns.reverse()
                    for kind, into in turns:
                        waited = wait_for_quiet(args.max_load, args.max_wait)
                        for p in busy_processes(ours):
                            busy.setdefault(p["command"], p)
                            busy[p["command"]]["pcpu"] = max(busy[p["command"]]["pcpu"], p["pcpu"])
                        summary = measure(servers[kind], configs[kind][name], workload)
                        summary["waited_for_quiet_s"] = round(waited, 1)
                        summary["server"] = kind
                        into.append(summary)
                        print(f"[{name} {repeat + 1}/{args.repeats}, {kind}]")
                        print(format_summary(summary), flush=True)
                row = aggregate(name, runs, targets_of(name, args), bare_runs)
                row["description"] = DESCRIPTIONS[name].format(
                    rate=args.predict_rate, low_rate=args.low_rate, batch=args.batch
                )
                result["scenarios"].append(row)
                result["runs"][name] = runs
                if bare_runs:
                    result["runs"][f"{name} (bare)"] = bare_runs
        finally:
            for each in servers.values():
                if not isinstance(each, RunningServer):
                    each.stop()
    result["busy_processes"] = sorted(busy.values(), key=lambda p: -p["pcpu"])
    return result
