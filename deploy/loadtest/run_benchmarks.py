"""Service benchmarks: start ``lorentztron serve`` on a free loopback port, drive it with
``loadgen.py`` through every scenario a few times, stop it, print the medians, and write them
where you name: ``--md PATH`` (a markdown file whose section between
``<!-- service:begin -->`` and ``<!-- service:end -->`` is replaced, the rest left alone;
the project's is ``docs/benchmarks.md``) and ``--json PATH`` (every run; the project's is
``docs/service_benchmarks.json``). Without them nothing is written.

The server is one uvicorn process as deployed (``python -m service.ops.cli serve``), with local
snapshots in a temporary directory and a snapshot interval of an hour (so snapshots do not
run during the measurements). The load generator runs in this process, on the same machine:
it competes with the server for the CPUs, and ``client_cpu_share`` in the JSON says how much
of a core it used; by default it sends requests over plain asyncio streams (``--client raw``),
which costs about a tenth of httpx's CPU per request. ``--pin`` puts the server on CPU 1 and
the generator on CPU 0 (Linux ``sched_setaffinity``); anything else running on the machine is
recorded with the results.

Scenarios (model: DoS rank 16 over 2^18 hashed features, ~30 non-zeros per example):

- ``predict_open``: single-instance predictions at ``--predict-rate`` req/s on a fixed
  schedule (open loop; target p99 < 5 ms at 500 req/s);
- ``predict_open_low``: the same at ``--low-rate`` req/s (latency below saturation);
- ``predict_closed``: single-instance predictions from ``--concurrency`` clients in closed
  loop (the largest sustained rate);
- ``feedback_closed``: single-example JSON feedback, closed loop (target >= 2,000 req/s);
- ``bulk``: svmlight bodies of ``--batch`` examples (target >= 100,000 examples/s);
- ``mixed_closed``: 80% predictions / 20% feedback by prediction id, closed loop.

The closed-loop predict and feedback scenarios are also run against a bare FastAPI app with
the same endpoints and body shapes and no model behind them (``bare_app.py``, under the same
uvicorn settings, started beside the service): in each repeat the two are measured back to
back (the order alternating), and the report gives the service's throughput as a fraction
of the bare app's (targets: predict >= 0.8, durable feedback >= 0.65). ``--no-baseline``
skips it.

    # 3 runs of 10 s each, written into the project's docs
    python deploy/loadtest/run_benchmarks.py --md docs/benchmarks.md \
        --json docs/service_benchmarks.json
    python deploy/loadtest/run_benchmarks.py --duration 3 --repeats 1   # smoke: print only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402

sys.path.insert(0, str(ROOT))
from benchmarks.markdown import replace_section  # noqa: E402
from service.config import Settings  # noqa: E402

DEFAULT_INTERVAL = Settings.model_fields["averaging_interval"].default

BEGIN = "<!-- service:begin -->"
END = "<!-- service:end -->"
SCENARIOS = (
    "predict_open",
    "predict_open_low",
    "predict_closed",
    "feedback_closed",
    "bulk",
    "mixed_closed",
)


# -- the server -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: the server processes: the service as deployed, and the bare FastAPI baseline
COMMANDS = {
    "service": [sys.executable, "-m", "service.ops.cli", "serve"],
    "bare": [sys.executable, str(HERE / "bare_app.py")],
}


class Server:
    """``python -m service.ops.cli serve`` (or the bare baseline app, ``command="bare"``) in a
    subprocess, its log in ``directory``."""

    def __init__(
        self,
        directory: Path,
        log_level: str,
        cpus: set[int] | None,
        extra_env: dict[str, str] | None = None,
        command: str = "service",
    ):
        self.directory = directory
        self.extra_env = extra_env or {}
        self.port = free_port()
        self.log_level = log_level
        self.cpus = cpus
        self.command = command
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 300.0) -> None:
        env = dict(os.environ)
        env.update(
            LORENTZTRON_SNAPSHOT_DIR=str(self.directory / "snapshots"),
            LORENTZTRON_SNAPSHOT_INTERVAL="3600",
            LORENTZTRON_LOG_LEVEL=self.log_level,
        )
        env.pop("LORENTZTRON_REDIS_URL", None)  # local snapshots
        env.update(self.extra_env)
        env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
        cpus = self.cpus
        log = self.directory / f"{self.command}.log"
        self.log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [*COMMANDS[self.command], "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=5) as http:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited; see {log}")
                try:
                    if http.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the server was not ready in time")
                time.sleep(0.2)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None:
            self.log.close()


# -- environment ----------------------------------------------------------------------------
def busy_processes(exclude: set[int], limit: int = 6) -> list[dict]:
    """The processes using the most CPU right now (besides ours), from ``ps``."""
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid=,pcpu=,args=", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in out.splitlines():
        pid, pcpu, args = line.split(None, 2)
        if int(pid) in exclude or float(pcpu) < 5.0 or args.startswith("ps "):
            continue
        rows.append({"pcpu": float(pcpu), "command": program_of(args)})
        if len(rows) >= limit:
            break
    return rows


def program_of(args: str) -> str:
    """A process's program and script without its arguments (``python -m pytest``, ...)."""
    words = args.split()
    keep = 3 if len(words) > 2 and words[1] in {"-m", "-u", "-X", "-O"} else 2
    return " ".join(words[:keep])[:100]


