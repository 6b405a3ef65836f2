"""Figures of the durability and scale-out issue, measured over real HTTP on this machine.

1. Feedback throughput with the feedback log off, on a local file (fsync per request batch,
   and no fsync), and on a Redis stream (Redis with ``appendfsync always``): single-example
   JSON feedback in a closed loop, and bulk svmlight feedback.
2. Recovery time against log length: a model's log of N records after its snapshot is
   replayed at start-up before ``/readyz`` turns ready (``lorentztron_log_replay_duration``).
3. Predict throughput with one and two api replicas (one learner, Redis).

Load comes from ``deploy/loadtest/loadgen.py`` (``--client raw``) on the same 2-core
machine; each configuration runs ``--repeats`` times and the medians are reported.

    python -m benchmarks.service_durability            # writes docs/benchmarks.md section
    python -m benchmarks.service_durability --quick    # seconds, prints only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.markdown import replace_section
from core.features import CSRBatch
from service.feedback_log import FileLog, encode_record

ROOT = Path(__file__).resolve().parents[1]

LOADGEN = ROOT / "deploy" / "loadtest" / "loadgen.py"
DOCS = ROOT / "docs"
BEGIN, END = "<!-- durability:begin -->", "<!-- durability:end -->"
MODEL = {"kind": "dos", "rank": 16, "n_features": 1 << 18, "nnz": 30}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    def __init__(self, args, env=None):
        self.args, self.env = args, env

    def __enter__(self):
        self.process = subprocess.Popen(
            self.args,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **(self.env or {})},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def service(env: dict) -> tuple[Process, str]:
    port = free_port()
    env = {"LORENTZTRON_LOG_LEVEL": "warning", "LORENTZTRON_SNAPSHOT_INTERVAL": "3600", **env}
    cli = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    return Process(cli, env), f"http://127.0.0.1:{port}"


def wait_ready(url: str, timeout: float = 120.0) -> float:
    started = time.monotonic()
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{url} not ready")
        time.sleep(0.02)


def redis_server(directory: Path, appendfsync: str) -> tuple[Process, str]:
    port = free_port()
    args = [
        shutil.which("redis-server") or "redis-server",
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
        "--appendonly", "yes", "--appendfsync", appendfsync,
    ]  # fmt: skip
    return Process(args), f"redis://127.0.0.1:{port}/0"


def wait_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
    for _ in range(200):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis did not start")


def loadgen(url: str, mode: str, duration: float, extra: list[str] | None = None) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [
            sys.executable, str(LOADGEN), "--url", url, "--mode", mode, "--client", "raw",
            "--duration", str(duration), "--warmup", "1", "--kind", MODEL["kind"],
            "--rank", str(MODEL["rank"]), "--n-features", str(MODEL["n_features"]),
            "--nnz", str(MODEL["nnz"]), "--json", out.name, *(extra or []),
        ]  # fmt: skip
        subprocess.run(args, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def throughput(args, tmp: Path) -> list[dict]:
    configs = [
        ("log off", {"LORENTZTRON_FEEDBACK_LOG": "false"}, None),
        ("file log, fsync per batch", {"LORENTZTRON_LOG_FSYNC": "batch"}, None),
        ("file log, no fsync", {"LORENTZTRON_LOG_FSYNC": "none"}, None),
        ("Redis stream, appendfsync always", {}, "always"),
    ]
    rows = []
    for label, env, appendfsync in configs:
        for mode, extra in (
            ("feedback", ["--concurrency", "8"]),
            ("bulk", ["--concurrency", "2", "--batch", str(args.batch)]),
        ):
            runs = []
            for repeat in range(args.repeats):
                directory = tmp / f"{label}-{mode}-{repeat}".replace(" ", "_").replace(",", "")
                directory.mkdir()
                env_run = {**env, "LORENTZTRON_SNAPSHOT_DIR": str(directory / "snapshots")}
                redis_process = None
                if appendfsync:
                    redis_process, redis_url = redis_server(directory, appendfsync)
                    redis_process.__enter__()
                    wait_redis(redis_url)
                    env_run["LORENTZTRON_REDIS_URL"] = redis_url
                try:
                    process, url = service(env_run)
                    with process:
                        wait_ready(url)
                        summary = loadgen(url, mode, args.duration, extra)
                finally:
                    if redis_process is not None:
                        redis_process.__exit__()
                runs.append(summary)
            rows.append(
                {
                    "log": label,
                    "mode": mode,
                    "req_per_s": statistics.median(r["throughput_rps"] for r in runs),
                    "examples_per_s": statistics.median(r["examples_per_s"] for r in runs),
                    "p50_ms": statistics.median(r["latency_ms"]["p50"] for r in runs),
                    "p99_ms": statistics.median(r["latency_ms"]["p99"] for r in runs),
                    "errors": sum(r["errors"] for r in runs),
                }
            )
            print(rows[-1], flush=True)
    return rows


def write_log(directory: Path, n_records: int, seed: int = 0) -> None:
    """A model created by a first run, then ``n_records`` single-example records."""
    journal = FileLog(directory, fsync="none")
    rng = np.random.default_rng(seed)
    n_features, nnz = MODEL["n_features"], MODEL["nnz"]
    for _ in range(n_records):
        indices = np.sort(rng.choice(n_features, nnz, replace=False)).astype(np.int64)
        batch = CSRBatch(np.array([0, nnz]), indices, rng.standard_normal(nnz))
        journal.append("m", encode_record(batch, np.array([int(rng.integers(0, 2))])))
    journal.close()


def recovery(args, tmp: Path) -> list[dict]:
    rows = []
    spec = {
        "name": "m",
        "kind": "dos",
        "params": {"rank": MODEL["rank"]},
        "input": {"hashed": MODEL["n_features"]},
    }
    for n_records in args.log_lengths:
        times, replays = [], []
        for repeat in range(args.repeats):
            directory = tmp / f"recovery-{n_records}-{repeat}"
            env = {"LORENTZTRON_SNAPSHOT_DIR": str(directory / "snapshots")}
            process, url = service(env)
            with process:  # create the model (snapshot 0), then stop
                wait_ready(url)
                assert httpx.post(f"{url}/v1/models", json=spec).status_code == 201
            write_log(directory / "snapshots" / ".log", n_records, seed=repeat)
            process, url = service(env)
            with process:
                ready = wait_ready(url)
                metrics = httpx.get(f"{url}/metrics").text
                replay = float(
                    re.search(r"lorentztron_log_replay_duration_seconds_sum (\S+)", metrics)[1]
                )
                version = httpx.get(f"{url}/v1/models/m").json()["version"]
                assert version == n_records, (version, n_records)
            times.append(ready)
            replays.append(replay)
        rows.append(
            {
                "records": n_records,
                "replay_s": statistics.median(replays),
                "start_to_ready_s": statistics.median(times),
                "records_per_s": n_records / statistics.median(replays) if n_records else None,
            }
        )
        print(rows[-1], flush=True)
    return rows


FRESHNESS_MODELS = (
    ("DoS rank 16 over 2^18 hashed features (134 MB state)", 16, 1 << 18),
    ("DoS rank 8 over 2^14 hashed features (4 MB state)", 8, 1 << 14),
)


def _histogram(metrics: str, name: str) -> tuple[list[tuple[float, float]], float, float]:
    """(cumulative buckets (le, count), sum, count) of a histogram in a /metrics text."""
    buckets = [
        (float(le), float(count))
        for le, count in re.findall(rf'{name}_bucket{{le="([^"]+)",model="m"}} (\S+)', metrics)
    ]
    total = float(re.search(rf'{name}_sum{{model="m"}} (\S+)', metrics)[1])
    count = float(re.search(rf'{name}_count{{model="m"}} (\S+)', metrics)[1])
    return buckets, total, count


def _quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding quantile q (what Prometheus interpolates in)."""
    total = buckets[-1][1]
    for le, count in buckets:
        if count >= q * total:
            return le
    return float("inf")


