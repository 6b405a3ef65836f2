"""Predict throughput with one and two api replicas (one learner, one Redis)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks.environment import ROOT
from benchmarks.service_durability.processes import (
    LOADGEN,
    MODEL,
    redis_server,
    service,
    wait_ready,
    wait_redis,
)


def replicas(args, tmp: Path) -> list[dict]:
    """Predict throughput with one and two api replicas: one load generator per replica,
    throughput summed, latency of the slowest; medians over ``args.repeats`` runs."""
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
