"""Where a bulk feedback body's time goes, in-process, as the server handles it.

The service's app is created and started as in :mod:`deploy.loadtest.cost_breakdown` (the
process set up as ``lorentztron serve`` sets it up), a model of the bulk scenario is created
(the load generator's workload: DoS rank 16 over 2^18 hashed features, svmlight bodies of
20,000 rows of 30 non-zeros), and bodies go through ``service.http.grouping.handle_group``,
the handler a bulk request runs in its thread: parse and validation outside the model's lock,
then the log append, learning and averaging under the writer lock, then the fsync.

- ``--profile``: one thread, cProfile with the thread's CPU clock over ``--bodies`` bodies;
  prints the CPU per example of each step and the share spent under the writer lock (the
  part that one model serialises, whatever the number of clients);
- ``--threads N``: N threads send bodies for ``--seconds`` (the closed loop of the bulk
  scenario without HTTP): examples per second and process CPU per example.

    python -m deploy.loadtest.bulk_profile --profile
    python -m deploy.loadtest.bulk_profile --threads 2 --seconds 10
    python -m deploy.loadtest.bulk_profile --threads 2 --averaging-interval 1000000000
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import sys
import tempfile
import threading
import time

from deploy.loadtest.cost_breakdown import asgi_call
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.workload import Workload
from service.config import Settings
from service.http.grouping import handle_group
from service.main import create_app
from service.ops.cli import configure_process

#: (label, file suffix, function name) of the steps reported by --profile
STEPS = (
    ("parse + validation (svmlight_batch), no lock", "core/datasets.py", "svmlight_batch"),
    ("writer lock held (learn_group)", "service/model/live.py", "learn_group"),
    ("  log record: encode, checksum, write", "service/model/live.py", "_append"),
    ("  learn, averaging included (Averaged.learn_many)", "core/averaging.py", "learn_many"),
    ("    DoS model (DoSClassifier._learn_batch)", "core/dos.py", "_learn_batch"),
    ("    averaging folds (_fold_into_average)", "core/averaging.py", "_fold_into_average"),
    ("    rollback copies across averaging steps (_state)", "core/averaging.py", "_state"),
    ("fsync (sync)", "service/model/live.py", "sync"),
)


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    """Seconds spent in (and below) the function ``name`` of the file ending in ``suffix``."""
    total = 0.0
    for (path, _, function), (_, _, _, cumtime, _) in stats.stats.items():
        if function == name and path.endswith(suffix):
            total += cumtime
    return total


async def run(args) -> None:
    config = LoadConfig(
        mode="bulk",
        batch=args.batch,
        bulk_bodies=2,
        pool=512,
        averaging_interval=args.averaging_interval,
    )
    workload = Workload(config)
    configure_process(Settings())
    with tempfile.TemporaryDirectory() as directory:
        app = create_app(Settings(snapshot_dir=directory, snapshot_interval=3600))
        logging.disable(logging.INFO)
        async with app.router.lifespan_context(app):
            spec = json.dumps(workload.model_spec("m")).encode()
            assert await asgi_call(app, "POST", "/v1/models", spec, "application/json") == 201
            components = app.state.components
            live = components.models.get("m")
            bodies = workload.bulk_bodies

            def one(i: int) -> None:
                request = ("text/x-svmlight", bodies[i % len(bodies)])
                [(ok, value)] = handle_group(components, live, [request], lambda: None)
                if not ok:
                    raise value

            for i in range(3):  # compiled kernels, first averaging fold
                one(i)
            load = os.getloadavg()[0]
            if args.profile:
                profile = cProfile.Profile(time.thread_time)
                started = time.thread_time()
                profile.enable()
                for i in range(args.bodies):
                    one(i)
                profile.disable()
                n = args.bodies * args.batch
                total = time.thread_time() - started
                stats = pstats.Stats(profile)
                print(
                    f"{args.bodies} bodies of {args.batch:,} examples, one thread, load {load:.2f}"
                )
                print(f"  {'all (thread CPU)':<52} {1e6 * total / n:6.2f} us/example")
                for label, suffix, name in STEPS:
                    seconds = cumulative(stats, suffix, name)
                    print(f"  {label:<52} {1e6 * seconds / n:6.2f} us/example")
                if args.top:
                    stats.sort_stats("tottime").print_stats(args.top)
                return
            stop = time.perf_counter() + args.seconds
            counts = [0] * args.threads

            def worker(j: int) -> None:
                i = j
                while time.perf_counter() < stop:
                    one(i)
                    i += 1
                    counts[j] += args.batch

            wall, cpu = time.perf_counter(), time.process_time()
            threads = [threading.Thread(target=worker, args=(j,)) for j in range(args.threads)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
            n = sum(counts)
            print(
                f"{args.threads} threads, {n:,} examples in {wall:.1f} s: {n / wall:,.0f} "
                f"examples/s, process CPU {1e6 * cpu / n:.2f} us/example, load average "
                f"{load:.2f} before, {os.getloadavg()[0]:.2f} after"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile one thread")
    parser.add_argument("--bodies", type=int, default=10, help="--profile: bodies profiled")
    parser.add_argument("--top", type=int, default=0, help="--profile: functions listed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument(
        "--averaging-interval", type=int, help="the model's (default: the service's)"
    )
    args = parser.parse_args(argv)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
