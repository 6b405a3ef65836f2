"""Where the service's CPU time goes under load: the app served by uvicorn in this process,
sampled by py-spy (or traced by yappi), driven by :mod:`deploy.loadtest.loadgen` in a
subprocess.

The uvicorn configuration is the one of ``lorentztron serve`` (one process, the service's
JSON logging, no uvicorn access log), on a free loopback port with snapshots in a temporary
directory. The model is created and warmed up before profiling starts, so the profile holds
only the measured traffic. The report gives the process CPU time per request (without and
with the profiler's overhead), the CPU time by component (the exclusive time of every
function, the time of C built-ins credited to their Python callers) and the costliest
functions.

    python -m deploy.loadtest.profile_server --mode predict --concurrency 4 --duration 10
    python -m deploy.loadtest.profile_server --mode bulk --batch 20000 --concurrency 1

Options after ``--`` go to the load generator (``--rank``, ``--n-features``, ``--nnz``,
``--client raw``, ...).

py-spy samples the thread holding the GIL (``--gil``), attributed to the innermost Python
frame. On a machine with more runnable threads than CPUs, a thread that wakes another one
(``Condition.notify`` in the thread-pool hand-off) is often preempted while it holds the GIL,
so hand-offs look costlier than their CPU time; :mod:`deploy.loadtest.cost_breakdown` times
the steps with the CPU clock instead.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from benchmarks.servers import ROOT, free_port
from deploy.loadtest.loadgen.cli import parse_args
from deploy.loadtest.loadgen.config import MODES, LoadConfig
from deploy.loadtest.loadgen.workload import Workload

#: (category, substrings of a function's file path or name); the first match wins.
CATEGORIES = (
    ("HTTP protocol (uvicorn, h11)", ("/uvicorn/", "/h11/", "httptools")),
    ("pydantic validation / serialisation", ("/pydantic/", "pydantic_core")),
    ("routing, dependencies (fastapi, starlette)", ("/fastapi/", "/starlette/")),
    ("service middleware", ("service/http/middleware.py",)),
    ("logging (service JSON logs)", ("/logging/", "service/ops/cli.py")),
    ("json (stdlib)", ("/json/",)),
    ("prometheus_client", ("/prometheus_client/",)),
    ("svmlight parsing (core.datasets)", ("core/datasets.py",)),
    ("features validation (core.features)", ("core/features.py",)),
    ("models and kernels (core/)", ("/core/",)),
    ("numpy / scipy python code", ("/numpy/", "/scipy/")),
    ("service routes, registry, schemas", ("/service/",)),
    ("uuid", ("uuid.py",)),
    (
        "event loop, threads, locks (asyncio, anyio, threading)",
        (
            "/asyncio/",
            "/anyio/",
            "threading.py",
            "/concurrent/",
            "selectors.py",
            "sniffio",
            "queue",
        ),
    ),
)


def categorise(path: str, name: str) -> str:
    key = f"/{path.lstrip('/')} {name}"  # py-spy shortens site-packages paths
    for category, needles in CATEGORIES:
        if any(needle in key for needle in needles):
            return category
    return "other"


def is_builtin(stat) -> bool:
    return bool(stat.builtin)


def breakdown(stats) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Exclusive CPU seconds by category, and per function, with the exclusive time of C
    built-ins split among their Python callers in proportion to the time each caller spent
    in them (a numba kernel or ``json.loads`` counts for the code that called it)."""
    by_category: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    builtin_tsub = {s.full_name: s.tsub for s in stats if is_builtin(s)}
    # the time each Python caller spent in each builtin (children are caller-specific)
    callers: dict[str, list[tuple[object, float]]] = collections.defaultdict(list)
    for s in stats:
        if is_builtin(s):
            continue
        for child in s.children:
            if child.full_name in builtin_tsub:
                callers[child.full_name].append((s, child.ttot))
    for s in stats:
        if is_builtin(s):
            continue
        label = f"{s.name} ({Path(s.module).name}:{s.lineno})"
        category = categorise(s.module, s.name)
        by_category[category] += s.tsub
        by_function[label] += s.tsub
    for name, tsub in builtin_tsub.items():
        shares = callers.get(name)
        total = sum(t for _, t in shares) if shares else 0.0
        if not shares or total <= 0:
            by_category[categorise(name, name)] += tsub
            by_function[name] += tsub
            continue
        for caller, t in shares:
            part = tsub * t / total
            by_category[categorise(caller.module, caller.name)] += part
        by_function[name] += tsub
    return dict(by_category), [(t, f) for f, t in by_function.most_common()]


