"""Many small models in one process (a model per user, merchant or tenant).

Starts a real server (``lorentztron serve``), creates ``--models`` linear-pa models of 30
features over HTTP, then measures: the creation rate, the resident memory per model (beyond
the bytes of its arrays, ``Plan.nbytes``), the size and time of a ``/metrics`` scrape, the
time of a page of ``GET /v1/models`` (1,000 models), and the time to ready after SIGKILL
(a restart on the same directory, until ``/readyz`` answers 200, then every model answers).
Writes its section of ``docs/many_models.md``.

    python -m benchmarks.many_models --models 20000 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.markdown import replace_section
from benchmarks.servers import ROOT, ServiceProcess, free_port
from service.model.kinds import Limits, plan
from service.model.spec import CreateModel

DOC = ROOT / "docs" / "many_models.md"
HEADER = (
    "# Many small models in one process\n\n"
    "A model per user, merchant or tenant: what one `lorentztron serve` costs per model. "
    "Written by `benchmarks/many_models.py`.\n"
)
SPEC = {"kind": "linear-pa", "input": {"n_features": 30}}
N_FEATURES = 30


def rss(pid: int) -> int:
    """Resident bytes of the process (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def timed(call, repeat: int = 3) -> tuple[float, object]:
    """The median seconds of ``repeat`` calls, and the last answer."""
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def create_all(url: str, count: int, threads: int) -> float:
    """Create ``count`` models over HTTP from ``threads`` clients; models per second."""

    def create(part: range) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            for i in part:
                response = client.post("/v1/models", json={**SPEC, "name": f"u{i:06d}"})
                if response.status_code != 201:
                    raise RuntimeError(f"create u{i:06d}: {response.status_code} {response.text}")

    parts = [range(k, count, threads) for k in range(threads)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, parts))
    return count / (time.perf_counter() - started)


