"""Where the time of one call goes: the pieces of DoS rank 16's (and LinearPA's) ``learn_one``,
``predict_one`` and ``learn_many`` timed apart on one stream.

A piece is the whole call, its input validation, or a public kernel entry of
:mod:`core.kernels` called from Python with its arguments and scratch built before timing (so
a per-row kernel line is numba's dispatch plus the compiled work). Variants of the rows
separate the memory stalls from the arithmetic: the same rows with feature ids folded into
2^12 (the parameters stay in cache), and rows of the same size with uniform feature ids.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.speed_pa.learners import dos, linear_pa
from benchmarks.streams import Stream
from benchmarks.timing import Samples, interleaved, timed
from core import kernels
from core.dos import DoSClassifier, aligned_empty
from core.features import as_batch, as_row, sparse_row
from core.labels import check_binary_label
from core.validation import check_pa_params

RANK = 16
#: feature ids folded modulo this many features keep the parameters in cache
FOLDED_FEATURES = 1 << 12


def kernel_arguments(model) -> dict[str, Any]:
    """The storage arguments of the kernel entries, from a model's public state (see
    :mod:`core.kernels`): DoS ``W = [U_.T | V_.T]`` (a copy of the same layout, dtype and
    alignment), linear ``w_`` itself, ``mode`` and ``C`` as ``check_pa_params`` gives them."""
    mode, C = check_pa_params(model.mode, model.C)
    if isinstance(model, DoSClassifier):
        W = aligned_empty((model.n_features + 1, 2 * model.rank), model.U_.dtype)
        W[...] = np.hstack([model.U_.T, model.V_.T])
        return {"W": W, "mode": mode, "C": C, "t": 0, "t0": 0, "h": np.empty(W.shape[1])}
    return {"w": model.w_, "bias": 1.0 if model.fit_intercept else 0.0, "mode": mode, "C": C}


def kernel_job(kernel: Callable, model, calls: list[dict[str, Any]]) -> Callable[[], None]:
    """A loop calling ``kernel`` once per entry of ``calls`` (its per-call arguments by name);
    the other arguments come by parameter name from :func:`kernel_arguments`, or are result
    arrays of the batch's length. Argument tuples are built here, before timing, so the loop
    costs little more than the kernel calls."""
    n_rows = calls[0]["indptr"].shape[0] - 1 if "indptr" in calls[0] else 0
    sources = kernel_arguments(model) | {
        name: np.zeros(n_rows) for name in ("scores", "nus", "taus")
    }
    names = list(inspect.signature(kernel.py_func).parameters)
    fixed = {name: sources[name] for name in names if name not in calls[0]}
    arguments = [tuple(c[name] if name in c else fixed[name] for name in names) for c in calls]

    def job():
        for args in arguments:
            kernel(*args)

    return job


@dataclass
class Part:
    """One piece: ``prepare(model) -> job``; ``job()`` is timed and covers ``count`` examples.
    A part that learns gets a fresh model from ``make`` before every repeat; a read-only part
    (``fresh=False``) shares one model per ``make``; ``make=None``: no model."""

    model: str
    name: str
    prepare: Callable
    count: int
    make: Callable | None = None
    fresh: bool = True


def each_row(factory: Callable, data: Stream) -> tuple[Callable, int]:
    """``factory(model)(x, y)`` over every row of ``data``."""
    xs, ys = data.rows(), data.int_labels()

    def prepare(model):
        call = factory(model)

        def job():
            for x, y in zip(xs, ys, strict=True):
                call(x, y)

        return job

    return prepare, len(xs)


def row_calls(data: Stream, with_label: bool = True) -> list[dict[str, Any]]:
    """Per-row kernel arguments: ``indices``, ``values`` and the label ``y``."""
    return [
        {"indices": indices, "values": values} | ({"y": float(y)} if with_label else {})
        for (indices, values), y in zip(data.rows(), data.int_labels(), strict=True)
    ]


def batch_call(data: Stream) -> list[dict[str, Any]]:
    """The batch kernels' arguments for the whole stream (one call)."""
    batch = as_batch(data.csr, data.n_features)
    return [
        {"indptr": batch.indptr, "indices": batch.indices, "values": batch.values, "y": data.labels}
    ]


def kernel_rows(kernel: Callable, calls: list[dict[str, Any]]) -> tuple[Callable, int]:
    return (lambda m: kernel_job(kernel, m, calls)), len(calls)


def learn_many(data: Stream) -> tuple[Callable, int]:
    return (lambda m: lambda: m.learn_many(data.csr, data.labels)), data.n_rows


def folded(stream: Stream) -> Stream:
    """The same rows with feature ids taken modulo ``FOLDED_FEATURES``."""
    rows = [sparse_row(x[0] % FOLDED_FEATURES, x[1], FOLDED_FEATURES) for x in stream.rows()]
    return Stream.from_rows("folded", rows, stream.labels, FOLDED_FEATURES)