def breakdown_collapsed(path: Path) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Samples by category and by function of py-spy's collapsed stacks (``-f raw``),
    attributed to the innermost Python frame (C calls count for their Python caller)."""
    by_category: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.split(";")[-1]
        name, _, where = leaf.partition(" (")
        file = where.rsplit(":", 1)[0]
        by_category[categorise(file, name)] += int(count)
        by_function[f"{name} ({Path(file).name}:{where.rsplit(':', 1)[-1].rstrip(')')})"] += int(
            count
        )
    return dict(by_category), [(n, f) for f, n in by_function.most_common()]


def start_server(snapshot_dir: str, log_level: str) -> tuple[uvicorn.Server, threading.Thread, str]:
    from service.config import Settings
    from service.main import create_app

    settings = Settings(snapshot_dir=snapshot_dir, snapshot_interval=3600, log_level=log_level)
    try:
        from service.ops.cli import configure_logging

        log_config = configure_logging(log_level)
    except ImportError:  # an older service without structured logs
        log_config = uvicorn.config.LOGGING_CONFIG
    try:
        from service.ops.cli import configure_process  # as `lorentztron serve`

        configure_process(settings)
    except ImportError:
        pass
    port = free_port()
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=port,
        log_config=log_config,
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def run_generator(url: str, args: argparse.Namespace, extra: list[str], model: str, seconds):
    command = [
        sys.executable,
        "-m",
        "deploy.loadtest.loadgen",
        "--url",
        url,
        "--mode",
        args.mode,
        "--duration",
        str(seconds),
        "--warmup",
        "0",
        "--model",
        model,
        *(["--rate", str(args.rate)] if args.rate else []),
        "--concurrency",
        str(args.concurrency),
        *extra,
    ]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [*args.client_prefix.split(), *command, "--json", out.name],
            check=False,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            timeout=seconds + 120,
        )
        return json.loads(Path(out.name).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES, default="predict")
    parser.add_argument("--rate", type=float)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--log-level", default="info", help="the service's (default info)")
    parser.add_argument(
        "--profiler",
        choices=("yappi", "py-spy"),
        default="py-spy",
        help="py-spy: sampling, low overhead, samples of the thread holding the GIL; "
        "yappi: CPU clock of every function, but large overhead on small Python calls",
    )
    parser.add_argument("--top", type=int, default=25, help="functions listed")
    parser.add_argument(
        "--client-prefix", default="", help="command prefix of the generator, e.g. 'taskset -c 0'"
    )
    parser.add_argument("--json", type=Path, help="write the breakdown to this JSON file")
    parser.add_argument("--raw-output", help="keep py-spy's collapsed stacks in this file")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]

    with tempfile.TemporaryDirectory() as snapshot_dir:
        server, thread, url = start_server(snapshot_dir, args.log_level)
        try:
            gen_args = parse_args(["--mode", args.mode, *extra])[0]
            spec = Workload(
                LoadConfig(**{**vars(gen_args), "mode": "predict", "pool": 1})
            ).model_spec("profiled")
            with httpx.Client(base_url=url, timeout=60) as http:
                response = http.post("/v1/models", json=spec)
                response.raise_for_status()
            # warm-up and a CPU-time reference without the profiler
            run_generator(url, args, extra, "profiled", 1.0)
            cpu0 = time.process_time()
            plain = run_generator(url, args, extra, "profiled", args.duration)
            plain_cpu = time.process_time() - cpu0
            if args.profiler == "yappi":
                import yappi

                yappi.set_clock_type("cpu")
                yappi.start(builtins=True, profile_threads=True)
                cpu0 = time.process_time()
                profiled = run_generator(url, args, extra, "profiled", args.duration)
                profiled_cpu = time.process_time() - cpu0
                yappi.stop()
                by_category, functions = breakdown(yappi.get_func_stats())
            else:
                raw = (
                    Path(args.raw_output) if args.raw_output else Path(snapshot_dir) / "py-spy.txt"
                )
                sampler = subprocess.Popen(
                    [
                        str(Path(sys.executable).with_name("py-spy")),
                        "record",
                        "--pid",
                        str(os.getpid()),
                        "--gil",
                        "--nonblocking",
                        "--rate",
                        "250",
                        "--format",
                        "raw",
                        "--output",
                        str(raw),
                        "--duration",
                        str(int(args.duration)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                cpu0 = time.process_time()
                profiled = run_generator(url, args, extra, "profiled", args.duration)
                profiled_cpu = time.process_time() - cpu0
                sampler.wait(timeout=60)
                by_category, functions = breakdown_collapsed(raw)
        finally:
            server.should_exit = True
            thread.join(timeout=30)
    total = sum(by_category.values())
    n_plain, n_profiled = max(plain["ok"], 1), max(profiled["ok"], 1)
    unit = "example" if args.mode == "bulk" else "request"
    per_plain = plain_cpu / (plain["examples_learned"] if args.mode == "bulk" else n_plain)
    per_profiled = profiled_cpu / (
        profiled["examples_learned"] if args.mode == "bulk" else n_profiled
    )
    report = {
        "mode": args.mode,
        "generator": {k: plain[k] for k in ("loop", "concurrency", "target_rate", "model")},
        "batch": plain["batch"],
        "unprofiled": {
            "requests_ok": plain["ok"],
            "throughput_rps": plain["throughput_rps"],
            "examples_per_s": plain["examples_per_s"],
            "latency_ms": plain["latency_ms"],
            "server_cpu_s": round(plain_cpu, 4),
            f"server_cpu_us_per_{unit}": round(1e6 * per_plain, 2),
        },
        "profiled": {
            "profiler": args.profiler,
            "requests_ok": profiled["ok"],
            "server_cpu_s": round(profiled_cpu, 4),
            f"server_cpu_us_per_{unit}": round(1e6 * per_profiled, 2),
            "attributed": round(total, 4),
        },
        "categories_share": {
            k: round(v / total, 4) for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])
        },
        "top_functions_share": [
            {"function": f, "share": round(t / total, 4)} for t, f in functions[: args.top]
        ],
    }
    print(
        f"{args.mode}: {plain['ok']} requests in {args.duration:g} s without the profiler, "
        f"server CPU {1e6 * per_plain:.0f} us per {unit} "
        f"({plain['throughput_rps']:.0f} req/s, p50 {plain['latency_ms']['p50']} ms); "
        f"with {args.profiler} {1e6 * per_profiled:.0f} us per {unit}"
    )
    what = "samples" if args.profiler == "py-spy" else "CPU seconds"
    print(f"CPU by component (shares of the {total:.5g} {what} profiled):")
    for category, share in report["categories_share"].items():
        print(f"  {100 * share:5.1f}%  {category}")
    print("costliest functions (exclusive time):")
    for row in report["top_functions_share"]:
        print(f"  {100 * row['share']:5.1f}%  {row['function']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