def measure(count: int, threads: int, top_n: int) -> dict:
    arrays = plan(CreateModel.model_validate({**SPEC, "name": "x"}), Limits(1 << 40, 5000, 50_000))
    with tempfile.TemporaryDirectory() as directory:
        env = {
            "LORENTZTRON_SNAPSHOT_DIR": directory,
            "LORENTZTRON_MAX_MODELS": str(count + 10),
            "LORENTZTRON_METRICS_TOP_N": str(top_n),
            "LORENTZTRON_LOG_LEVEL": "warning",
        }
        port = free_port()
        server = ServiceProcess(env, Path(directory) / "server.log").start(timeout=600, port=port)
        try:
            url = server.url
            before = rss(server.process.pid)
            rate = create_all(url, count, threads)
            with httpx.Client(base_url=url, timeout=120) as client:
                # some traffic, so that the busiest models are the ones with series
                row = {"instances": [{"x": [0.1] * N_FEATURES}]}
                example = {"examples": [{"x": [0.1] * N_FEATURES, "label": 1}]}
                for i in range(0, count, max(1, count // 50)):
                    client.post(f"/v1/models/u{i:06d}/predict", json=row).raise_for_status()
                    client.post(f"/v1/models/u{i:06d}/feedback", json=example).raise_for_status()
                time.sleep(2.0)  # (the worker's tick)
                after = rss(server.process.pid)
                scrape, metrics = timed(lambda: client.get("/metrics"))
                page, listing = timed(lambda: client.get("/v1/models", params={"limit": 1000}))
                listing = listing.json()
                last, _ = timed(
                    lambda: client.get("/v1/models", params={"after": f"u{count - 500:06d}"})
                )
            server.kill()  # SIGKILL: no final snapshot, no flush
            started = time.monotonic()
            server.start(timeout=600, port=port)
            ready = time.monotonic() - started
            with httpx.Client(base_url=url, timeout=120) as client:
                started = time.monotonic()
                for i in range(0, count, max(1, count // 50)):
                    client.post(f"/v1/models/u{i:06d}/predict", json=row).raise_for_status()
                first_requests = (time.monotonic() - started) / len(range(0, count, count // 50))
                restarted_rss = rss(server.process.pid)
        finally:
            server.stop()
    per_model = (after - before) / count
    return {
        "models": count,
        "create_per_second": round(rate, 1),
        "rss_before_mb": round(before / 2**20, 1),
        "rss_after_mb": round(after / 2**20, 1),
        "rss_per_model_kb": round(per_model / 1024, 2),
        "arrays_per_model_kb": round(arrays.nbytes / 1024, 2),
        "beyond_arrays_per_model_kb": round((per_model - arrays.nbytes) / 1024, 2),
        "metrics_bytes": len(metrics.content),
        "metrics_seconds": round(scrape, 3),
        "page_models": len(listing["models"]),
        "page_bytes": len(json.dumps(listing)),
        "page_seconds": round(page, 3),
        "last_page_seconds": round(last, 3),
        "restart_ready_seconds": round(ready, 2),
        "first_predict_after_restart_ms": round(first_requests * 1000, 2),
        "rss_after_restart_mb": round(restarted_rss / 2**20, 1),
    }


def table(results: list[dict]) -> str:
    rows = [
        ("models created per second (HTTP, 8 clients)", "create_per_second"),
        ("resident memory before / after (MB)", None),
        ("resident memory per model (KB)", "rss_per_model_kb"),
        ("of which its arrays (KB, `Plan.nbytes`)", "arrays_per_model_kb"),
        ("beyond its arrays (KB)", "beyond_arrays_per_model_kb"),
        ("`/metrics` size (bytes)", "metrics_bytes"),
        ("`/metrics` time (s, median of 3)", "metrics_seconds"),
        ("`GET /v1/models` (a page): models", "page_models"),
        ("`GET /v1/models` (a page): bytes", "page_bytes"),
        ("`GET /v1/models` (a page): time (s, median of 3)", "page_seconds"),
        ("restart after SIGKILL until `/readyz` 200 (s)", "restart_ready_seconds"),
        ("then a predict of a model (ms, mean of 50)", "first_predict_after_restart_ms"),
        ("resident memory after the restart (MB)", "rss_after_restart_mb"),
    ]
    header = "| | " + " | ".join(f"{r['label']}, {r['models']:,} models" for r in results) + " |"
    lines = [header, "|---|" + "---:|" * len(results)]
    for label, key in rows:
        if key is None:
            cells = [f"{r['rss_before_mb']} / {r['rss_after_mb']}" for r in results]
        else:
            cells = [f"{r[key]:,}" for r in results]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    commands = sorted({r["command"] for r in results})
    before = any(r["label"].startswith("before") for r in results)
    return (
        "Measured by "
        + ", ".join(f"`{command}`" for command in commands)
        + " (linear-pa, 30 features; `LORENTZTRON_METRICS_TOP_N=100`; one run per column "
        "on a 2-core machine shared with other work: the times are indicative, the sizes "
        "exact"
        + (
            "; `before` is the same script run against the commit named, whose "
            "`GET /v1/models` answers every model"
            if before
            else ""
        )
        + "). Every model got a snapshot at its creation; 50 of them got a prediction and a "
        "feedback example before the measures.\n\n" + "\n".join(lines) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[20_000])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--top-n", type=int, default=100)
    parser.add_argument("--label", default="after", help="the column's name in the table")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "many_models.json")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument(
        "--add",
        type=Path,
        help="instead of measuring, add the lines this script printed (a run of it against "
        "another commit, say) to the table, under --label",
    )
    args = parser.parse_args()
    command = "python -m benchmarks.many_models --models " + " ".join(map(str, args.models))
    if args.label != "after":
        command += f" --label '{args.label}'"
    results = []
    if args.add is not None:
        for line in args.add.read_text().splitlines():
            if line.startswith("{"):
                printed = json.loads(line)
                printed.pop("label", None)
                printed.pop("command", None)
                results.append({"label": args.label, "command": command, **printed})
    for count in args.models if args.add is None else ():
        result = {
            "label": args.label,
            "command": command,
            **measure(count, args.threads, args.top_n),
        }
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.no_docs:
        return
    # the columns of other labels and sizes measured before stay
    kept = json.loads(args.json.read_text()) if args.json.exists() else []
    measured = {(r["label"], r["models"]) for r in results}
    kept = [r for r in kept if (r["label"], r["models"]) not in measured] + results
    kept.sort(key=lambda r: (not r["label"].startswith("before"), r["models"]))
    args.json.write_text(json.dumps(kept, indent=1) + "\n")
    body = table(kept)
    replace_section(
        args.doc, "<!-- many_models:begin -->", "<!-- many_models:end -->", body, HEADER
    )


if __name__ == "__main__":
    main()