def dos_parts(stream: Stream, uniform: Stream | None) -> list[Part]:
    d, n, name = stream.n_features, stream.n_rows, f"DoS rank {RANK}"

    def new_dos():
        return dos(RANK)(d)

    def new_folded():
        return dos(RANK)(FOLDED_FEATURES)

    small = folded(stream)
    empty_row = {"indices": np.zeros(0, dtype=np.int64), "values": np.zeros(0), "y": 1.0}
    parts = [
        Part(name, "learn_one (whole call)", *each_row(lambda m: m.learn_one, stream), new_dos),
        Part(
            name,
            "check_binary_label(y)",
            *each_row(lambda m: lambda x, y: check_binary_label(y), stream),
        ),
        Part(
            name, "as_row(x) (validation)", *each_row(lambda m: lambda x, y: as_row(x, d), stream)
        ),
        Part(
            name,
            "dos_learn_one kernel (scratch allocated inside)",
            *kernel_rows(kernels.dos_learn_one, row_calls(stream)),
            new_dos,
        ),
        Part(
            name,
            "dos_step kernel alone",
            *kernel_rows(kernels.dos_step, row_calls(stream)),
            new_dos,
        ),
        Part(
            name,
            "dos_step on an empty row of a 1-feature model (call floor)",
            lambda m: kernel_job(kernels.dos_step, m, [empty_row] * n),
            n,
            lambda: dos(RANK)(1),
            False,
        ),
        Part(
            name,
            "predict_one (whole call)",
            *each_row(lambda m: lambda x, y: m.predict_one(x), stream),
            new_dos,
            False,
        ),
        Part(
            name,
            "dos_score kernel alone",
            *kernel_rows(kernels.dos_score, row_calls(stream, False)),
            new_dos,
            False,
        ),
        Part(name, "learn_many (whole call)", *learn_many(stream), new_dos),
        Part(name, "as_batch(csr) (validation)", lambda m: lambda: as_batch(stream.csr, d), n),
        Part(
            name,
            "dos_learn_batch kernel alone",
            lambda m: kernel_job(kernels.dos_learn_batch, m, batch_call(stream)),
            n,
            new_dos,
        ),
        Part(
            name,
            "dos_learn_batch kernel alone, ids folded into 2^12 (cache-resident)",
            lambda m: kernel_job(kernels.dos_learn_batch, m, batch_call(small)),
            n,
            new_folded,
        ),
        Part(
            name,
            "dos_step kernel alone, ids folded into 2^12 (cache-resident)",
            *kernel_rows(kernels.dos_step, row_calls(small)),
            new_folded,
        ),
    ]
    if uniform is not None:

        def new_uniform():
            return dos(RANK)(uniform.n_features)

        parts += [
            Part(
                name,
                "learn_one, uniform feature ids (whole call)",
                *each_row(lambda m: m.learn_one, uniform),
                new_uniform,
            ),
            Part(
                name,
                "dos_step kernel alone, uniform feature ids",
                *kernel_rows(kernels.dos_step, row_calls(uniform)),
                new_uniform,
            ),
            Part(
                name,
                "learn_many, uniform feature ids (whole call)",
                *learn_many(uniform),
                new_uniform,
            ),
        ]
    return parts


def linear_parts(stream: Stream) -> list[Part]:
    def new_linear():
        return linear_pa(stream.n_features)

    name = "LinearPA"
    return [
        Part(name, "learn_one (whole call)", *each_row(lambda m: m.learn_one, stream), new_linear),
        Part(
            name,
            "linear_step kernel alone",
            *kernel_rows(kernels.linear_step, row_calls(stream)),
            new_linear,
        ),
        Part(name, "learn_many (whole call)", *learn_many(stream), new_linear),
        Part(
            name,
            "linear_learn_batch kernel alone",
            lambda m: kernel_job(kernels.linear_learn_batch, m, batch_call(stream)),
            stream.n_rows,
            new_linear,
        ),
    ]


def breakdown(stream: Stream, uniform: Stream | None, repeats: int) -> list[dict]:
    """Median cost per example of every part; repeats are interleaved across parts, so load
    changes on the shared machine hit them alike. A part whose job fails is reported with its
    error and skipped from then on."""
    parts = dos_parts(stream, uniform) + linear_parts(stream)
    samples = [Samples() for _ in parts]
    shared: dict[Callable, Any] = {}

    def task(part: Part, record: Samples) -> Callable[[], None]:
        def run():
            if record.error is not None:
                return
            try:
                if part.make is None:
                    model = None
                elif part.fresh:
                    model = part.make()
                else:
                    if part.make not in shared:
                        shared[part.make] = part.make()
                    model = shared[part.make]
                record.add(timed(part.prepare(model)), part.count)
            except Exception as problem:
                record.error = f"{type(problem).__name__}: {problem}"

        return run

    interleaved(repeats, [task(p, s) for p, s in zip(parts, samples, strict=True)])
    return [
        {
            "model": part.model,
            "part": part.name,
            "median_us": record.median_us,
            "median_wall_us": record.median_wall_us,
            "error": record.error,
        }
        for part, record in zip(parts, samples, strict=True)
    ]
