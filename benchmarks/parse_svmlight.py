"""Throughput of the svmlight parser (``core.datasets.parse_svmlight``) on two bodies:

- ``mnist``: the 10,000 MNIST test digits (``../shared/data/mnist``), 784 grey levels scaled
  to [0, 1], every index written (``label 1:0.0 2:0.0 ... 784:0.32549019607843133``) with
  Python's ``repr`` of each value: what a plain client writes for dense rows;
- ``bulk``: the sparse rows of the service's bulk scenario (:mod:`deploy.loadtest.loadgen`:
  20,000 rows of 30 non-zeros over 2^18 features, values rounded to 4 decimals).

Each is parsed, in the same run with interleaved rounds, by ``parse_svmlight`` (Clinger,
then Eisel-Lemire), by ``parse_svmlight(decimal="python")`` (the behaviour before: Python's
``float`` for every number outside Clinger's fast path) and by scikit-learn's
``load_svmlight_file`` when it is installed. Figures are medians over ``--repeats`` rounds
of the CPU time of the timing thread (wall time beside), with the 1-minute load average;
every parser's arrays are checked bit-identical to the default one's first.

    python -m benchmarks.parse_svmlight                      # print the table
    python -m benchmarks.parse_svmlight --md docs/benchmarks.md --json docs/parse_svmlight.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from benchmarks.environment import describe, environment
from benchmarks.markdown import replace_section
from benchmarks.timing import interleaved, timed
from core.datasets import load_mnist_test, parse_svmlight
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.workload import Workload

BEGIN = "<!-- parse_svmlight:begin -->"
END = "<!-- parse_svmlight:end -->"
COMMAND = (
    "python -m benchmarks.parse_svmlight --md docs/benchmarks.md --json docs/parse_svmlight.json"
)


def mnist_body(rows: int | None = None) -> tuple[bytes, int]:
    """The MNIST test digits (the first ``rows``, default all) as dense svmlight rows
    written with ``repr``; (body, values)."""
    images, labels = load_mnist_test()
    images, labels = images[:rows], labels[:rows]
    X = images.reshape(len(images), -1) / 255.0
    lines = []
    for label, row in zip(labels.tolist(), X.tolist(), strict=True):
        features = " ".join(f"{j}:{v!r}" for j, v in enumerate(row, start=1))
        lines.append(f"{label} {features}\n")
    return "".join(lines).encode(), X.size


def bulk_body(batch: int) -> tuple[bytes, int]:
    """One body of the service's bulk scenario (loadgen's workload, its default seed)."""
    config = LoadConfig(mode="bulk", batch=batch, bulk_bodies=1)
    body = Workload(config).bulk_bodies[0]
    return body, body.count(b":")


def parsers() -> dict:
    """name -> a function of a body returning (X, y)."""
    out = {
        "parse_svmlight (Eisel-Lemire)": lambda body: parse_svmlight(body),
        "parse_svmlight, decimal='python' (before)": lambda body: parse_svmlight(
            body, decimal="python"
        ),
    }
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        return out

    def sklearn(body):
        return load_svmlight_file(io.BytesIO(body), dtype=np.float64)

    out["sklearn load_svmlight_file"] = sklearn
    return out


def same_arrays(a, b) -> bool:
    """Same labels and matrix, bit for bit, once explicit zeros (which scikit-learn keeps)
    are dropped."""
    (Xa, ya), (Xb, yb) = a, b
    Xa, Xb = Xa.tocsr(copy=True), Xb.tocsr(copy=True)
    for X in (Xa, Xb):
        X.sum_duplicates()
        X.eliminate_zeros()
    return (
        np.array_equal(ya.view(np.int64), np.asarray(yb, dtype=np.float64).view(np.int64))
        and np.array_equal(Xa.indptr, Xb.indptr)
        and np.array_equal(Xa.indices, Xb.indices)
        and np.array_equal(Xa.data.view(np.int64), Xb.data.view(np.int64))
    )


def measure(repeats: int, batch: int, mnist_rows: int | None = None) -> dict:
    bodies = {"mnist": mnist_body(mnist_rows), "bulk": bulk_body(batch)}
    functions = parsers()
    results: dict = {}
    for name, (body, n_values) in bodies.items():
        reference = functions["parse_svmlight (Eisel-Lemire)"](body)
        n_rows = reference[0].shape[0]
        samples: dict[str, dict] = {}
        tasks = []
        for parser, function in functions.items():
            identical = same_arrays(function(body), reference)  # also the warm-up
            record = {"cpu": [], "wall": [], "identical": identical}
            samples[parser] = record

            def task(function=function, record=record, body=body):
                timing = timed(lambda: function(body))
                record["cpu"].append(timing.cpu)
                record["wall"].append(timing.wall)

            tasks.append(task)
        load_before = os.getloadavg()[0]
        interleaved(repeats, tasks)
        load_after = os.getloadavg()[0]
        rows = {}
        for parser, record in samples.items():
            cpu = statistics.median(record["cpu"])
            wall = statistics.median(record["wall"])
            rows[parser] = {
                "seconds_cpu": record["cpu"],
                "seconds_wall": record["wall"],
                "median_cpu_s": cpu,
                "median_wall_s": wall,
                "values_per_s": n_values / cpu,
                "rows_per_s": n_rows / cpu,
                "mb_per_s": len(body) / cpu / 1e6,
                "identical": record["identical"],
            }
        results[name] = {
            "bytes": len(body),
            "rows": n_rows,
            "values": n_values,
            "loadavg": [round(load_before, 2), round(load_after, 2)],
            "parsers": rows,
        }
    return results


def markdown(result: dict) -> str:
    """The section of ``docs/benchmarks.md``: the bodies, then one row per body and parser."""
    lines = [
        "## svmlight parsing",
        "",
        f"`{COMMAND}` ({result['repeats']} interleaved rounds; medians of the CPU time of the "
        f"timing thread). {describe(result['environment'])}, commit "
        f"{result['environment']['commit']}.",
        "",
        "- `mnist`: the 10,000 MNIST test digits, 784 values scaled to [0, 1], every index "
        "written with Python's `repr` of the value (`0.0` or up to 17 significant digits).",
        "- `bulk`: one body of the service's bulk scenario: rows of 30 non-zeros over 2^18 "
        "features, values rounded to 4 decimals.",
        "- `decimal='python'` is the conversion before Eisel-Lemire (Python's `float` for "
        "every number outside Clinger's fast path, i.e. every 17-digit `repr`) inside "
        "today's parse; scikit-learn's `load_svmlight_file` keeps explicit zeros, which the "
        "check of bit-identity drops first.",
        "",
        "| body | parser | values/s | rows/s | MB/s | wall ms | vs before | "
        "bit-identical | load avg (before, after) |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, body in result["bodies"].items():
        parsers_ = body["parsers"]
        before = parsers_["parse_svmlight, decimal='python' (before)"]["median_cpu_s"]
        for parser, row in parsers_.items():
            lines.append(
                f"| {name} ({body['rows']:,} rows, {body['values']:,} values, "
                f"{body['bytes'] / 1e6:.1f} MB) | {parser} | {row['values_per_s'] / 1e6:.1f} M | "
                f"{row['rows_per_s']:,.0f} | {row['mb_per_s']:.0f} | "
                f"{1e3 * row['median_wall_s']:.0f} | {before / row['median_cpu_s']:.2f}x | "
                f"{'yes' if row['identical'] else 'NO'} | "
                f"{body['loadavg'][0]}, {body['loadavg'][1]} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=20_000, help="rows of the bulk body")
    parser.add_argument("--md", type=Path, help="replace this script's section of the file")
    parser.add_argument("--json", type=Path, help="write every sample to this JSON file")
    args = parser.parse_args(argv)
    result = {
        "environment": environment("scikit-learn"),
        "repeats": args.repeats,
        "bodies": measure(args.repeats, args.batch),
    }
    section = markdown(result)
    print(section)
    if args.md:
        replace_section(args.md, BEGIN, END, section)
        print(f"wrote the parse_svmlight section of {args.md}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
