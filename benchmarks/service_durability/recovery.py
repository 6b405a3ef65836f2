"""Recovery time against log length: a model's snapshot, then N single-example log records
after it, replayed at start-up before ``/readyz`` turns ready."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import httpx
import numpy as np

from benchmarks.servers import wait_ready
from benchmarks.service_durability.processes import MODEL, service
from core.features import CSRBatch
from service.durability.feedback_log import encode_record
from service.durability.file_log import FileLog


def write_log(directory: Path, n_records: int, seed: int = 0) -> None:
    """A model created by a first run, then ``n_records`` single-example records."""
    journal = FileLog(directory, fsync="none")
    rng = np.random.default_rng(seed)
    n_features, nnz = MODEL["n_features"], MODEL["nnz"]
    for _ in range(n_records):
        indices = np.sort(rng.choice(n_features, nnz, replace=False)).astype(np.int64)
        batch = CSRBatch(np.array([0, nnz]), indices, rng.standard_normal(nnz))
        journal.append_many("m", [encode_record(batch, np.array([int(rng.integers(0, 2))]))])
    journal.close()


def recovery(args, tmp: Path) -> list[dict]:
    """Per log length: start to ready and the replay time the server reports, medians over
    ``args.repeats`` runs."""
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
            with service(env).start() as server:  # create the model (snapshot 0), then stop
                assert httpx.post(f"{server.url}/v1/models", json=spec).status_code == 201
            write_log(directory / "snapshots" / ".log", n_records, seed=repeat)
            with service(env).launch() as server:
                url = server.url
                ready = wait_ready(url, process=server.process, period=0.02)
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
