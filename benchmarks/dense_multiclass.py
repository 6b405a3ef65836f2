"""Dense multi-class bulk ingestion and batch scoring (issue 18): MNIST digits, 10 classes,
one-vs-one DoS rank 16 with Platt calibration and averaging every 5,000 examples (the model
the service builds for that request).

Measured in one run, interleaved rounds, medians of ``--repeats``:

- the library's ``learn_many`` on the rows (in calls of ``--body`` rows), by default (pair by
  pair, no progressive scores) and with ``progressive=True`` (every pair scores every example
  just before it is learned: what the service needs);
- the library's ``predict_many`` of the learned model, by the per-model path (each pair's
  kernel over the batch, the path that small batches still take) and by the stacked product;
  with ``--before CHECKOUT``, also by an earlier checkout's code (``benchmarks/predict_before.py``
  in a child process), for the speed-up over the code before issue 18;
- the single-thread peak of a large ``float64`` matrix product (the roofline of the scoring);
- bulk feedback through HTTP: a real server (``python -m service.ops.cli serve``, default
  settings: durable feedback log with fsync per request batch), svmlight bodies of ``--body``
  rows written with Python's ``repr`` of each non-zero value, sent one after the other and
  with two requests in flight (the next body parsed while the last one is learned); and
  the parse share: the CPU time of the server's body parsing (``parse_svmlight`` then
  ``as_batch``) of the same bodies, over the HTTP wall time.

Library figures are CPU time of the timing thread (``benchmarks.timing``); HTTP figures are
wall time (the server is another process). The load average is recorded beside each.

    git worktree add /tmp/before 4c0d960   # the commit issue 18 was filed at
    python -m benchmarks.dense_multiclass [--rows 20000] [--repeats 3] [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

import core.stacking as stacking
from benchmarks.environment import ROOT, environment
from benchmarks.markdown import replace_section
from benchmarks.service_durability.processes import service
from benchmarks.timing import Samples, Timing, interleaved, timed
from core.averaging import Averaged
from core.calibration import Calibrated
from core.datasets import load_mnist_test, parse_svmlight
from core.dos import DoSClassifier
from core.features import as_batch
from core.one_vs_one import OneVsOne

DOCS = ROOT / "docs"
BEGIN, END = "<!-- dense-multiclass:begin -->", "<!-- dense-multiclass:end -->"
N_FEATURES, RANK, INTERVAL = 784, 16, 5000
CLASSES = list(range(10))
COMMAND = "python -m benchmarks.dense_multiclass"
SVMLIGHT = "text/x-svmlight"


def stream(n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The MNIST test digits scaled to [0, 1], repeated to ``n_rows``, and their labels."""
    images, labels = load_mnist_test()
    X = images.reshape(len(images), -1).astype(np.float64) / 255.0
    repeat = -(-n_rows // len(X))
    return np.tile(X, (repeat, 1))[:n_rows], np.tile(labels.astype(np.int64), repeat)[:n_rows]


def model() -> Averaged:
    base = Calibrated(model=DoSClassifier(n_features=N_FEATURES, rank=RANK), method="platt")
    return Averaged(model=OneVsOne(base=base, classes=CLASSES), interval=INTERVAL)


def svmlight(X: np.ndarray, y: np.ndarray) -> bytes:
    """svmlight text, 1-based indices, each non-zero value written with ``repr``."""
    lines = []
    for x, label in zip(X.tolist(), y.tolist(), strict=True):
        pairs = " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(x) if v != 0.0)
        lines.append(f"{label} {pairs}\n")
    return "".join(lines).encode()


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of a process so far (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> float:
    return os.getloadavg()[0]


class Server:
    """A real server with default settings (bodies up to 64 MiB: a 5,000-row body written
    with ``repr`` is ~16 MB, over the 16 MiB default) and the bodies to send it."""

    def __init__(
        self, client: httpx.Client, pid: int, bodies: list[bytes], n_rows: int, in_flight: int
    ):
        self.client, self.pid, self.bodies, self.n_rows = client, pid, bodies, n_rows
        #: requests sent at once (2: a body is parsed while the one before it is learned)
        self.in_flight = in_flight
        self.samples = Samples()  # cpu: the server process's (all its threads)
        self.loads: list[float] = []
        self.runs = 0

    def spec(self, name: str) -> dict:
        return {
            "name": name, "kind": "dos", "input": {"n_features": N_FEATURES}, "classes": CLASSES,
            "multiclass": "ovo", "params": {"rank": RANK}, "averaging": {"interval": INTERVAL},
        }  # fmt: skip

    def send(self, name: str, body: bytes) -> None:
        answer = self.client.post(
            f"/v1/models/{name}/feedback", content=body, headers={"content-type": SVMLIGHT}
        )
        answer.raise_for_status()

    def warm_up(self, body: bytes) -> None:
        """Compile the server's kernels outside the timings."""
        self.client.post("/v1/models", json=self.spec("warm")).raise_for_status()
        self.send("warm", body)
        self.client.delete("/v1/models/warm").raise_for_status()

    def run(self) -> None:
        """One timed run: a fresh model learns every body, ``in_flight`` requests at a time
        (the server learns them in arrival order)."""
        name = f"mnist{self.in_flight}-{self.runs}"
        self.runs += 1
        self.client.post("/v1/models", json=self.spec(name)).raise_for_status()
        started, cpu = time.perf_counter(), process_cpu(self.pid)
        with ThreadPoolExecutor(self.in_flight) as senders:
            list(senders.map(lambda body: self.send(name, body), self.bodies))
        wall = time.perf_counter() - started
        self.samples.add(Timing(process_cpu(self.pid) - cpu, wall), self.n_rows)
        self.loads.append(load())
        info = self.client.get(f"/v1/models/{name}").json()
        assert info["examples_learned"] == self.n_rows, info
        self.client.delete(f"/v1/models/{name}").raise_for_status()


@contextlib.contextmanager
def stacking_setting(name: str, value):
    """``core.stacking.<name>`` set to ``value`` (None: left as it is) within the block: the
    paths the benchmark compares (``STACK_MIN_ROWS`` = ``sys.maxsize``: the per-model path;
    ``PAIR_BY_PAIR_BYTES`` = -1: progressive learning by block products)."""
    before = getattr(stacking, name)
    if value is not None:
        setattr(stacking, name, value)
    try:
        yield
    finally:
        setattr(stacking, name, before)


def block_flops(X: np.ndarray, block: int, width: int) -> float:
    """Flops per row of the stacked product over blocks of ``block`` rows of ``X``: each
    block multiplies the pixels that any of its rows uses by ``width`` columns (P = Z W)."""
    flops = 0
    for start in range(0, len(X), block):
        rows = X[start : start + block]
        flops += 2 * len(rows) * np.count_nonzero(rows.any(axis=0)) * width
    return flops / len(X)


def dgemm_gflops(size: int = 2000, repeats: int = 3) -> float:
    """GFLOP/s of a ``size`` x ``size`` float64 product on one BLAS thread (median)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((size, size)), rng.random((size, size))
    with stacking._blas_threads().limit(limits=1, user_api="blas"):
        a @ b
        seconds = sorted(timed(lambda: a @ b).cpu for _ in range(repeats))[repeats // 2]
    return 2 * size**3 / seconds / 1e9


class Before:
    """``predict_many`` of an earlier checkout, timed in a child process per round."""

    def __init__(self, checkout: str, X, y, body: int, directory: str):
        self.checkout, self.body = checkout, body
        self.rows = os.path.join(directory, "rows.npz")
        np.savez(self.rows, X=X, y=y)
        self.samples = Samples()
        self.predictions: np.ndarray | None = None

    def run(self) -> None:
        # the checkout first on the child's import path (the script, run by its path, adds
        # only its own folder, which holds no ``core``)
        script = ROOT / "benchmarks" / "predict_before.py"
        command = [sys.executable, str(script), self.checkout, self.rows, f"--body={self.body}"]
        answer = subprocess.run(
            command, capture_output=True, text=True, check=True,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": self.checkout},
        )  # fmt: skip
        result = json.loads(answer.stdout.splitlines()[-1])
        self.samples.add(Timing(result["cpu"], result["wall"]), self.body)
        self.predictions = np.asarray(result["predictions"])


def measure(X, y, body: int, repeats: int, before: str | None = None) -> dict:
    """Every figure of the module docstring, in interleaved rounds."""
    n = X.shape[0]
    chunks = [(X[s : s + body], y[s : s + body]) for s in range(0, n, body)]
    bodies = [svmlight(a, b) for a, b in chunks]
    warm = model()
    warm.learn_many(X[:300], y[:300])
    warm.learn_many(X[:300], y[:300], progressive=True)
    warm.predict_many(X[:300])
    keys = ("learn", "progressive", "progressive_blocks", "predict_old", "predict_new")
    samples = {k: Samples() for k in keys}
    loads: list[float] = []
    trained: list[Averaged] = []

    def learn(key: str, progressive: bool, blocks: bool = False):
        """``blocks``: progressive learning by block products, not pair by pair."""

        def run():
            fresh = model()
            with stacking_setting("PAIR_BY_PAIR_BYTES", -1 if blocks else None):
                samples[key].add(
                    timed(
                        lambda: [fresh.learn_many(a, b, progressive=progressive) for a, b in chunks]
                    ),
                    n,
                )
            trained[:] = [fresh]
            loads.append(load())

        return run

    predict_rows = X[: min(n, body)]

    def predict(key: str, stacked: bool):
        def run():
            scorer = trained[0].scorer("averaged")
            with stacking_setting("STACK_MIN_ROWS", None if stacked else sys.maxsize):
                samples[key].add(
                    timed(lambda: scorer.predict_many(predict_rows)), len(predict_rows)
                )

        return run

    parse = Samples()
    kernels = Samples()

    def pair_kernels():
        """The pairs' kernels of progressive learning alone (``learn_pair_by_pair``: each
        pair scores every row and learns its two classes'), on the rows as CSR."""
        fresh = model().live_
        batches = [(as_batch(a, N_FEATURES), fresh._class_indices(b, len(b))) for a, b in chunks]

        def run():
            for batch, targets in batches:
                assert stacking.learn_pair_by_pair(fresh.models_, fresh.pairs_, batch, targets)

        kernels.add(timed(run), n)

    def parsing():
        def run():
            for text in bodies:
                parsed, _ = parse_svmlight(text, n_features=N_FEATURES, source="body")
                as_batch(parsed, N_FEATURES)

        parse.add(timed(run), n)

    env = {"LORENTZTRON_SNAPSHOT_DIR": None, "LORENTZTRON_MAX_BODY_BYTES": str(64 << 20)}
    with tempfile.TemporaryDirectory() as directory:
        env["LORENTZTRON_SNAPSHOT_DIR"] = directory
        earlier = before and Before(before, X, y, body, directory)
        with (
            service(env).start() as process,
            httpx.Client(base_url=process.url, timeout=600) as client,
        ):
            server, pipelined = (Server(client, process.process.pid, bodies, n, k) for k in (1, 2))
            server.warm_up(svmlight(X[:100], y[:100]))
            interleaved(
                repeats,
                [
                    learn("learn", False),
                    learn("progressive", True),
                    learn("progressive_blocks", True, blocks=True),
                    predict("predict_old", False),
                    predict("predict_new", True),
                    parsing,
                    pair_kernels,
                    server.run,
                    pipelined.run,
                    *([earlier.run] if earlier else []),
                ],
                log=lambda line: print(line, flush=True),
            )
    scorer = trained[0].scorer("averaged")
    width = 2 * RANK * len(scorer.models_)
    with stacking_setting("STACK_MIN_ROWS", sys.maxsize):
        old = scorer.predict_many(predict_rows)
    new = scorer.predict_many(predict_rows)
    return {
        **samples,
        **({"predict_before": earlier.samples} if earlier else {}),
        "before_agreement": float(np.mean(earlier.predictions == new)) if earlier else None,
        "dgemm_gflops": dgemm_gflops(),
        "parse": parse,
        "kernels": kernels,
        "http": server.samples,
        "http_2": pipelined.samples,
        "agreement": float(np.mean(old == new)),
        "predict_flops_per_row": block_flops(predict_rows, stacking.STACK_BLOCK_ROWS, width),
        "nnz_per_row": float(np.count_nonzero(predict_rows) / len(predict_rows)),
        "library_loads": loads,
        "http_loads": server.loads + pipelined.loads,
        "body_bytes": sum(len(b) for b in bodies) / len(bodies),
    }


def summary(measured: dict, n_rows: int) -> dict:
    def cpu(key):
        return 1e6 / measured[key].median_us

    def wall(key):
        return 1e6 / measured[key].median_wall_us

    http = wall("http")
    useful_flops = 2 * measured["nnz_per_row"] * 1440  # non-zeros x 45 pairs x 32 columns
    before = "predict_before" in measured
    baseline = cpu("predict_before" if before else "predict_old")
    return {
        "rows": n_rows,
        "library_predict_many_before": (cpu("predict_before"), wall("predict_before"))
        if before
        else None,
        "predict_speedup_before": cpu("predict_new") / cpu("predict_before") if before else None,
        "predict_speedup_before_wall": wall("predict_new") / wall("predict_before")
        if before
        else None,
        "before_agreement": measured["before_agreement"],
        "dgemm_gflops": measured["dgemm_gflops"],
        "useful_gflops_per_model": useful_flops * cpu("predict_old") / 1e9,
        "useful_gflops_stacked": useful_flops * cpu("predict_new") / 1e9,
        "useful_gflops_five_x": useful_flops * 5 * baseline / 1e9,
        "library_learn_many": (cpu("learn"), wall("learn")),
        "library_learn_many_progressive": (cpu("progressive"), wall("progressive")),
        "library_learn_many_progressive_blocks": (
            cpu("progressive_blocks"),
            wall("progressive_blocks"),
        ),
        "library_predict_many_per_model": (cpu("predict_old"), wall("predict_old")),
        "library_predict_many_stacked": (cpu("predict_new"), wall("predict_new")),
        "predict_speedup": cpu("predict_new") / cpu("predict_old"),
        "predict_speedup_wall": wall("predict_new") / wall("predict_old"),
        "predict_agreement": measured["agreement"],
        "http_bulk_feedback": (cpu("http"), http),
        "library_over_http": wall("learn") / http,
        "library_over_http_cpu": cpu("learn") / cpu("http"),
        "progressive_over_http": wall("progressive") / http,
        "http_bulk_feedback_2": (cpu("http_2"), wall("http_2")),
        "library_over_http_2": wall("learn") / wall("http_2"),
        "library_over_http_2_cpu": cpu("learn") / cpu("http_2"),
        "parse_share_of_http": measured["parse"].median_us / measured["http"].median_wall_us,
        "kernels_us": measured["kernels"].median_us,
        # a digit's 45 scores and (at most) 9 steps: 54 x non-zeros x 32 multiply-adds
        "kernels_gflops": 2
        * 54
        * 32
        * measured["nnz_per_row"]
        / measured["kernels"].median_us
        / 1e3,
        "predict_flops_per_row": measured["predict_flops_per_row"],
        "predict_gflops": measured["predict_flops_per_row"]
        / measured["predict_new"].median_us
        / 1e3,
        "nnz_per_row": measured["nnz_per_row"],
        "progressive_us": measured["progressive"].median_us,
    }


def render(result: dict) -> str:
    s, env = result["summary"], result["environment"]
    loads = result["library_loads"] + result["http_loads"]
    rows = [
        ("library `learn_many` (default: pair by pair, no progressive scores)",
         "library_learn_many"),
        ("library `learn_many(progressive=True)` (pair by pair, the default here)",
         "library_learn_many_progressive"),
        ("library `learn_many(progressive=True)` by block products (the path for larger pairs)",
         "library_learn_many_progressive_blocks"),
        (f"library `predict_many`, code at {result.get('before_commit')} (before issue 18)",
         "library_predict_many_before"),
        ("library `predict_many`, per-model path (small batches)",
         "library_predict_many_per_model"),
        ("library `predict_many`, stacked product", "library_predict_many_stacked"),
        ("HTTP bulk svmlight feedback (durable log), one request at a time", "http_bulk_feedback"),
        ("HTTP bulk svmlight feedback (durable log), two requests in flight",
         "http_bulk_feedback_2"),
    ]  # fmt: skip

    def rate(value):
        return "" if value is None else f"{value:,.0f}"

    excess = s["predict_flops_per_row"] / (2 * s["nnz_per_row"] * 1440)
    table = "\n".join(
        f"| {what} | {rate(s[key][0])} | {rate(s[key][1])} |" for what, key in rows if s.get(key)
    )
    baseline = "the per-model path"
    speedup = s["predict_speedup"]
    before_line = ""
    if s.get("predict_speedup_before"):
        baseline, speedup = f"the code at {result['before_commit']}", s["predict_speedup_before"]
        before_line = f"""
- `predict_many`, stacked / code at {result["before_commit"]} (run in a child process from a
  checkout of that commit, its model learned there from the same rows):
  **{speedup:.2f}x** CPU, {s["predict_speedup_before_wall"]:.2f}x wall; the two predict the same
  class for {s["before_agreement"]:.2%} of the rows."""
    return f"""## Dense multi-class bulk feedback and batch scoring (`{COMMAND}`)

Command: `{result["command"]}`.

{s["rows"]:,} MNIST test digits (repeated), scaled to [0, 1], 10 classes, one-vs-one DoS
rank 16 over Platt-calibrated pairs, averaging every 5,000 (the model the service builds for
that request). `learn_many` calls and HTTP bodies of {result["body"]:,} rows; svmlight values
written with `repr`, non-zeros only ({result["body_bytes"] / 1e6:.1f} MB per body); the server
runs with default settings (durable feedback log, fsync per request batch) but bodies up to
64 MiB, and `OPENBLAS_NUM_THREADS=1` as every server benchmark starts it. Medians of
{result["repeats"]} interleaved rounds (each: both `learn_many`, both `predict_many`, the
parsing, one HTTP run of each kind); {env["cpus"]} CPUs ({env["cpu"]}), shared with other work: load
average (1 min) {min(loads):.1f}-{max(loads):.1f}. Commit {env["commit"]}. CPU: time of the
timing thread (HTTP: of the server process, all its threads); wall: elapsed.

| what | examples/s, CPU | examples/s, wall |
|---|---:|---:|
{table}

- `predict_many`, stacked / per-model: **{s["predict_speedup"]:.2f}x** CPU,
  {s["predict_speedup_wall"]:.2f}x wall (same rounds; identical predictions on
  {s["predict_agreement"]:.2%} of the rows).{before_line}
- library `learn_many` / HTTP bulk feedback (target: within 2x): **{s["library_over_http"]:.2f}x**
  in wall time (same rounds), **{s["library_over_http_cpu"]:.2f}x** in CPU time (the server's
  CPU over all its threads: what the load does not change); library
  `learn_many(progressive=True)` / HTTP: {s["progressive_over_http"]:.2f}x wall. With two
  requests in flight (a client that sends the next body before the answer to the last one,
  as the service benchmark's bulk scenario with its 2 clients; the server parses one body
  while it learns the other, and learns them in arrival order):
  **{s["library_over_http_2"]:.2f}x** wall, {s["library_over_http_2_cpu"]:.2f}x CPU.
- where `learn_many(progressive=True)` spends its CPU: the pairs learn one after the other
  (`core.stacking.learn_pair_by_pair`), each scoring every digit and learning its two
  classes'; their kernels take {s["kernels_us"]:.0f} of its {s["progressive_us"]:.0f} µs per
  example: 45 scores and at most 9 steps of {s["nnz_per_row"]:.0f} non-zeros x 32 columns, at
  most {s["kernels_gflops"]:.0f} GFLOP/s of multiply-adds; the rest is the CSR form of the
  dense rows, the calibrators and the averaging steps.
- parsing the bodies (`parse_svmlight` + `as_batch`, CPU, in this process) is
  **{s["parse_share_of_http"]:.0%}** of the HTTP wall time.

**Targets of issue 18.** `predict_many` >= 5x {baseline}: {_verdict(speedup >= 5)}
({speedup:.2f}x CPU). 5x would score each digit's
{s["nnz_per_row"]:.0f} non-zeros x 1,440 multiply-adds at
{s["useful_gflops_five_x"]:.0f} GFLOP/s, {s["useful_gflops_five_x"] / s["dgemm_gflops"]:.0%} of
the peak of one core here (a 2,000 x 2,000 float64 product on one BLAS thread:
{s["dgemm_gflops"]:.0f} GFLOP/s): the roofline that bounds it. The per-model kernels do that
useful work at {s["useful_gflops_per_model"]:.0f} GFLOP/s, the stacked product at
{s["useful_gflops_stacked"]:.0f}. The stacked product is dense:
{s["predict_flops_per_row"] / 1e6:.2f} MFLOP per digit (the pixels that any digit of a
{stacking.STACK_BLOCK_ROWS}-row block uses, times 45 pairs x 32 columns, times 2) against
the {s["nnz_per_row"]:.0f} non-zeros x 1,440 multiply-adds of the per-model kernels, a
{excess:.1f}x excess of flops, and the whole `predict_many` runs at
{s["predict_gflops"]:.0f} GFLOP/s (one BLAS thread): the speed-up is bounded by BLAS's
advantage per flop over the sparse kernels divided by that excess. HTTP within 2x of
`learn_many`, one request at a time: {_verdict(s["library_over_http"] <= 2)} in wall time,
{_verdict(s["library_over_http_cpu"] <= 2)} in CPU time; two requests in flight:
{_verdict(s["library_over_http_2"] <= 2)} in wall time. Progressive validation scores all 45
pairs of every example where learning touches 9, so `learn_many(progressive=True)` costs
{s["library_learn_many"][0] / s["library_learn_many_progressive"][0]:.1f}x the default
`learn_many` (CPU), its pairs' kernels {s["kernels_us"]:.0f} µs of its
{s["progressive_us"]:.0f} µs per example; the HTTP path learns at
{s["progressive_over_http"]:.2f}x the library's progressive `learn_many` (wall), the rest being
the parsing (the share above), the log record and its fsync. The limit is the progressive
scoring: the per-pair kernels run at {s["kernels_gflops"]:.0f} GFLOP/s, and block products
(dense, {s["predict_gflops"]:.0f} GFLOP/s in `predict_many` but over {excess:.1f}x the flops,
plus the Gram corrections) learn at
{s["library_learn_many_progressive_blocks"][0]:,.0f} examples/s (CPU) against
{s["library_learn_many_progressive"][0]:,.0f} pair by pair.
"""


def _verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--body", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write docs/")
    parser.add_argument(
        "--before", metavar="CHECKOUT", help="also time predict_many of this earlier checkout"
    )
    args = parser.parse_args(argv)
    X, y = stream(args.rows)
    measured = measure(X, y, args.body, args.repeats, args.before)
    result = {
        "before_commit": args.before
        and subprocess.run(
            ["git", "-C", args.before, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip(),
        "environment": environment("threadpoolctl"),
        "command": " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)]),
        "repeats": args.repeats,
        "body": args.body,
        "body_bytes": measured["body_bytes"],
        "samples": {k: v.as_json() for k, v in measured.items() if isinstance(v, Samples)},
        "library_loads": measured["library_loads"],
        "http_loads": measured["http_loads"],
        "summary": summary(measured, args.rows),
    }
    text = render(result)
    print(text)
    if not args.no_write:
        (DOCS / "dense_multiclass.json").write_text(json.dumps(result, indent=1) + "\n")
        replace_section(DOCS / "benchmarks.md", BEGIN, END, text)


if __name__ == "__main__":
    main()