def environment() -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "service", "core"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()[1::2]
    try:
        cpu_model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu_model = platform.processor()
    versions = {}
    for name in ("fastapi", "uvicorn", "pydantic", "numba", "numpy", "httpx"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:
            versions[name] = None
    for name in ("uvloop", "httptools"):
        try:
            __import__(name)
            versions[name] = "installed"
        except ImportError:
            versions[name] = "not installed"
    return {
        "commit": commit + (f" (with local changes to {', '.join(dirty)})" if dirty else ""),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "packages": versions,
    }


# -- scenarios ------------------------------------------------------------------------------
def scenario_configs(args: argparse.Namespace, url: str) -> dict[str, loadgen.LoadConfig]:
    common = dict(
        url=url,
        duration=args.duration,
        warmup=args.warmup,
        drain_timeout=args.drain_timeout,
        kind=args.kind,
        rank=args.rank,
        n_features=args.n_features,
        nnz=args.nnz,
        seed=args.seed,
        averaging_interval=args.averaging_interval,
        client=args.client,
    )
    return {
        "predict_open": loadgen.LoadConfig(
            mode="predict", rate=args.predict_rate, concurrency=args.open_connections, **common
        ),
        "predict_open_low": loadgen.LoadConfig(
            mode="predict", rate=args.low_rate, concurrency=args.open_connections, **common
        ),
        "predict_closed": loadgen.LoadConfig(
            mode="predict", concurrency=args.concurrency, **common
        ),
        "feedback_closed": loadgen.LoadConfig(
            mode="feedback", concurrency=args.concurrency, **common
        ),
        "bulk": loadgen.LoadConfig(
            mode="bulk", concurrency=args.bulk_concurrency, batch=args.batch, **common
        ),
        "mixed_closed": loadgen.LoadConfig(
            mode="mixed", concurrency=args.concurrency, feedback_fraction=0.2, **common
        ),
    }


#: the scenarios measured against the bare FastAPI app too (``bare_app.py``), and the
#: least ratio of the service's throughput to the bare app's, measured in the same run
BASELINE_RATIOS = {"predict_closed": 0.8, "feedback_closed": 0.65}


def targets_of(name: str, args: argparse.Namespace) -> list[dict]:
    targets = []
    if name == "predict_open":
        targets.append({"metric": "p99_ms", "op": "<", "value": 5.0, "rate": args.predict_rate})
    if name == "feedback_closed":
        targets.append({"metric": "throughput_rps", "op": ">=", "value": 2000.0})
    if name == "bulk":
        targets.append({"metric": "examples_per_s", "op": ">=", "value": 100_000.0})
    if name in BASELINE_RATIOS and args.baseline:
        targets.append({"metric": "ratio_to_bare", "op": ">=", "value": BASELINE_RATIOS[name]})
    return targets


def machine_busy_seconds() -> float:
    """CPU seconds all the machine's CPUs have spent busy since boot (Linux /proc/stat:
    everything but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_load: float | None, max_wait: float) -> float:
    """Wait until the 1-minute load average is at most ``max_load`` (or ``max_wait``
    seconds have passed); returns the seconds waited."""
    if max_load is None:
        return 0.0
    started = time.monotonic()
    while os.getloadavg()[0] > max_load and time.monotonic() - started < max_wait:
        time.sleep(5)
    return time.monotonic() - started


def measure(server: Server, config: loadgen.LoadConfig, workload: loadgen.Workload) -> dict:
    """One run, with the server's CPU time over the measured phase (warm-up excluded) and
    the CPU that everything else on the machine used meanwhile."""
    marks: list[tuple[float, float, float]] = []

    def mark():
        marks.append((server.cpu_seconds(), machine_busy_seconds(), time.process_time()))

    generator = loadgen.LoadGenerator(config, workload, before_measure=mark, after_measure=mark)
    load_before = os.getloadavg()
    summary = asyncio.run(generator.run())
    summary["loadavg_before"] = [round(x, 2) for x in load_before]
    summary["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    cpu = marks[1][0] - marks[0][0]
    machine = marks[1][1] - marks[0][1]
    client = marks[1][2] - marks[0][2]
    wall = max(summary["elapsed_s"], 1e-9)
    # CPU used by other processes while this run was measured, in cores
    summary["other_cpu_share"] = round(max(0.0, machine - cpu - client) / wall, 4)
    summary["server_cpu_s"] = round(cpu, 4)
    summary["server_cpu_share"] = round(cpu / max(summary["elapsed_s"], 1e-9), 4)
    bulk = config.mode == "bulk"
    done = summary["examples_learned"] if bulk else summary["ok"]
    key = "server_cpu_us_per_example" if bulk else "server_cpu_us_per_request"
    summary[key] = round(1e6 * cpu / done, 2) if done else None
    return summary


def median_of(runs: list[dict], *path: str) -> float | None:
    values = []
    for run in runs:
        value = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            values.append(value)
    return statistics.median(values) if values else None


def baseline_of(runs: list[dict], bare_runs: list[dict]) -> dict:
    """The bare app's medians beside the service's, and the service's throughput as a
    fraction of the bare app's: within each repeat (the two measured back to back, so that
    they share the machine's load) and their median, which is the figure the targets use;
    also the ratio of the two medians."""
    ratios = [
        round(run["throughput_rps"] / bare["throughput_rps"], 4)
        for run, bare in zip(runs, bare_runs, strict=True)
        if bare["throughput_rps"]
    ]
    bare_rps = median_of(bare_runs, "throughput_rps")
    rps = median_of(runs, "throughput_rps")
    bare_cpu = median_of(bare_runs, "server_cpu_us_per_request")
    cpu = median_of(runs, "server_cpu_us_per_request")
    return {
        "bare": {
            "throughput_rps": bare_rps,
            "p50_ms": median_of(bare_runs, "latency_ms", "p50"),
            "p99_ms": median_of(bare_runs, "latency_ms", "p99"),
            "server_cpu_us_per_request": median_of(bare_runs, "server_cpu_us_per_request"),
            "server_cpu_share": median_of(bare_runs, "server_cpu_share"),
            "errors": sum(run["errors"] for run in bare_runs),
        },
        "ratio_to_bare": statistics.median(ratios) if ratios else None,
        "ratios_per_repeat": ratios,
        "ratio_of_medians": round(rps / bare_rps, 4) if rps and bare_rps else None,
        # the throughput ratio at equal CPU: less sensitive to what else the machine runs
        "cpu_ratio_to_bare": round(bare_cpu / cpu, 4) if cpu and bare_cpu else None,
    }


def aggregate(
    name: str, runs: list[dict], targets: list[dict], bare_runs: list[dict] | None = None
) -> dict:
    bulk = runs[0]["mode"] == "bulk"
    per = "server_cpu_us_per_example" if bulk else "server_cpu_us_per_request"
    out = {
        "scenario": name,
        "runs": len(runs),
        "throughput_rps": median_of(runs, "throughput_rps"),
        "examples_per_s": median_of(runs, "examples_per_s"),
        "p50_ms": median_of(runs, "latency_ms", "p50"),
        "p90_ms": median_of(runs, "latency_ms", "p90"),
        "p99_ms": median_of(runs, "latency_ms", "p99"),
        "max_ms": median_of(runs, "latency_ms", "max"),
        "errors": sum(run["errors"] for run in runs),
        "requests": sum(run["requests"] for run in runs),
        per: median_of(runs, per),
        "server_cpu_share": median_of(runs, "server_cpu_share"),
        "client_cpu_share": median_of(runs, "client_cpu_share"),
        "other_cpu_share": median_of(runs, "other_cpu_share"),
        "loadavg_before": [run["loadavg_before"][0] for run in runs],
        "send_lag_p99_ms": median_of(runs, "send_lag_ms", "p99"),
    }
    if len(runs[0]["operations"]) > 1:
        out["operations"] = {
            op: {
                "throughput_rps": median_of(runs, "operations", op, "throughput_rps"),
                "p50_ms": median_of(runs, "operations", op, "latency_ms", "p50"),
                "p99_ms": median_of(runs, "operations", op, "latency_ms", "p99"),
            }
            for op in runs[0]["operations"]
        }
    if bare_runs:
        out.update(baseline_of(runs, bare_runs))
    out["targets"] = []
    for target in targets:
        measured = out.get(target["metric"])
        if measured is None:
            met = False
        elif target["op"] == "<":
            met = measured < target["value"]
        else:
            met = measured >= target["value"]
        if name == "predict_open":
            # the latency target only counts if the offered rate was actually served
            met = met and out["throughput_rps"] >= 0.98 * target["rate"] and out["errors"] == 0
        out["targets"].append(target | {"measured": measured, "met": bool(met)})
    return out


# -- report ---------------------------------------------------------------------------------
def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def model_text(settings: dict) -> str:
    interval = settings["averaging_interval"]
    averaging = f"{interval:,}" if interval else f"{DEFAULT_INTERVAL:,} (the service default)"
    env = settings["server_env"]
    return (
        f"Model: `{settings['kind']}` rank {settings['rank']} over {settings['n_features']:,} "
        f"hashed features (`input: {{hashed: {settings['n_features']}}}`), synthetic sparse "
        f"rows with {settings['nnz']} non-zeros and binary labels (5% flipped), a new model "
        f"per run, averaging interval {averaging}. Server: `python -m service.ops.cli serve`, "
        f"log level `{settings['log_level']}` (one JSON access-log line per request at "
        "`info`), local snapshots every hour (none during the runs)"
        + (f", environment {', '.join(env)}" if env else "")
        + f". Each scenario ran {settings['repeats']} times for {settings['duration']:g} s "
        f"after {settings['warmup']:g} s of warm-up; the table gives the **medians**. Closed "
        f"loop: {settings['concurrency']} clients (bulk: {settings['bulk_concurrency']}); open "
        "loop: latency measured from each request's scheduled time (no coordinated omission)."
    )


def markdown(result: dict) -> str:
    env = result["environment"]
    settings = result["settings"]
    busy = result["busy_processes"]
    lines = [
        "## Service throughput and latency (HTTP, one uvicorn process)",
        "",
        "Written by `deploy/loadtest/run_benchmarks.py` (load from `deploy/loadtest/loadgen.py` "
        f"on the same machine, client `{settings['client']}`"
        + (
            ": HTTP/1.1 keep-alive over asyncio streams). "
            if settings["client"] == "raw"
            else ": httpx.AsyncClient). "
        )
        + f"Commit {env['commit']}, {env['date']}, Python {env['python']}, "
        f"{env['cpus']} CPUs ({env['cpu_model']}); fastapi {env['packages']['fastapi']}, "
        f"uvicorn {env['packages']['uvicorn']} (uvloop {env['packages']['uvloop']}, "
        f"httptools {env['packages']['httptools']}), pydantic {env['packages']['pydantic']}.",
        "",
        model_text(settings),
        "",
        "| scenario | target | measured (median) | met | req/s | bare FastAPI req/s "
        "| ratio to bare | examples/s | p50 ms | p99 ms | max ms | errors "
        "| server CPU per req/example |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["scenarios"]:
        texts, measured, met = [], [], []
        for target in row.get("targets", []):
            metric = {
                "p99_ms": "p99",
                "throughput_rps": "req/s",
                "examples_per_s": "examples/s",
                "ratio_to_bare": "ratio to bare",
            }[target["metric"]]
            digits = 2 if target["metric"] == "ratio_to_bare" else 0
            text = f"{metric} {target['op']} {_fmt(target['value'], digits)}"
            if "rate" in target:
                text += f" at {target['rate']:g} req/s"
            texts.append(text)
            measured.append(_fmt(target["measured"], 2))
            met.append("yes" if target["met"] else "**no**")
        per = row.get("server_cpu_us_per_request") or row.get("server_cpu_us_per_example")
        unit = "example" if "server_cpu_us_per_example" in row else "req"
        bare = row.get("bare")
        lines.append(
            f"| {row['description']} | {'; '.join(texts) or '(none)'} | {'; '.join(measured)} "
            f"| {'; '.join(met)} | {_fmt(row['throughput_rps'])} "
            f"| {_fmt(bare['throughput_rps']) if bare else ''} "
            f"| {_fmt(row['ratio_to_bare'], 2) if bare else ''} "
            f"| {_fmt(row['examples_per_s'], 0)} "
            f"| {_fmt(row['p50_ms'], 2)} | {_fmt(row['p99_ms'], 2)} | {_fmt(row['max_ms'], 1)} "
            f"| {row['errors']} | {_fmt(per, 0)} us/{unit} |"
        )
    compared = [row for row in result["scenarios"] if row.get("bare")]
    if compared:
        lines += [
            "",
            "The bare FastAPI baseline (`deploy/loadtest/bare_app.py`): the same endpoints as "
            "`async def` routes whose body parameter is a pydantic model of the same JSON "
            "shape and whose `response_model` has the shape of the service's answer; no "
            "model, log, metrics or middleware; under the same uvicorn settings. It is "
            "measured back to back with the service in each repeat (the order alternating); "
            "the ratio is the median of the repeats' ratios. "
            + "; ".join(
                f"{row['description']}: bare {_fmt(row['bare']['throughput_rps'])} req/s "
                f"(p50 {_fmt(row['bare']['p50_ms'], 2)} ms, p99 {_fmt(row['bare']['p99_ms'], 2)}"
                f" ms, server CPU {_fmt(row['bare']['server_cpu_us_per_request'], 0)} us/req), "
                f"ratios per repeat {', '.join(f'{r:.2f}' for r in row['ratios_per_repeat'])}"
                + (
                    f", server CPU per request bare / service "
                    f"{_fmt(row['cpu_ratio_to_bare'], 2)} (the ratio at equal CPU)"
                    if row.get("cpu_ratio_to_bare") is not None
                    else ""
                )
                for row in compared
            )
            + ".",
        ]
    for row in result["scenarios"]:
        if "operations" in row:
            parts = [
                f"{op} {_fmt(v['throughput_rps'])} req/s (p50 {_fmt(v['p50_ms'], 2)} ms, "
                f"p99 {_fmt(v['p99_ms'], 2)} ms)"
                for op, v in row["operations"].items()
            ]
            lines += ["", f"{row['description']}: " + "; ".join(parts) + "."]
    lags = [
        f"{row['description']}: {_fmt(row['send_lag_p99_ms'], 1)} ms"
        for row in result["scenarios"]
        if row.get("send_lag_p99_ms") is not None
    ]
    if lags:
        lines += [
            "",
            "Open loop, the generator's own lateness (p99 of the delay between a request's "
            "scheduled time and its start, included in the latencies): " + "; ".join(lags) + ".",
        ]
    client = {row["scenario"]: row["client_cpu_share"] for row in result["scenarios"]}
    server = {row["scenario"]: row["server_cpu_share"] for row in result["scenarios"]}
    other = {row["scenario"]: row.get("other_cpu_share") for row in result["scenarios"]}
    loads = {row["scenario"]: row.get("loadavg_before") for row in result["scenarios"]}
    lines += [
        "",
        "CPU use during the measured phase (cores, medians): "
        + "; ".join(
            f"{name} server {_fmt(server[name], 2)}, generator {_fmt(client[name], 2)}"
            + (f", other processes {_fmt(other[name], 2)}" if other[name] is not None else "")
            for name in client
        )
        + ". The generator shares the machine's "
        f"{env['cpus']} CPUs with the server"
        + (
            " (pinned: server on CPU 1, generator on CPU 0)."
            if settings["pin"]
            else " (not pinned)."
        ),
        "",
        "1-minute load average before each run: "
        + "; ".join(
            f"{name} {', '.join(f'{x:.2f}' for x in loads[name])}" for name in loads if loads[name]
        )
        + (
            f" (each run waited for a load average <= {settings['max_load']:g}, at most "
            f"{settings['max_wait']:g} s)."
            if settings.get("max_load") is not None
            else "."
        ),
        "",
        "Also running on the machine during the measurements (from `ps`: %CPU of one core "
        "averaged over each process's lifetime, sampled before each run):",
        "",
    ]
    lines += [f"- {p['command']} ({p['pcpu']:.0f}%)" for p in busy] or ["- nothing else busy"]
    if result.get("costs"):
        lines += ["", *costs_markdown(result["costs"])]
    for note in result.get("notes") or []:
        lines += ["", note.strip("\n")]
    lines += ["", "Raw numbers of every run: `docs/service_benchmarks.json`.", ""]
    return "\n".join(lines)


def costs_markdown(costs: dict) -> list[str]:
    """The table of ``cost_breakdown.py``: CPU time of each step, in-process."""
    settings = costs["settings"]
    lines = [
        "### Where the server's CPU goes",
        "",
        "`deploy/loadtest/cost_breakdown.py`: each step timed in-process with the CPU clock "
        f"(fastest of {settings['repeats']} rounds of {settings['n']} calls; bulk: one "
        f"{settings['batch']:,}-example body), same model. Whole-app rows call the ASGI app "
        "directly, without sockets; add the HTTP/1.1 framing and the event loop's socket "
        "work for the server's cost.",
        "",
        "| step | CPU |",
        "|---|---:|",
    ]
    for group, steps in costs["results"].items():
        for name, value in steps.items():
            if "count" in value:
                lines.append(f"| {group}: {name} | {value['count']} |")
            else:
                lines.append(f"| {group}: {name} | {_fmt(value['us'], 1)} us/{value['per']} |")
    return lines


def write_section(path: Path, section: str) -> None:
    """Replace our section of ``path`` (created with a header if missing); keep the rest."""
    replace_section(path, BEGIN, END, section)


DESCRIPTIONS = {
    "predict_open": "predict, 1 instance, open loop at {rate:g} req/s",
    "predict_open_low": "predict, 1 instance, open loop at {low_rate:g} req/s",
    "predict_closed": "predict, 1 instance, closed loop",
    "feedback_closed": "feedback, 1 example (JSON), closed loop",
    "bulk": "bulk feedback, svmlight bodies of {batch:,} examples",
    "mixed_closed": "mixed 80% predict / 20% feedback by id, closed loop",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
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
    add("--kind", choices=loadgen.KINDS, default="dos")
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
    if args.pin:
        os.sched_setaffinity(0, {0})

    busy: dict[str, dict] = {}
    result: dict = {
        "environment": environment(),
        "settings": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in {"md", "json", "note", "notes_file", "costs", "render"}
        },
        "scenarios": [],
        "runs": {},
        "notes": args.note,
        "costs": json.loads(args.costs.read_text()) if args.costs else None,
    }
    with tempfile.TemporaryDirectory(prefix="lorentztron-bench-") as directory:
        extra_env = dict(item.split("=", 1) for item in args.server_env)
        cpus = {1} if args.pin else None
        server = Server(Path(directory), args.log_level, cpus, extra_env)
        bare = None
        if args.baseline and BASELINE_RATIOS.keys() & set(names):
            bare = Server(Path(directory), args.log_level, cpus, extra_env, command="bare")
        try:
            for each in filter(None, (server, bare)):
                print(f"starting the {each.command} server on {each.url} ...", flush=True)
                each.start()
            ours = {os.getpid(), *(each.process.pid for each in filter(None, (server, bare)))}
            configs = scenario_configs(args, server.url)
            bare_configs = scenario_configs(args, bare.url) if bare else {}
            for name in names:
                config = configs[name]
                workload = loadgen.Workload(config)
                runs, bare_runs = [], []
                for repeat in range(args.repeats):
                    # the service and the bare app back to back, the order alternating
                    turns = [(server, config, runs)]
                    if bare is not None and name in BASELINE_RATIOS:
                        turns.append((bare, bare_configs[name], bare_runs))
                        if repeat % 2:
                            turns.reverse()
                    for subject, subject_config, into in turns:
                        waited = wait_for_quiet(args.max_load, args.max_wait)
                        for p in busy_processes(ours):
                            busy.setdefault(p["command"], p)
                            busy[p["command"]]["pcpu"] = max(busy[p["command"]]["pcpu"], p["pcpu"])
                        summary = measure(subject, subject_config, workload)
                        summary["waited_for_quiet_s"] = round(waited, 1)
                        summary["server"] = subject.command
                        into.append(summary)
                        print(f"[{name} {repeat + 1}/{args.repeats}, {subject.command}]")
                        print(loadgen.format_summary(summary), flush=True)
                row = aggregate(name, runs, targets_of(name, args), bare_runs)
                row["description"] = DESCRIPTIONS[name].format(
                    rate=args.predict_rate, low_rate=args.low_rate, batch=args.batch
                )
                result["scenarios"].append(row)
                result["runs"][name] = runs
                if bare_runs:
                    result["runs"][f"{name} (bare)"] = bare_runs
        finally:
            for each in filter(None, (server, bare)):
                each.stop()
    result["busy_processes"] = sorted(busy.values(), key=lambda p: -p["pcpu"])
    return publish(result, args)


def publish(result: dict, args: argparse.Namespace) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