@contextlib.contextmanager
def learner_and_replica(directory: Path, rank: int, n_features: int, env: dict | None = None):
    """Redis, one learner and one api replica, and a DoS model "m" of ``rank`` over
    ``n_features`` hashed features that the learner has taken: yields (learner, api) URLs."""
    redis_process, redis_url = redis_server(directory, "everysec")
    with redis_process:
        wait_redis(redis_url)
        env = {"LORENTZTRON_REDIS_URL": redis_url, **(env or {})}
        learner, learner_url = service({**env, "LORENTZTRON_ROLE": "learner"})
        api, api_url = service({**env, "LORENTZTRON_ROLE": "api"})
        with learner, api:
            wait_ready(learner_url)
            wait_ready(api_url)
            spec = {
                "name": "m",
                "kind": "dos",
                "params": {"rank": rank},
                "input": {"hashed": n_features},
            }
            assert httpx.post(f"{api_url}/v1/models", json=spec, timeout=60).status_code == 201
            deadline = time.monotonic() + 60
            while httpx.get(f"{learner_url}/v1/models/m").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            yield learner_url, api_url


def freshness(args, tmp: Path) -> list[dict]:
    """Delay from an acknowledged feedback to an api replica serving it: one learner, one api
    replica, feedback at ``--feedback-rate`` examples/s (open loop) on the replica, the
    default publication interval; the replica's own freshness histogram."""
    rows = []
    for label, rank, n_features in FRESHNESS_MODELS:
        directory = tmp / f"freshness-{rank}-{n_features}"
        directory.mkdir()
        with learner_and_replica(directory, rank, n_features) as (_, api_url):
            summary = loadgen(
                api_url,
                "feedback",
                args.freshness_duration,
                [
                    "--rate",
                    str(args.feedback_rate),
                    "--model",
                    "m",
                    "--keep-model",
                    "--rank",
                    str(rank),
                    "--n-features",
                    str(n_features),
                ],  # fmt: skip
            )
            time.sleep(3)  # the last publications land
            buckets, total, count = _histogram(
                httpx.get(f"{api_url}/metrics").text, "lorentztron_freshness_seconds"
            )
        rows.append(
            {
                "model": label,
                "feedback_per_s": summary["throughput_rps"],
                "versions_loaded": count,
                "mean_s": total / count if count else None,
                "p50_le_s": _quantile(buckets, 0.5) if count else None,
                "p99_le_s": _quantile(buckets, 0.99) if count else None,
                "errors": summary["errors"],
                "error_kinds": summary["error_kinds"],
                "p99_ms": summary["latency_ms"]["p99"],
            }
        )
        print(rows[-1], flush=True)
    return rows


