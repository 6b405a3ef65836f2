"""Data-parallel learning of one hot DoS model on the MNIST deformation stream: k worker
processes learn round-robin shares of one stream, merged every ``--interval`` examples by
the aligned averaging of section 3.4 (``core.parallel``), against k = 1 (a single learner
on the same examples). Throughput (examples/s over the whole run: learning, state
transfers and merges), the coordinator's time in the merges, and the clean test error of
the merged model, for both merges:

- ``serial``: each worker sends its state through a pipe and the coordinator folds the k
  states (``core.parallel.merge``), then sends the merged state to each worker;
- ``parallel``: each worker aligns its state to the round's common start in its own process
  (``core.parallel.align_to``) into its row of a shared-memory buffer, the workers sum the
  rows pairwise in a tree (``core.parallel.tree_children``, each child's row handed on by a
  semaphore) and worker 0 writes the mean to a shared buffer, which the coordinator loads
  into the served model and every worker starts the next round from.

The model is ``OneVsOne`` over ``DoSClassifier(n_features=784, rank)`` (45 pair models);
the stream is generated before timing and shared with the workers by ``fork``: the
coordinator sends each worker the row numbers of its share (a worker process runs exactly
``core.parallel.DataParallel``'s rounds with the same merge: the result is the same bit for
bit, checked in the quick mode).

    python -m benchmarks.data_parallel            # writes docs/data_parallel.md (+ .json)
    python -m benchmarks.data_parallel --quick    # seconds, prints only
    python -m benchmarks.data_parallel --accuracy --examples 120000 --intervals 10000 40000

``--accuracy`` compares only the test error of the two merges, in one process
(``DataParallel``, the processes' result bit for bit), on a longer stream; it writes its
own section of docs/data_parallel.md (+ data_parallel_accuracy.json).
"""

from __future__ import annotations

import argparse
import json
import math
import mmap
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
from core.parallel import (
    DataParallel,
    align_to,
    deal,
    float_layout,
    merge,
    tree_children,
    unflatten,
)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMAND = "python -m benchmarks.data_parallel"
BEGIN, END = "<!-- data-parallel:begin -->", "<!-- data-parallel:end -->"
ACCURACY_BEGIN = "<!-- data-parallel-accuracy:begin -->"
ACCURACY_END = "<!-- data-parallel-accuracy:end -->"
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


def run_processes(model, X, y, n_workers: int, interval: int, mode: str = "serial"):
    """``DataParallel(model, n_workers, interval, merge=mode).learn_many(X, y)`` on worker
    processes: (the merged model, seconds, of which the coordinator merging, the
    coordinator's CPU seconds in the merges, the coordinator's CPU seconds)."""
    if mode == "parallel" and n_workers > 1:
        return _run_parallel(model, X, y, n_workers, interval)
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
    merging = merging_cpu = 0.0
    started, cpu = time.perf_counter(), time.process_time()
    try:
        for start, stop in plan.rounds(X.shape[0]):
            for pipe, rows in zip(pipes, deal(start, stop - start, n_workers), strict=True):
                pipe.send((state, start + rows))
            states = [pipe.recv() for pipe in pipes]
            state = None
            if stop % interval == 0:  # (as DataParallel: a last part short of it is not)
                began, began_cpu = time.perf_counter(), time.process_time()
                state = states[0] if n_workers == 1 else merge(states)
                merged.set_state(state)
                merging += time.perf_counter() - began
                merging_cpu += time.process_time() - began_cpu
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        for pipe in pipes:
            pipe.send(None)
        for process in processes:
            process.join(timeout=30)
    return merged, seconds, merging, merging_cpu, cpu


