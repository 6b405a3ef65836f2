"""Sparse DoS over 2^20 features: float64 against float32 parameters, with the memory roofline.

``python -m benchmarks.sparse_dos`` times DoS rank 16 (PA-I, C = 1, seed 0: the learner of
:mod:`benchmarks.speed_pa`) on speed_pa's ``sparse150`` stream (20,000 rows of about 150
non-zeros out of 2^20 features, heavy-tailed feature ids), with ``dtype="float64"`` and
``dtype="float32"``, and takes the time apart:

- ``learn_many`` and ``score_many``, whole calls (CSR validation included);
- the batch learning kernel alone, as shipped (rows of the next example prefetched), without
  prefetching, and with the parameters at numpy's 16-byte alignment instead of 128;
- the kernel on the same rows with feature ids folded into 2^12 (the parameters stay in
  cache: the arithmetic alone);
- memory alone: a kernel that reads and writes every entry of the same rows and does no
  arithmetic (prefetched as the learning kernel is), and the same over uniformly random rows.

The roofline: bytes touched per example = the cache lines of its rows (counted from the
parameters' addresses) x 64; the machine's random-access bandwidth is measured by the
memory-only kernel over uniformly random rows of an array of the same size (lines read and
written back per second; a read-only gather is reported beside it). Bytes / bandwidth is the
time an example cannot go below while its rows come from memory.

Each figure is the median over ``--repeats`` interleaved rounds of the CPU time of the timing
thread per example (:mod:`benchmarks.timing`; wall time is kept too), and ratios are taken
between medians of the same run. The load average is recorded before and after every round.

Usage::

    python -m benchmarks.sparse_dos                  # 5 rounds; rewrites its docs section
    python -m benchmarks.sparse_dos --quick --out -  # 2^16 features, 2 rounds, print only

``--out FILE`` rewrites only the section between ``<!-- sparse_dos:begin -->`` and
``<!-- sparse_dos:end -->`` and writes the raw numbers to ``sparse_dos.json`` beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from benchmarks.environment import ROOT, environment
from benchmarks.markdown import replace_section
from benchmarks.streams import Stream, sparse_stream
from benchmarks.timing import Samples, timed
from core.dos import DoSClassifier, aligned_empty
from core.features import CSRBatch, as_batch
from core.kernels.dos import (
    PREFETCH_AHEAD,
    _dos_learn_rows,
    _dos_prefetch_rows,
    prefetch_distance,
)

BEGIN = "<!-- sparse_dos:begin -->"
END = "<!-- sparse_dos:end -->"
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
COMMAND = "python -m benchmarks.sparse_dos"
RANK = 16
DTYPES = ("float64", "float32")
TARGET_US = 8.0
FOLDED_FEATURES = 1 << 12
LINE = 64


@numba.njit(cache=True, nogil=True)
def _touch_rows(W, indptr, indices, ahead):
    """Memory alone: read, then write, one entry in each cache line of each example's rows
    (the learning kernel's access pattern, prefetched ``ahead`` examples on, without its
    arithmetic). Returns the sum read, so that nothing is optimised away."""
    n_rows = indptr.shape[0] - 1
    width = W.shape[1]
    per_line = max(LINE // W.itemsize, 1)
    total = 0.0
    for i in range(min(ahead, n_rows)):
        _dos_prefetch_rows(W, indices[indptr[i] : indptr[i + 1]])
    for i in range(n_rows):
        if ahead > 0 and i + ahead < n_rows:
            _dos_prefetch_rows(W, indices[indptr[i + ahead] : indptr[i + ahead + 1]])
        for k in range(indptr[i], indptr[i + 1]):
            for r in range(0, width, per_line):
                total += W[indices[k], r]
        for k in range(indptr[i], indptr[i + 1]):
            for r in range(0, width, per_line):
                W[indices[k], r] += 1.0
    return total


@numba.njit(cache=True, nogil=True)
def _gather_rows(W, indptr, indices):
    """A read-only gather: one entry in each cache line of each row (independent loads, no
    prefetching)."""
    per_line = max(LINE // W.itemsize, 1)
    total = 0.0
    for k in range(indices.shape[0]):
        j = indices[k]
        for r in range(0, W.shape[1], per_line):
            total += W[j, r]
    return total


def lines_per_example(address: int, W: np.ndarray, batch: CSRBatch) -> float:
    """Mean number of cache lines spanned by an example's rows (bias row excluded: it stays
    in cache), for parameters shaped as W whose first entry sits at ``address``."""
    row_bytes = W.shape[1] * W.itemsize
    first = address + batch.indices * W.strides[0]
    spans = (first + row_bytes - 1) // LINE - first // LINE + 1
    return float(np.sum(spans)) / batch.n_rows


def offset_copy(W: np.ndarray, offset: int) -> np.ndarray:
    """A copy of W whose first entry sits ``offset`` bytes past a 128-byte boundary."""
    buffer = aligned_empty((W.nbytes + 128,), np.uint8)
    out = buffer[offset : offset + W.nbytes].view(W.dtype).reshape(W.shape)
    out[...] = W
    return out


def folded(stream: Stream) -> Stream:
    """The same rows with feature ids taken modulo ``FOLDED_FEATURES`` (duplicates summed)."""
    csr = stream.csr.copy()
    csr.indices %= FOLDED_FEATURES
    csr.sum_duplicates()
    csr.sort_indices()
    return Stream(f"{stream.name}-folded", csr, stream.labels)


class Case:
    """One thing timed: ``prepare()`` (untimed) returns the job timed over ``count`` examples."""

    def __init__(self, dtype: str, name: str, prepare: Callable[[], Callable[[], object]], count):
        self.dtype, self.name, self.prepare, self.count = dtype, name, prepare, count
        self.samples = Samples()

    def run(self) -> None:
        job = self.prepare()
        self.samples.add(timed(job), self.count)


def kernel_case(dtype, name, W0, batch, labels, ahead, offset=None) -> Case:
    """The batch learning kernel on a fresh copy of W0 (copied before timing)."""
    W = offset_copy(W0, offset) if offset is not None else aligned_empty(W0.shape, W0.dtype)
    scores, nus = np.zeros(batch.n_rows), np.zeros(batch.n_rows)

    def prepare():
        W[...] = W0
        return lambda: _dos_learn_rows(
            W, batch.indptr, batch.indices, batch.values, labels, 1, 1.0, 0, scores, nus, ahead
        )

    return Case(dtype, name, prepare, batch.n_rows)


def cases_for(dtype: str, stream: Stream, small: Stream, uniform: CSRBatch) -> tuple[list, dict]:
    """Every case of one dtype, and the facts of its parameters (lines per example)."""
    model = DoSClassifier(n_features=stream.n_features, rank=RANK, mode="pa1", C=1.0, dtype=dtype)
    initial = model.get_state()
    W0 = np.ascontiguousarray(np.hstack([model.U_.T, model.V_.T]))
    batch = as_batch(stream.csr, stream.n_features)
    small_batch = as_batch(small.csr, stream.n_features)
    n = stream.n_rows

    def fresh_learn():
        model.set_state(initial)
        return lambda: model.learn_many(stream.csr, stream.labels)

    def score():
        return lambda: model.score_many(stream.csr)

    touch = aligned_empty(W0.shape, W0.dtype)
    touch[...] = W0

    def memory(rows: CSRBatch, ahead: int):
        return lambda: lambda: _touch_rows(touch, rows.indptr, rows.indices, ahead)

    cases = [
        Case(dtype, "learn_many (whole call)", fresh_learn, n),
        Case(dtype, "score_many (whole call)", score, n),
        kernel_case(
            dtype, "learning kernel alone", W0, batch, stream.labels, prefetch_distance(W0)
        ),
        kernel_case(dtype, "learning kernel, no prefetching", W0, batch, stream.labels, 0),
        kernel_case(
            dtype,
            "learning kernel, parameters 16-byte aligned",
            W0,
            batch,
            stream.labels,
            PREFETCH_AHEAD,
            offset=16,
        ),
        kernel_case(
            dtype,
            "learning kernel as before prefetching and alignment (neither)",
            W0,
            batch,
            stream.labels,
            0,
            offset=16,
        ),
        kernel_case(
            dtype,
            "learning kernel, ids folded into 2^12 (arithmetic alone)",
            W0,
            small_batch,
            small.labels,
            PREFETCH_AHEAD,
        ),
        Case(dtype, "memory alone: same rows, read + write, prefetched", memory(batch, 1), n),
        Case(dtype, "memory alone: same rows, read + write, no prefetching", memory(batch, 0), n),
        Case(dtype, "memory alone: uniform random rows, read + write", memory(uniform, 1), n),
        Case(
            dtype,
            "memory alone: uniform random rows, read only",
            lambda: lambda: _gather_rows(touch, uniform.indptr, uniform.indices),
            n,
        ),
    ]
    facts = {
        "lines_per_example": lines_per_example(model.U_.ctypes.data, W0, batch),
        "uniform_lines_per_example": lines_per_example(touch.ctypes.data, W0, uniform),
        "row_bytes": W0.shape[1] * W0.itemsize,
        "parameter_megabytes": W0.nbytes / 2**20,
        "alignment": model.U_.ctypes.data % 128,
    }
    return cases, facts


def warm_up() -> None:
    """Compile every kernel timed, for both dtypes, outside the timings."""
    for dtype in DTYPES:
        model = DoSClassifier(n_features=8, rank=2, dtype=dtype)
        examples = [(np.array([1, 3]), np.array([0.5, -1.0]))] * 3
        rows = as_batch(examples, 8)
        model.learn_many(sp.csr_matrix(np.eye(3, 8)), [1, -1, 1])
        model.score_many(sp.csr_matrix(np.eye(3, 8)))
        W = np.zeros((9, 4), dtype=dtype)
        for ahead in (0, 1):
            scores, nus = np.zeros(3), np.zeros(3)
            args = (rows.indptr, rows.indices, rows.values, np.ones(3), 1, 1.0, 0, scores, nus)
            _dos_learn_rows(W, *args, ahead)
            _touch_rows(W, rows.indptr, rows.indices, ahead)
        _gather_rows(W, rows.indptr, rows.indices)


def huge_page_megabytes() -> float | None:
    """Anonymous memory of this process in transparent huge pages (Linux; None elsewhere):
    numpy asks for them (madvise) on allocations of 4 MB and more, which spares the random
    row accesses most TLB misses."""
    try:
        with open("/proc/self/smaps_rollup") as smaps:
            for line in smaps:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def transparent_huge_pages() -> str:
    """The kernel's THP mode, e.g. ``[madvise]``."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().split()
    except OSError:
        return "unknown"
    return next((m.strip("[]") for m in mode if m.startswith("[")), "unknown")


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(cases: list[Case], facts: dict, n_features: int) -> dict:
    """Medians per case and dtype, bandwidths, rooflines and the target (which is about 2^20
    features: a smaller run never meets it)."""
    table: dict = {dtype: {} for dtype in DTYPES}
    for case in cases:
        table[case.dtype][case.name] = {
            "median_us": case.samples.median_us,
            "median_wall_us": case.samples.median_wall_us,
            "cpu_us": [s * 1e6 for s in case.samples.cpu],
            "wall_us": [s * 1e6 for s in case.samples.wall],
        }
    summary: dict = {}
    for dtype in DTYPES:
        rows, f = table[dtype], facts[dtype]
        uniform_us = rows["memory alone: uniform random rows, read + write"]["median_us"]
        read_us = rows["memory alone: uniform random rows, read only"]["median_us"]
        bytes_example = f["lines_per_example"] * LINE
        uniform_bytes = f["uniform_lines_per_example"] * LINE
        bandwidth = uniform_bytes / (uniform_us * 1e-6) / 1e9  # GB/s of lines read + written
        read_bandwidth = uniform_bytes / (read_us * 1e-6) / 1e9
        learn = rows["learn_many (whole call)"]["median_us"]
        summary[dtype] = {
            "bytes_per_example": bytes_example,
            "random_rw_bandwidth_gb_s": bandwidth,
            "random_read_bandwidth_gb_s": read_bandwidth,
            "roofline_us": bytes_example / (bandwidth * 1e9) * 1e6,
            "learn_many_us": learn,
            "target_met": learn is not None and learn <= TARGET_US and n_features == 1 << 20,
        }
    ratios = {
        name: table["float64"][name]["median_us"] / table["float32"][name]["median_us"]
        for name in table["float64"]
    }
    return {"table": table, "summary": summary, "ratios_float64_over_float32": ratios}