def replicas(args, tmp: Path) -> list[dict]:
    rows = []
    for n_replicas in (1, 2):
        runs = []
        for repeat in range(args.repeats):
            directory = tmp / f"replicas-{n_replicas}-{repeat}"
            directory.mkdir()
            redis_process, redis_url = redis_server(directory, "everysec")
            with redis_process:
                wait_redis(redis_url)
                env = {"LORENTZTRON_REDIS_URL": redis_url, "LORENTZTRON_POLL_INTERVAL": "0.5"}
                learner, learner_url = service({**env, "LORENTZTRON_ROLE": "learner"})
                apis = [service({**env, "LORENTZTRON_ROLE": "api"}) for _ in range(n_replicas)]
                with learner:
                    wait_ready(learner_url)
                    for process, _ in apis:
                        process.__enter__()
                    try:
                        urls = [url for _, url in apis]
                        for url in urls:
                            wait_ready(url)
                        spec = {
                            "name": "m",
                            "kind": "dos",
                            "params": {"rank": MODEL["rank"]},
                            "input": {"hashed": MODEL["n_features"]},
                        }
                        assert httpx.post(f"{urls[0]}/v1/models", json=spec).status_code == 201
                        deadline = time.monotonic() + 30
                        while not all(
                            httpx.get(f"{u}/v1/models/m").status_code == 200 for u in urls
                        ):
                            assert time.monotonic() < deadline
                            time.sleep(0.1)
                        generators = [
                            subprocess.Popen(
                                [
                                    sys.executable,
                                    str(LOADGEN),
                                    "--url",
                                    url,
                                    "--mode",
                                    "predict",
                                    "--client",
                                    "raw",
                                    "--model",
                                    "m",
                                    "--keep-model",
                                    "--concurrency",
                                    "8",
                                    "--duration",
                                    str(args.duration),
                                    "--warmup",
                                    "1",
                                    "--n-features",
                                    str(MODEL["n_features"]),
                                    "--nnz",
                                    str(MODEL["nnz"]),
                                    "--json",
                                    str(directory / f"predict-{i}.json"),
                                ],  # fmt: skip
                                cwd=ROOT,
                                stdout=subprocess.DEVNULL,
                            )
                            for i, url in enumerate(urls)
                        ]
                        for generator in generators:
                            generator.wait()
                        summaries = [
                            json.loads((directory / f"predict-{i}.json").read_text())
                            for i in range(n_replicas)
                        ]
                    finally:
                        for process, _ in apis:
                            process.__exit__()
            runs.append(
                {
                    "req_per_s": sum(s["throughput_rps"] for s in summaries),
                    "p50_ms": max(s["latency_ms"]["p50"] for s in summaries),
                    "p99_ms": max(s["latency_ms"]["p99"] for s in summaries),
                }
            )
        rows.append(
            {
                "api_replicas": n_replicas,
                **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
            }
        )
        print(rows[-1], flush=True)
    return rows


