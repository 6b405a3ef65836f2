"""Predict throughput with one and two api replicas (one learner, one Redis)."""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import time
from pathlib import Path

import httpx

from benchmarks.servers import ROOT, RedisServer, start_all
from benchmarks.service_durability.processes import LOADGEN, MODEL, service


def replicas(args, tmp: Path) -> list[dict]:
    """Predict throughput with one and two api replicas: one load generator per replica,
    throughput summed, latency of the slowest; medians over ``args.repeats`` runs."""
    rows = []
    for n_replicas in (1, 2):
        runs = []
        for repeat in range(args.repeats):
            directory = tmp / f"replicas-{n_replicas}-{repeat}"
            directory.mkdir()
            with RedisServer(directory, appendfsync="everysec").start() as redis_server:
                env = {
                    "LORENTZTRON_REDIS_URL": redis_server.url,
                    "LORENTZTRON_POLL_INTERVAL": "0.5",
                }
                learner = service({**env, "LORENTZTRON_ROLE": "learner"})
                apis = [service({**env, "LORENTZTRON_ROLE": "api"}) for _ in range(n_replicas)]
                with learner.start(), contextlib.ExitStack() as stack:
                    for api in apis:
                        stack.enter_context(api)
                    start_all(apis)
                    urls = [api.url for api in apis]
                    summaries = _predict_on_every_replica(urls, args.duration, directory)
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


def _predict_on_every_replica(urls: list[str], duration: float, directory: Path) -> list[dict]:
    """Create the model through the first replica, wait until every replica serves it, then
    one load generator per replica at once; their summaries."""
    spec = {
        "name": "m",
        "kind": "dos",
        "params": {"rank": MODEL["rank"]},
        "input": {"hashed": MODEL["n_features"]},
    }
    assert httpx.post(f"{urls[0]}/v1/models", json=spec).status_code == 201
    deadline = time.monotonic() + 30
    while not all(httpx.get(f"{u}/v1/models/m").status_code == 200 for u in urls):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    generators = [
        subprocess.Popen(
            [
                *LOADGEN,
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
                str(duration),
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
    return [json.loads((directory / f"predict-{i}.json").read_text()) for i in range(len(urls))]