def huge(megabytes: float | None) -> str:
    return "n/a" if megabytes is None else f"{megabytes:,.0f} MB"


def fmt(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us:.1f}" if us >= 10 else f"{us:.2f}"


def render(result: dict) -> str:
    meta, table, summary = result["meta"], result["table"], result["summary"]
    ratios = result["ratios_float64_over_float32"]
    loads = meta["load_averages"]
    out = [
        f"## Sparse DoS over {meta['features']} features: float64 and float32 parameters",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} at commit {meta['commit']}: "
        f"{meta['cpu']}, {meta['cpus']} CPUs shared with other work (1-minute load average "
        f"{min(loads):.2f} to {max(loads):.2f} over the rounds). Stream: {meta['stream']}. "
        f"DoS rank {RANK}, PA-I, C = 1; parameters {meta['parameter_megabytes']['float64']:.0f} MB "
        f"(float64) and {meta['parameter_megabytes']['float32']:.0f} MB (float32). "
        f"Microseconds of CPU time per example, median of {meta['repeats']} interleaved rounds "
        "(wall-clock medians beside them; runs of each are in `sparse_dos.json`); the ratio "
        "is float64's median over float32's in the same run. Transparent huge pages: "
        f"{meta['transparent_huge_pages']} (numpy asks for them on large allocations); "
        f"{huge(meta['huge_page_megabytes'])} of the process's memory was in huge pages at "
        "the end of the run.",
        "",
        "| part | float64 CPU µs | float32 CPU µs | float64 / float32 | float64 wall µs "
        "| float32 wall µs |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in table["float64"]:
        a, b = table["float64"][name], table["float32"][name]
        out.append(
            f"| {name} | {fmt(a['median_us'])} | {fmt(b['median_us'])} | {ratios[name]:.2f}x | "
            f"{fmt(a['median_wall_us'])} | {fmt(b['median_wall_us'])} |"
        )
    out += [
        "",
        "### Target and roofline",
        "",
        "| dtype | learn_many µs per example | target <= 8 µs | bytes per example | random "
        "read + write GB/s | roofline µs | read-only GB/s |",
        "| --- | ---: | :---: | ---: | ---: | ---: | ---: |",
    ]
    for dtype in DTYPES:
        s = summary[dtype]
        out.append(
            f"| {dtype} | {fmt(s['learn_many_us'])} | {'met' if s['target_met'] else 'missed'} "
            f"| {s['bytes_per_example']:,.0f} | {s['random_rw_bandwidth_gb_s']:.2f} | "
            f"{fmt(s['roofline_us'])} | {s['random_read_bandwidth_gb_s']:.2f} |"
        )
    out += [
        "",
        "Bytes per example: the 64-byte cache lines spanned by the example's rows (bias row "
        "excluded), counted from the parameters' addresses, times 64; each is read and then "
        "written back. Random read + write bandwidth: the memory-alone kernel over uniformly "
        "random rows of the same parameters (lines per second x 64, each line read once and "
        "written once). Roofline = bytes per example / that bandwidth: the time below which "
        "an example cannot go while its rows come from memory. Parts: the learning kernel is "
        "`core.kernels.dos._dos_learn_rows` called directly (the public batch kernel with the "
        'prefetch distance as an argument); "ids folded into 2^12" keeps the parameters in '
        'cache, so it is the arithmetic alone; "memory alone" reads and writes the same '
        "rows with no arithmetic.",
    ]
    out += ["", "Read from this run's medians (CPU time):", ""] + reading(table, summary)
    return "\n".join(out) + "\n"