def render(result: dict) -> str:
    env = result["environment"]
    lines = [
        "## Durability and scale-out (feedback log, recovery, api replicas)",
        "",
        f"Written by `benchmarks/service_durability.py` on {env['date']} (commit "
        f"{env['commit']}, {env['cpus']} CPUs, load average before the runs "
        f"{env['load_before']}, after {env['load_after']}). Model: DoS rank {MODEL['rank']} "
        f"over {MODEL['n_features']:,} hashed features, {MODEL['nnz']} non-zeros per example. "
        f"Load from `deploy/loadtest/loadgen.py --client raw` on the same machine, "
        f"{result['settings']['duration']:g} s per run after 1 s of warm-up, medians of "
        f"{result['settings']['repeats']} runs.",
        "",
        "### Feedback throughput with the log on and off",
        "",
        "| log | traffic | requests/s | examples/s | p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["throughput"]:
        traffic = (
            "1 example per JSON request, 8 clients"
            if row["mode"] == "feedback"
            else f"svmlight bodies of {result['settings']['batch']:,} examples, 2 clients"
        )
        lines.append(
            f"| {row['log']} | {traffic} | {row['req_per_s']:,.1f} | "
            f"{row['examples_per_s']:,.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['errors']} |"
        )
    lines += [
        "",
        "### Recovery time against log length",
        "",
        "A model's snapshot, then N single-example log records after it; the service replays "
        "them at start-up before `/readyz` turns ready.",
        "",
        "| records after the snapshot | replay s | start to ready s | records/s replayed |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["recovery"]:
        rate = f"{row['records_per_s']:,.0f}" if row["records_per_s"] else ""
        lines.append(
            f"| {row['records']:,} | {row['replay_s']:.3f} | {row['start_to_ready_s']:.2f} | "
            f"{rate} |"
        )
    lines += [
        "",
        "### Predict throughput with one and two api replicas",
        "",
        "One learner and the api replicas as separate processes against one Redis; one load "
        "generator (8 clients) per replica; throughput summed, latency of the slowest.",
        "",
        "| api replicas | predict requests/s | p50 ms | p99 ms |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["replicas"]:
        lines.append(
            f"| {row['api_replicas']} | {row['req_per_s']:,.1f} | {row['p50_ms']:.2f} | "
            f"{row['p99_ms']:.2f} |"
        )
    if result.get("freshness"):
        lines += [
            "",
            "### Freshness: acknowledged feedback to a replica serving it",
            "",
            f"One learner and one api replica (Redis), feedback posted to the replica at "
            f"{result['settings'].get('feedback_rate', 1000):,.0f} single-example requests/s "
            f"(open loop) for {result['settings'].get('freshness_duration', 10):g} s, the "
            "default publication interval (0.25 s); the replica's "
            "`lorentztron_freshness_seconds` histogram (per loaded version, the delay of its "
            "oldest new record; quantiles as the upper bound of their bucket).",
            "",
            "| model | feedback/s reached | versions loaded | mean s | p50 <= s | p99 <= s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in result["freshness"]:
            lines.append(
                f"| {row['model']} | {row['feedback_per_s']:,.0f} | {row['versions_loaded']:.0f} "
                f"| {row['mean_s']:.3f} | {row['p50_le_s']:g} | {row['p99_le_s']:g} |"
            )
    for note in result.get("notes", []):
        lines += ["", note]
    lines.append("")
    return "\n".join(lines) + "\n"


def publish(result: dict) -> None:
    (DOCS / "durability_benchmarks.json").write_text(json.dumps(result, indent=1) + "\n")
    replace_section(DOCS / "benchmarks.md", BEGIN, END, render(result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    result = {
        "environment": {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit,
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


if __name__ == "__main__":
    raise SystemExit(main())
