"""Data-parallel learning of one hot DoS model on the MNIST deformation stream: k worker
processes learn round-robin shares of one stream, merged every ``--interval`` examples by
the aligned averaging of section 3.4 (``core.parallel``), against k = 1 (a single learner
on the same examples). Throughput (examples/s over the whole run: learning, state
transfers and merges) and the clean test error of the merged model.

The model is ``OneVsOne`` over ``DoSClassifier(n_features=784, rank)`` (45 pair models);
the stream is generated before timing and shared with the workers by ``fork``: the
coordinator sends each worker the row numbers of its share and receives its state (a
worker process runs exactly ``core.parallel.DataParallel``'s rounds: the result is the same
bit for bit, checked in the quick mode).

    python -m benchmarks.data_parallel            # writes docs/data_parallel.md (+ .json)
    python -m benchmarks.data_parallel --quick    # seconds, prints only
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from core.averaging import Averaged
from core.datasets import DeformationStream, mnist_split
from core.dos import DoSClassifier
from core.one_vs_one import OneVsOne
from core.parallel import DataParallel, deal, merge

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMAND = "python -m benchmarks.data_parallel"
BEGIN, END = "<!-- data-parallel:begin -->", "<!-- data-parallel:end -->"
HEADER = "# Data-parallel learning of one model\n"

#: the stream, set before the workers are forked (they read their shares from it)
_SHARED: dict = {}


def template(rank: int) -> OneVsOne:
    return OneVsOne(base=DoSClassifier(n_features=784, rank=rank, seed=0), classes=list(range(10)))


def _worker(pipe, model) -> None:
    """Learn the rows sent, from the merged state sent with them; answer with the state."""
    X, y = _SHARED["X"], _SHARED["y"]
    while True:
        message = pipe.recv()
        if message is None:
            return
        state, rows = message
        if state is not None:
            model.set_state(state)
        if rows.size:
            model.learn_many(X[rows], y[rows])
        pipe.send(model.get_state())


def run_processes(model, X, y, n_workers: int, interval: int):
    """``DataParallel(model, n_workers, interval).learn_many(X, y)`` on worker processes;
    (the merged model, seconds, of which merging)."""
    _SHARED.update(X=X, y=y)
    context = multiprocessing.get_context("fork")
    pipes, processes = [], []
    for _ in range(n_workers):
        parent, child = context.Pipe()
        process = context.Process(target=_worker, args=(child, model.clone()), daemon=True)
        process.start()
        pipes.append(parent)
        processes.append(process)
    plan = DataParallel(model, n_workers, interval)
    merged, state = model.clone(), None
    merging = 0.0
    started = time.perf_counter()
    try:
        for start, stop in plan.rounds(X.shape[0]):
            for pipe, rows in zip(pipes, deal(start, stop - start, n_workers), strict=True):
                pipe.send((state, start + rows))
            states = [pipe.recv() for pipe in pipes]
            state = None
            if stop % interval == 0:  # (as DataParallel: a last part short of it is not)
                began = time.perf_counter()
                state = states[0] if n_workers == 1 else merge(states)
                merging += time.perf_counter() - began
                merged.set_state(state)
        seconds = time.perf_counter() - started
    finally:
        for pipe in pipes:
            pipe.send(None)
        for process in processes:
            process.join(timeout=30)
    return merged, seconds, merging


def error(model, images: np.ndarray, labels: np.ndarray) -> float:
    X = images.reshape(images.shape[0], -1).astype(np.float64) / 255.0
    return float(np.mean(model.predict_many(X) != labels))


def measure(args) -> dict:
    (source_images, source_labels), (test_images, test_labels) = mnist_split()
    X, y = DeformationStream(source_images, source_labels, seed=0).take(args.examples)
    model = template(args.rank)
    model.clone().learn_many(X[:50], y[:50])  # compile the kernels before timing
    rows = []
    for interval in args.intervals:
        # the single learner's time average over the same intervals, for reference
        averaged = Averaged(model=model, interval=interval)
        averaged.learn_many(X, y)
        averaged_error = error(averaged, test_images, test_labels)
        for k in args.workers:
            runs = [run_processes(model, X, y, k, interval) for _ in range(args.repeats)]
            seconds = statistics.median(s for _, s, _ in runs)
            rows.append(
                {
                    "interval": interval,
                    "workers": k,
                    "seconds": seconds,
                    "merge_s": statistics.median(m for _, _, m in runs),
                    "examples_per_s": args.examples / seconds,
                    "test_error": error(runs[0][0], test_images, test_labels),
                    "single_averaged_error": averaged_error,
                    "seconds_all": [s for _, s, _ in runs],
                }
            )
            print(rows[-1], flush=True)
    return {
        "environment": {
            **environment(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_before": round(os.getloadavg()[0], 2),
        },
        "settings": vars(args),
        "rows": rows,
    }


def check_reference(args) -> None:
    """The worker processes give what ``core.parallel.DataParallel`` gives, bit for bit."""
    (source_images, source_labels), _ = mnist_split()
    X, y = DeformationStream(source_images, source_labels, seed=1).take(600)
    model = template(2)
    for k in (1, 2):
        mine, _, _ = run_processes(model, X, y, k, 200)
        reference = DataParallel(model, k, 200)
        reference.learn_many(X, y)
        for (name, a), (_, b) in zip(mine.arrays(), reference.model_.arrays(), strict=True):
            if not np.array_equal(a, b):
                raise AssertionError(f"k={k}: {name} differs from core.parallel.DataParallel")


def render(result: dict) -> str:
    env, settings, rows = result["environment"], result["settings"], result["rows"]
    lines = [
        "## Throughput and test error against the number of workers",
        "",
        f"Written by `{result.get('command', COMMAND)}` on {env['date']} (commit "
        f"{env['commit']}, {env['cpus']} CPUs: {env['cpu']}, load average before the run "
        f"{env['load_before']}). `OneVsOne` over `DoSClassifier(n_features=784, "
        f"rank={settings['rank']})`, {settings['examples']:,} examples of the MNIST "
        "deformation stream (seed 0) dealt round-robin to k worker processes, merged every "
        "`interval` examples by aligned averaging (`core.parallel`); k = 1 is a single "
        "learner. Test error of the merged (live) model on the 2,000 clean MNIST test digits "
        "the stream never draws from; for reference, the single learner's time-averaged model "
        "(`Averaged`, same interval). Throughput: examples / wall-clock seconds of the whole "
        f"run (learning, state transfers, merges), median of {settings['repeats']} runs; "
        "merge s: the coordinator's time in `merge` (aligning and averaging 45 DoS pairs per "
        "worker).",
        "",
        "| interval | workers k | examples/s | speed-up vs k = 1 | merge s | test error | vs "
        "single learner | single learner, time-averaged |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        single = next(r for r in rows if r["workers"] == 1 and r["interval"] == row["interval"])
        lines.append(
            f"| {row['interval']:,} | {row['workers']} | {row['examples_per_s']:,.0f} | "
            f"{row['examples_per_s'] / single['examples_per_s']:.2f}x | {row['merge_s']:.2f} | "
            f"{100 * row['test_error']:.2f}% | "
            f"{100 * (row['test_error'] - single['test_error']):+.2f} points | "
            f"{100 * row['single_averaged_error']:.2f}% |"
        )
    lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--intervals", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny runs, print only")
    args = parser.parse_args(argv)
    if args.quick:
        args.examples, args.intervals, args.rank = 1200, [400], 2
        args.workers, args.repeats = [1, 2], 1
        check_reference(args)
    result = measure(args)
    result["command"] = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    if not args.quick:
        (DOCS / "data_parallel.json").write_text(json.dumps(result, indent=1) + "\n")
        replace_section(DOCS / "data_parallel.md", BEGIN, END, render(result), HEADER)
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