def _tree_worker(pipe, model, worker, n_workers, rows, mean, ready) -> None:
    """A worker of the parallel merge: learn the rows sent; at a merge, align the state to
    the round's start into its row of ``rows``, add its children's rows (``tree_children``,
    each awaited on its semaphore), hand its row to its parent (release its own semaphore);
    worker 0 writes the mean to ``mean``. Answers with the scalars (the last worker) or
    None; a round after a merge starts from ``mean`` with those scalars."""
    X, y = _SHARED["X"], _SHARED["y"]
    reference = model.get_state()
    children = tree_children(worker, n_workers)
    while True:
        message = pipe.recv()
        if message is None:
            return
        meta, rows_learned, merging = message
        if meta is not None:  # a merge ended the last round: every worker starts from it
            model.set_state(unflatten(mean, {**meta, "arrays": reference["arrays"]}))
            reference = model.get_state()
        if rows_learned.size:
            model.learn_many(X[rows_learned], y[rows_learned])
        answer = None
        if merging:
            state = model.get_state()
            align_to(reference, state, out=rows[worker])
            for child in children:
                ready[child].acquire()
                rows[worker] += rows[child]
            if worker:
                ready[worker].release()
            else:
                np.divide(rows[0], n_workers, out=mean)
            if worker == n_workers - 1:
                answer = {**state, "arrays": {}}  # (OneVsOne's arrays are all float)
        pipe.send(answer)


def _shared_array(shape) -> np.ndarray:
    """A float64 array in anonymous shared memory (inherited by forked processes)."""
    size = int(np.prod(shape)) * 8
    buffer = mmap.mmap(-1, max(size, 8))
    return np.frombuffer(buffer, dtype=np.float64, count=int(np.prod(shape))).reshape(shape)