def reading(table: dict, summary: dict) -> list[str]:
    """Where the time goes, in sentences computed from the medians."""
    lines = []
    for dtype in DTYPES:
        rows, s = table[dtype], summary[dtype]

        def us(name: str, rows=rows) -> float:
            return rows[name]["median_us"]

        kernel = us("learning kernel alone")
        before = us("learning kernel as before prefetching and alignment (neither)")
        arithmetic = us("learning kernel, ids folded into 2^12 (arithmetic alone)")
        memory = us("memory alone: same rows, read + write, prefetched")
        lines.append(
            f"- {dtype}: `learn_many` {fmt(s['learn_many_us'])} µs per example "
            f"({'meets' if s['target_met'] else 'does not meet'} the {TARGET_US:g} µs target "
            "over 2^20 features), of "
            f"which the kernel {fmt(kernel)} µs ({before / kernel:.2f}x faster than the same "
            f"kernel without prefetching and alignment, {fmt(before)} µs). Its parts alone: "
            f"arithmetic {fmt(arithmetic)} µs, memory {fmt(memory)} µs on the same rows "
            f"(roofline over uniform rows {fmt(s['roofline_us'])} µs); the kernel takes "
            f"{kernel / max(arithmetic, memory):.2f}x the larger of the two and "
            f"{kernel / (arithmetic + memory):.2f}x their sum."
        )
    return lines


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2^16 features, 2 rounds")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5)")
    parser.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="markdown file whose section to rewrite ('-': print only); the raw numbers go "
        "to sparse_dos.json beside it",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    n_features = 1 << (16 if args.quick else 20)
    n_rows = 2000 if args.quick else 20_000
    started = time.perf_counter()
    stream = sparse_stream("sparse150", n_rows, 150, n_features, seed=150)
    uniform = as_batch(
        sparse_stream("uniform", n_rows, 150, n_features, seed=1150, uniform=True).csr,
        n_features,
    )
    small = folded(stream)
    warm_up()
    cases: list[Case] = []
    facts: dict = {}
    for dtype in DTYPES:
        more, facts[dtype] = cases_for(dtype, stream, small, uniform)
        cases += more
    loads = []
    for repeat in range(repeats):
        loads.append(os.getloadavg()[0])
        for case in cases:
            case.run()
        loads.append(os.getloadavg()[0])
        print(f"round {repeat + 1}/{repeats} done (load {loads[-1]:.2f})", flush=True)
    arguments = sys.argv[1:] if argv is None else argv
    machine = environment()
    result = summarise(cases, facts, n_features)
    result["meta"] = {
        "command": " ".join([COMMAND, *arguments]),
        "date": datetime.date.today().isoformat(),
        "cpu": machine["cpu"],
        "cpus": machine["cpus"],
        "versions": machine["versions"],
        "commit": machine["commit"],
        "repeats": repeats,
        "load_averages": loads,
        "stream": stream.description,
        "features": f"2^{n_features.bit_length() - 1}",
        "parameter_megabytes": {d: facts[d]["parameter_megabytes"] for d in DTYPES},
        "facts": facts,
        "huge_page_megabytes": huge_page_megabytes(),
        "transparent_huge_pages": transparent_huge_pages(),
        "seconds": time.perf_counter() - started,
    }
    section = render(result)
    print(section)
    if args.out != "-":
        out = Path(args.out)
        replace_section(out, BEGIN, END, section)
        out.with_name("sparse_dos.json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out} and {out.with_name('sparse_dos.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