def _run_parallel(model, X, y, n_workers: int, interval: int):
    """``run_processes`` with the parallel merge (module docstring)."""
    _SHARED.update(X=X, y=y)
    template_state = model.get_state()
    if any(a.dtype.kind != "f" for a in template_state["arrays"].values()):
        raise ValueError("the benchmark's parallel merge carries float arrays only")
    size = sum(part.stop - part.start for _, part, _ in float_layout(template_state))
    rows, mean = _shared_array((n_workers, size)), _shared_array((size,))
    context = multiprocessing.get_context("fork")
    ready = [context.Semaphore(0) for _ in range(n_workers)]
    pipes, processes = [], []
    for worker in range(n_workers):
        parent, child = context.Pipe()
        process = context.Process(
            target=_tree_worker,
            args=(child, model.clone(), worker, n_workers, rows, mean, ready),
            daemon=True,
        )
        process.start()
        pipes.append(parent)
        processes.append(process)
    plan = DataParallel(model, n_workers, interval, merge="parallel")
    merged, meta = model.clone(), None
    merging = merging_cpu = 0.0
    started, cpu = time.perf_counter(), time.process_time()
    try:
        for start, stop in plan.rounds(X.shape[0]):
            merge_now = stop % interval == 0
            for pipe, share in zip(pipes, deal(start, stop - start, n_workers), strict=True):
                pipe.send((meta, start + share, merge_now))
            answers = [pipe.recv() for pipe in pipes]
            meta = None
            if merge_now:
                began, began_cpu = time.perf_counter(), time.process_time()
                meta = answers[-1]
                merged.set_state(unflatten(mean, {**meta, "arrays": template_state["arrays"]}))
                merging += time.perf_counter() - began
                merging_cpu += time.process_time() - began_cpu
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        for pipe in pipes:
            pipe.send(None)
        for process in processes:
            process.join(timeout=30)
    return merged, seconds, merging, merging_cpu, cpu


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
            modes = ["single"] if k == 1 else ["serial", "parallel"]
            runs: dict[str, list] = {mode: [] for mode in modes}
            for repeat in range(args.repeats):  # the two merges alternate, each first in turn
                for mode in modes[::-1] if repeat % 2 else modes:
                    merge_mode = "serial" if mode == "single" else mode
                    runs[mode].append(run_processes(model, X, y, k, interval, merge_mode))
            n_merges = max(args.examples // interval, 1)
            for mode in modes:
                seconds = statistics.median(run[1] for run in runs[mode])
                merge_s = statistics.median(run[2] for run in runs[mode])
                rows.append(
                    {
                        "interval": interval,
                        "workers": k,
                        "merge": mode,
                        "seconds": seconds,
                        "merge_s": merge_s,
                        "merge_ms_per_merge": 1000 * merge_s / n_merges,
                        "merge_cpu_ms_per_merge": 1000
                        * statistics.median(run[3] for run in runs[mode])
                        / n_merges,
                        "coordinator_cpu_s": statistics.median(run[4] for run in runs[mode]),
                        "examples_per_s": args.examples / seconds,
                        "test_error": error(runs[mode][0][0], test_images, test_labels),
                        "single_averaged_error": averaged_error,
                        "seconds_all": [run[1] for run in runs[mode]],
                        "merge_s_all": [run[2] for run in runs[mode]],
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
    """The worker processes give what ``core.parallel.DataParallel`` gives, bit for bit,
    with either merge (k = 3: a tree that is not a power of two)."""
    (source_images, source_labels), _ = mnist_split()
    X, y = DeformationStream(source_images, source_labels, seed=1).take(600)
    model = template(2)
    for k, mode in ((1, "serial"), (2, "serial"), (3, "parallel")):
        mine = run_processes(model, X, y, k, 200, mode)[0]
        reference = DataParallel(model, k, 200, merge=mode)
        reference.learn_many(X, y)
        for (name, a), (_, b) in zip(mine.arrays(), reference.model_.arrays(), strict=True):
            if not np.array_equal(a, b):
                raise AssertionError(
                    f"k={k}, {mode}: {name} differs from core.parallel.DataParallel"
                )


def targets(rows: list[dict]) -> list[str]:
    """The issue's targets, per interval: the coordinator's time per merge from the least
    to the most workers k >= 2 (flat within 1.5x), and the parallel merge's test error
    against the serial fold's (within 0.3 points)."""
    lines = []
    for interval in sorted({row["interval"] for row in rows}):
        merged = [r for r in rows if r["interval"] == interval and r["workers"] > 1]
        if not merged:
            continue
        ks = sorted({r["workers"] for r in merged})
        for mode in ("serial", "parallel"):
            ours = {r["workers"]: r for r in merged if r["merge"] == mode}
            parts = []
            for key, what in (("merge_ms_per_merge", "wall"), ("merge_cpu_ms_per_merge", "CPU")):
                low, high = ours[ks[0]].get(key, math.nan), ours[ks[-1]].get(key, math.nan)
                ratio = high / low if low else math.nan
                verdict = "flat within 1.5x" if ratio <= 1.5 else "grows"
                parts.append(
                    f"{what} {low:.1f} ms at k = {ks[0]}, {high:.1f} ms at k = {ks[-1]}: "
                    f"{ratio:.2f}x ({verdict})"
                )
            lines.append(
                f"- interval {interval:,}, {mode} merge, coordinator time per merge: "
                + "; ".join(parts)
                + "."
            )
        gaps = [
            100 * (p["test_error"] - s["test_error"])
            for p in merged
            if p["merge"] == "parallel"
            for s in merged
            if s["merge"] == "serial" and s["workers"] == p["workers"]
        ]
        worst = max(gaps, key=abs)
        verdict = "within" if abs(worst) <= 0.3 else "outside"
        lines.append(
            f"- interval {interval:,}: parallel merge's test error minus the serial fold's, "
            f"k = {', '.join(map(str, ks))}: {', '.join(f'{g:+.2f}' for g in gaps)} points "
            f"(largest {worst:+.2f}: {verdict} 0.3 points)."
        )
    return lines


def render(result: dict) -> str:
    env, settings, rows = result["environment"], result["settings"], result["rows"]
    lines = [
        "## Throughput, merge time and test error against the number of workers",
        "",
        f"Written by `{result.get('command', COMMAND)}` on {env['date']} (commit "
        f"{env['commit']}, {env['cpus']} CPUs: {env['cpu']}, load average before the run "
        f"{env['load_before']}). `OneVsOne` over `DoSClassifier(n_features=784, "
        f"rank={settings['rank']})`, {settings['examples']:,} examples of the MNIST "
        "deformation stream (seed 0) dealt round-robin to k worker processes, merged every "
        "`interval` examples by aligned averaging (`core.parallel`): `serial`, the fold at "
        "the coordinator; `parallel`, aligned to the round's start in the workers and summed "
        "in a tree through shared memory; k = 1 is a single learner. Test error of the merged "
        "(live) model on the 2,000 clean MNIST test digits the stream never draws from; for "
        "reference, the single learner's time-averaged model (`Averaged`, same interval). "
        "Throughput: examples / wall-clock seconds of the whole run (learning, state "
        f"transfers, merges), median of {settings['repeats']} runs, the two merges "
        "alternating; merge ms: the coordinator's time per merge from the last worker's answer "
        "to the merged model loaded (serial: aligning and averaging 45 DoS pairs per worker; "
        "parallel: loading the mean), wall-clock and CPU (the coordinator process's, which "
        "a busy machine inflates less), median over the runs; coordinator "
        "CPU s: the coordinator process's CPU time over the whole run (pickling the states "
        "it sends and receives, merging).",
        "",
        "| interval | workers k | merge | examples/s | speed-up vs k = 1 | merge ms "
        "(coordinator, wall) | merge ms (coordinator, CPU) | coordinator CPU s | test error "
        "| vs single learner | single learner, time-averaged |",
        "|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        single = next(r for r in rows if r["workers"] == 1 and r["interval"] == row["interval"])
        lines.append(
            f"| {row['interval']:,} | {row['workers']} | {row.get('merge', 'serial')} | "
            f"{row['examples_per_s']:,.0f} | "
            f"{row['examples_per_s'] / single['examples_per_s']:.2f}x | "
            f"{row.get('merge_ms_per_merge', math.nan):.1f} | "
            f"{row.get('merge_cpu_ms_per_merge', math.nan):.1f} | "
            f"{row.get('coordinator_cpu_s', math.nan):.2f} | "
            f"{100 * row['test_error']:.2f}% | "
            f"{100 * (row['test_error'] - single['test_error']):+.2f} points | "
            f"{100 * row['single_averaged_error']:.2f}% |"
        )
    lines += ["", "Targets (issue 30):", "", *targets(rows), ""]
    return "\n".join(lines) + "\n"


def accuracy(args) -> dict:
    """Test error of the serial fold's and the parallel merge's models, in one process."""
    (source_images, source_labels), (test_images, test_labels) = mnist_split()
    X, y = DeformationStream(source_images, source_labels, seed=0).take(args.examples)
    model = template(args.rank)
    rows = []
    for interval in args.intervals:
        for k in (k for k in args.workers if k > 1):
            row = {"interval": interval, "workers": k}
            for mode in ("serial", "parallel"):
                parallel = DataParallel(model, k, interval, merge=mode)
                parallel.learn_many(X, y)
                row[mode] = error(parallel.model_, test_images, test_labels)
            rows.append(row)
            print(row, flush=True)
    return {
        "environment": {
            **environment(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        "settings": vars(args),
        "rows": rows,
    }


def render_accuracy(result: dict) -> str:
    env, settings = result["environment"], result["settings"]
    lines = [
        "## Test error of the two merges on a longer stream",
        "",
        f"Written by `{result.get('command', COMMAND)}` on {env['date']} (commit "
        f"{env['commit']}). The same model and stream, {settings['examples']:,} examples, "
        "learned by `DataParallel` in one process (the processes' result, bit for bit) with "
        "each merge; test error on the 2,000 clean MNIST test digits.",
        "",
        "| interval | workers k | serial fold | parallel merge | parallel - serial |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['interval']:,} | {row['workers']} | {100 * row['serial']:.2f}% | "
            f"{100 * row['parallel']:.2f}% | "
            f"{100 * (row['parallel'] - row['serial']):+.2f} points |"
        )
    lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--intervals", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny runs, print only")
    parser.add_argument(
        "--accuracy", action="store_true", help="only the test error of both merges, in-process"
    )
    args = parser.parse_args(argv)
    command = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    if args.quick:
        args.examples, args.intervals, args.rank = 1200, [400], 2
        args.workers, args.repeats = [1, 2, 3], 1
        check_reference(args)
    if args.accuracy or args.quick:
        result = accuracy(args)
        result["command"] = command
        if args.quick:
            print(render_accuracy(result))
        else:
            (DOCS / "data_parallel_accuracy.json").write_text(json.dumps(result, indent=1) + "\n")
            replace_section(
                DOCS / "data_parallel.md",
                ACCURACY_BEGIN,
                ACCURACY_END,
                render_accuracy(result),
                HEADER,
            )
            return 0
    result = measure(args)
    result["command"] = command
    if not args.quick:
        (DOCS / "data_parallel.json").write_text(json.dumps(result, indent=1) + "\n")
        replace_section(DOCS / "data_parallel.md", BEGIN, END, render(result), HEADER)
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
