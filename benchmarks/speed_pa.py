"""Passive-aggressive learners: per-example cost against River, scikit-learn and Vowpal Wabbit.

Streams (the same examples, in the same order, for every learner):

- ``mnist``: the 10,000 MNIST test digits as dense 784-d rows scaled to [0, 1], label +1 for
  digits 0-4 and -1 for 5-9;
- ``sparse30`` / ``sparse150``: synthetic rows with about 30 / 150 non-zeros out of 2^20
  features (2^16 with ``--quick``). Feature ids follow a heavy-tailed law
  ``P(rank r) ~ 1 / (r + 256)`` scattered by a random permutation (as hashing scatters
  them); values are N(0, 1 / nnz); the label is the sign of a hidden rank-2
  difference-of-squares rule ``|A x|^2 - |B x|^2``.

Ours (``core``): ``LinearPA`` and ``DoSClassifier`` with rank 1, 4, 16, all in PA-I mode with
C = 1. ``learn_one`` / ``predict_one`` get what a caller would hand them (a float64 array for a
dense row, an ``(indices, values)`` tuple of sorted unique int64 / float64 arrays for a sparse
row), Python call and validation included; ``learn_many`` gets the whole stream as a CSR matrix
(validation included, the loop runs in the kernel). Numba compilation is excluded (warm-up).

Peers, on the same examples, with their inputs built before timing: River ``PAClassifier``
(mode 1, C = 1) and ``FMClassifier`` (n_factors = our rank) on dicts; scikit-learn
``SGDClassifier(loss="hinge", learning_rate="pa1", eta0=1)`` and ``PassiveAggressiveClassifier``
with one-row ``partial_fit`` calls, and one ``partial_fit`` on the whole CSR as the batch
counterpart; Vowpal Wabbit (``vowpalwabbit.Workspace``), linear with the hinge loss and
``--lrq ffK`` (rank-K factorisation, logistic loss), learning from pre-formatted text lines.
Peers slower than a time budget per repeat are timed on a prefix of the stream (the table says
how many rows). A peer that is missing or fails is reported as "n/a" with the reason.

Each number is the median over ``--repeats`` runs of the per-example CPU time of the timing
thread (a fresh model per run, GC off while timing; wall time is kept in the JSON too): the
machine is shared, and time spent descheduled is not a cost of the learner. Repeats are
interleaved across learners, and ratios are taken between medians of the same run.

Usage::

    python -m benchmarks.speed_pa                  # full run; rewrites docs/benchmarks.md
    python -m benchmarks.speed_pa --quick --out -  # < 30 s, print only
    python -m benchmarks.speed_pa --peers none --streams sparse150

``--out FILE`` rewrites only the section between ``<!-- speed_pa:begin -->`` and
``<!-- speed_pa:end -->`` (the file is created if missing) and writes the raw numbers to
``speed_pa.json`` beside it.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import inspect
import json
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numba
import numpy as np
import scipy
import scipy.sparse as sp

from benchmarks.environment import cpu_name
from benchmarks.markdown import replace_section
from core.datasets import load_mnist_test
from core.dos import DoSClassifier
from core.features import as_batch, as_row, sparse_row
from core.kernels.dos import _dos_learn_batch, _dos_score, _dos_step
from core.kernels.linear import _linear_learn_batch, _linear_step
from core.labels import check_binary_label
from core.linear import LinearPA

ROOT = Path(__file__).resolve().parents[1]

BEGIN = "<!-- speed_pa:begin -->"
END = "<!-- speed_pa:end -->"
SECTION_TITLE = "Passive-aggressive learners: per-example cost"
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
RANKS = (1, 4, 16)
PEER_GROUPS = ("river", "sklearn", "vw")
OPS = ("learn_one", "predict_one", "batch")
#: C of PA-I for every learner (River's C, scikit-learn's C / eta0)
AGGRESSIVENESS = 1.0


# -- streams ------------------------------------------------------------------------------
@dataclass
class Stream:
    """Examples shared by every learner: a canonical CSR matrix (sorted unique indices) and
    labels in {-1, +1}; ``dense`` holds the rows of a dense stream."""

    name: str
    description: str
    csr: sp.csr_matrix
    labels: np.ndarray
    dense: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def n_rows(self) -> int:
        return self.csr.shape[0]

    @property
    def n_features(self) -> int:
        return self.csr.shape[1]

    @property
    def mean_nnz(self) -> float:
        return self.csr.nnz / self.n_rows

    def _memo(self, key: str, build: Callable[[], list]) -> list:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def _sparse_row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        start, stop = self.csr.indptr[i], self.csr.indptr[i + 1]
        return self.csr.indices[start:stop], self.csr.data[start:stop]

    def rows(self) -> list:
        """Our per-example inputs: float64 arrays (dense) or (int64, float64) tuples."""

        def build():
            if self.dense is not None:
                return [np.array(row, dtype=np.float64) for row in self.dense]
            return [
                (idx.astype(np.int64), val.astype(np.float64))
                for idx, val in map(self._sparse_row, range(self.n_rows))
            ]

        return self._memo("rows", build)

    def int_labels(self) -> list[int]:
        return self._memo("int_labels", lambda: [int(v) for v in self.labels])

    def dicts(self) -> list[dict]:
        """River's inputs: {feature index: value} over the non-zeros."""

        def build():
            out = []
            for i in range(self.n_rows):
                idx, val = self._sparse_row(i)
                out.append(dict(zip(idx.tolist(), val.tolist(), strict=True)))
            return out

        return self._memo("dicts", build)

    def vw_lines(self, labelled: bool) -> list[str]:
        """Vowpal Wabbit text lines over the non-zeros, namespace ``f``."""

        def build():
            out = []
            for i in range(self.n_rows):
                idx, val = self._sparse_row(i)
                features = " ".join(f"{j}:{v:.6g}" for j, v in zip(idx, val, strict=True))
                head = f"{int(self.labels[i])} " if labelled else ""
                out.append(f"{head}|f {features}")
            return out

        return self._memo(f"vw_lines_{labelled}", build)

    def sklearn_rows(self) -> list:
        """scikit-learn's one-row inputs: 1 x d arrays (dense) or 1 x d CSR matrices."""

        def build():
            if self.dense is not None:
                return [self.dense[i : i + 1] for i in range(self.n_rows)]
            return [self.csr[i] for i in range(self.n_rows)]

        return self._memo("sklearn_rows", build)

    def sklearn_labels(self) -> list[np.ndarray]:
        return self._memo(
            "sklearn_labels", lambda: [self.labels[i : i + 1] for i in range(self.n_rows)]
        )


def mnist_stream(n_rows: int) -> Stream:
    images, digits = load_mnist_test()
    dense = images[:n_rows].reshape(-1, 28 * 28).astype(np.float64) / 255.0
    labels = np.where(digits[:n_rows] < 5, 1.0, -1.0)
    return Stream(
        name="mnist",
        description=f"MNIST test digits, dense 784-d in [0, 1], label digit < 5 ({n_rows} rows)",
        csr=sp.csr_matrix(dense),
        labels=labels,
        dense=dense,
    )


def heavy_tailed_indices(
    rng: np.random.Generator, size: tuple[int, int], n_features: int, permutation: np.ndarray
) -> np.ndarray:
    """Feature ids with P(rank r) ~ 1 / (r + 256), r < n_features, scattered by a permutation."""
    offset = 256.0
    u = rng.random(size)
    ranks = np.floor(offset * ((n_features + offset) / offset) ** u - offset).astype(np.int64)
    return permutation[np.minimum(ranks, n_features - 1)]


def sparse_stream(
    name: str, n_rows: int, nnz: int, n_features: int, seed: int, uniform: bool = False
) -> Stream:
    """Synthetic sparse rows labelled by a hidden rank-2 difference of squares."""
    rng = np.random.default_rng(seed)
    if uniform:
        drawn = rng.integers(0, n_features, size=(n_rows, nnz))
    else:
        drawn = heavy_tailed_indices(rng, (n_rows, nnz), n_features, rng.permutation(n_features))
    drawn.sort(axis=1)
    keep = np.ones(drawn.shape, dtype=bool)
    keep[:, 1:] = drawn[:, 1:] != drawn[:, :-1]
    values = rng.standard_normal(drawn.shape) / np.sqrt(nnz)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    csr = sp.csr_matrix((values[keep], drawn[keep], indptr), shape=(n_rows, n_features))
    hidden_plus = rng.standard_normal((n_features, 2))
    hidden_minus = rng.standard_normal((n_features, 2))
    score = ((csr @ hidden_plus) ** 2).sum(axis=1) - ((csr @ hidden_minus) ** 2).sum(axis=1)
    labels = np.where(score >= 0.0, 1.0, -1.0)
    law = "uniform" if uniform else "heavy-tailed"
    return Stream(
        name=name,
        description=(
            f"synthetic sparse, ~{nnz} non-zeros of 2^{int(np.log2(n_features))} features, "
            f"{law} feature ids, hidden rank-2 DoS label ({n_rows} rows)"
        ),
        csr=csr,
        labels=labels,
    )


# -- learners -----------------------------------------------------------------------------
class Learner:
    """One model under test: builds its inputs once per stream, then runs timed loops."""

    family = "ours"
    #: what the batch column means for this learner (None: no batch API)
    batch_label: str | None = None
    #: True: time on the whole stream; False: a prefix sized by the time budget
    whole_stream = False

    def __init__(self, name: str, rank: int | None = None):
        self.name = name
        self.rank = rank

    def unavailable(self) -> str | None:
        """Why this learner cannot run here, or None."""
        return None

    def prepare(self, stream: Stream) -> None:
        self.stream = stream

    def new(self) -> Any:
        raise NotImplementedError

    def learn_one(self, model, n: int) -> None:
        raise NotImplementedError

    def predict_one(self, model, n: int) -> None:
        raise NotImplementedError

    def batch(self, model) -> None:
        raise NotImplementedError

    def close(self, model) -> None:
        pass

    def release(self) -> None:
        """Drop this stream's inputs."""
        for name in ("stream", "xs", "ys", "lines", "unlabelled"):
            self.__dict__.pop(name, None)


class Ours(Learner):
    batch_label = "learn_many (CSR)"
    whole_stream = True

    def __init__(self, name: str, factory: Callable[[int], Any], rank: int | None = None):
        super().__init__(name, rank)
        self.factory = factory

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = stream.rows()
        self.ys = stream.int_labels()

    def new(self):
        return self.factory(self.stream.n_features)

    def learn_one(self, model, n: int) -> None:
        learn = model.learn_one
        for x, y in zip(self.xs[:n], self.ys[:n], strict=True):
            learn(x, y)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict_one
        for x in self.xs[:n]:
            predict(x)

    def batch(self, model) -> None:
        model.learn_many(self.stream.csr, self.stream.labels)


def linear_pa(n_features: int) -> LinearPA:
    return LinearPA(n_features=n_features, mode="pa1", C=AGGRESSIVENESS)


def dos(rank: int) -> Callable[[int], DoSClassifier]:
    def factory(n_features: int) -> DoSClassifier:
        return DoSClassifier(n_features=n_features, rank=rank, mode="pa1", C=AGGRESSIVENESS, seed=0)

    return factory


class RiverLearner(Learner):
    family = "river"

    def __init__(self, name: str, make: Callable[[], Any], rank: int | None = None):
        super().__init__(name, rank)
        self.make = make

    def unavailable(self) -> str | None:
        return _import_problem("river")

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = stream.dicts()
        self.ys = [bool(v > 0) for v in stream.labels]

    def new(self):
        return self.make()

    def learn_one(self, model, n: int) -> None:
        learn = model.learn_one
        for x, y in zip(self.xs[:n], self.ys[:n], strict=True):
            learn(x, y)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict_one
        for x in self.xs[:n]:
            predict(x)


def river_pa():
    from river.linear_model import PAClassifier

    return PAClassifier(C=AGGRESSIVENESS, mode=1)


def river_fm(rank: int) -> Callable[[], Any]:
    def make():
        from river.facto import FMClassifier

        return FMClassifier(n_factors=rank, seed=0)

    return make


class SklearnLearner(Learner):
    family = "sklearn"
    batch_label = "partial_fit (whole CSR)"

    def __init__(self, name: str, make: Callable[[], Any]):
        super().__init__(name)
        self.make = make

    def unavailable(self) -> str | None:
        problem = _import_problem("sklearn")
        if problem:
            return problem
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.make()
        except Exception as error:  # a removed or renamed estimator
            return f"{type(error).__name__}: {error}"
        return None

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = stream.sklearn_rows()
        self.ys = stream.sklearn_labels()
        self.classes = np.array([-1.0, 1.0])

    def new(self):
        return self.make()

    def learn_one(self, model, n: int) -> None:
        xs, ys = self.xs[:n], self.ys[:n]
        model.partial_fit(xs[0], ys[0], classes=self.classes)
        learn = model.partial_fit
        for x, y in zip(xs[1:], ys[1:], strict=True):
            learn(x, y)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict
        for x in self.xs[:n]:
            predict(x)

    def batch(self, model) -> None:
        model.partial_fit(self.stream.csr, self.stream.labels, classes=self.classes)


def sklearn_sgd_pa1():
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(
        loss="hinge",
        penalty=None,
        learning_rate="pa1",
        eta0=AGGRESSIVENESS,
        shuffle=False,
        random_state=0,
    )


def sklearn_passive_aggressive():
    from sklearn.linear_model import PassiveAggressiveClassifier  # deprecated in 1.8

    return PassiveAggressiveClassifier(C=AGGRESSIVENESS, shuffle=False, random_state=0)


class VWLearner(Learner):
    family = "vw"

    def __init__(self, name: str, arguments: str, rank: int | None = None):
        super().__init__(name, rank)
        self.arguments = arguments

    def unavailable(self) -> str | None:
        problem = _import_problem("vowpalwabbit")
        if problem:
            return problem
        try:
            self.close(self._workspace(18))
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return None

    def _workspace(self, bits: int):
        import vowpalwabbit

        return vowpalwabbit.Workspace(f"--quiet -b {bits} {self.arguments}")

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.lines = stream.vw_lines(labelled=True)
        self.unlabelled = stream.vw_lines(labelled=False)

    def new(self):
        return self._workspace(max(18, int(np.ceil(np.log2(self.stream.n_features)))))

    def learn_one(self, model, n: int) -> None:
        learn = model.learn
        for line in self.lines[:n]:
            learn(line)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict
        for line in self.unlabelled[:n]:
            predict(line)

    def close(self, model) -> None:
        model.finish()


def _import_problem(module: str) -> str | None:
    try:
        __import__(module)
    except Exception as error:
        return f"cannot import {module}: {type(error).__name__}: {error}"
    return None


def build_learners(peers: set[str]) -> list[Learner]:
    learners: list[Learner] = [Ours("LinearPA", linear_pa)]
    learners += [Ours(f"DoS rank {k}", dos(k), rank=k) for k in RANKS]
    if "river" in peers:
        learners.append(RiverLearner("River PAClassifier", river_pa))
        learners += [RiverLearner(f"River FM rank {k}", river_fm(k), rank=k) for k in RANKS]
    if "sklearn" in peers:
        learners.append(SklearnLearner("sklearn SGD hinge pa1", sklearn_sgd_pa1))
        learners.append(SklearnLearner("sklearn PassiveAggressive", sklearn_passive_aggressive))
    if "vw" in peers:
        learners.append(VWLearner("VW hinge", "--loss_function hinge"))
        learners += [
            VWLearner(f"VW lrq rank {k}", f"--loss_function logistic --lrq ff{k}", rank=k)
            for k in RANKS
        ]
    return learners


# -- timing -------------------------------------------------------------------------------
def timed(run: Callable[[], None]) -> tuple[float, float]:
    """(CPU time of this thread, wall time) of ``run()`` in seconds, GC off.

    The tables quote CPU time: the machine is shared, and time spent descheduled while
    other work runs is not a cost of the learner. Wall time is kept in the raw numbers.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.thread_time()
        run()
        return time.thread_time() - cpu, time.perf_counter() - wall
    finally:
        if enabled:
            gc.enable()


@dataclass
class Measurement:
    stream: str
    learner: str
    family: str
    rank: int | None
    op: str
    rows: int = 0
    #: CPU seconds per example, one entry per repeat
    seconds_per_example: list[float] = field(default_factory=list)
    wall_seconds_per_example: list[float] = field(default_factory=list)
    error: str | None = None

    def add(self, seconds: tuple[float, float], count: int) -> None:
        self.seconds_per_example.append(seconds[0] / count)
        self.wall_seconds_per_example.append(seconds[1] / count)
        self.rows = count

    @property
    def median_us(self) -> float | None:
        if self.error or not self.seconds_per_example:
            return None
        return statistics.median(self.seconds_per_example) * 1e6

    @property
    def median_wall_us(self) -> float | None:
        if self.error or not self.wall_seconds_per_example:
            return None
        return statistics.median(self.wall_seconds_per_example) * 1e6

    def as_json(self) -> dict:
        median = self.median_us
        return {
            "stream": self.stream,
            "learner": self.learner,
            "family": self.family,
            "rank": self.rank,
            "op": self.op,
            "rows": self.rows,
            "cpu_seconds_per_example": self.seconds_per_example,
            "wall_seconds_per_example": self.wall_seconds_per_example,
            "median_us": median,
            "median_wall_us": self.median_wall_us,
            "examples_per_second": None if median is None else 1e6 / median,
            "error": self.error,
        }


def warm_up(streams: list[Stream]) -> None:
    """Compile every kernel our timed calls reach, for every input kind, on tiny models."""
    for stream in streams:
        xs, ys = stream.rows()[:3], stream.int_labels()[:3]
        for model in (linear_pa(stream.n_features), dos(2)(stream.n_features)):
            for x, y in zip(xs, ys, strict=True):
                model.learn_one(x, y)
                model.predict_one(x)
            model.learn_many(stream.csr[:3], stream.labels[:3])


def rows_for(learner: Learner, stream: Stream, budget: float, min_rows: int) -> int:
    """How many rows to time: the whole stream, or the prefix that fits the time budget."""
    n = stream.n_rows
    if learner.whole_stream:
        return n
    pilot = min(n, max(3, min_rows // 4))
    model = learner.new()
    try:
        seconds = timed(lambda: learner.learn_one(model, pilot))[1] / pilot
    finally:
        learner.close(model)
    if seconds * n <= budget:
        return n
    return min(n, max(min_rows, int(budget / seconds)))


def measure_stream(
    stream: Stream, learners: list[Learner], repeats: int, budget: float, min_rows: int
) -> list[Measurement]:
    """Time every learner on one stream; repeats are interleaved across learners."""
    results: dict[tuple[str, str], Measurement] = {}
    active: list[tuple[Learner, int]] = []
    for learner in learners:
        for op in OPS:
            results[learner.name, op] = Measurement(
                stream.name, learner.name, learner.family, learner.rank, op
            )
        problem = learner.unavailable()
        if problem is None:
            try:
                learner.prepare(stream)
                n = rows_for(learner, stream, budget, min_rows)
                active.append((learner, n))
            except Exception as error:
                problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            print(f"  {learner.name}: n/a ({problem})", flush=True)
            for op in OPS:
                results[learner.name, op].error = problem
    for repeat in range(repeats):
        gc.collect()  # once per repeat: the inputs make a full collection slow
        for learner, n in active:
            _measure_once(learner, n, stream, results)
        print(f"  repeat {repeat + 1}/{repeats} done", flush=True)
    for learner, _ in active:
        learner.release()
    measurements = list(results.values())
    for m in measurements:
        if m.error is None and not m.seconds_per_example:
            m.error = "not applicable"
    return measurements


def _measure_once(
    learner: Learner, n: int, stream: Stream, results: dict[tuple[str, str], Measurement]
) -> None:
    learn, predict, batch = (results[learner.name, op] for op in OPS)
    if learn.error is None:
        try:
            model = learner.new()
            try:
                learn.add(timed(lambda: learner.learn_one(model, n)), n)
                predict.add(timed(lambda: learner.predict_one(model, n)), n)
            finally:
                learner.close(model)
        except Exception as error:
            learn.error = predict.error = f"{type(error).__name__}: {error}"
            print(f"  {learner.name}: n/a ({learn.error})", flush=True)
    if learner.batch_label is not None and batch.error is None:
        try:
            model = learner.new()
            try:
                batch.add(timed(lambda: learner.batch(model)), stream.n_rows)
            finally:
                learner.close(model)
        except Exception as error:
            batch.error = f"{type(error).__name__}: {error}"
            print(f"  {learner.name} batch: n/a ({batch.error})", flush=True)


# -- where the time of one call goes ------------------------------------------------------
def kernel_job(kernel: Callable, model, calls: list[dict[str, Any]]) -> Callable[[], None]:
    """A loop calling ``kernel`` once per entry of ``calls`` (its per-call arguments by name).

    The other arguments are picked by parameter name from the model's private state, so the
    breakdown follows refactors of the storage (``W`` or ``WU`` / ``WV``); an unknown name
    raises ``KeyError`` and the part is reported n/a. Argument tuples are built here, before
    timing, so the loop costs little more than the kernel calls.
    """
    rank = getattr(model, "rank", 1)
    n_rows = calls[0]["indptr"].shape[0] - 1 if calls and "indptr" in calls[0] else 0
    sources = {
        "W": lambda: model._W,
        "WU": lambda: model._WU,
        "WV": lambda: model._WV,
        "w": lambda: model.w_,
        "bias": lambda: model._bias,
        "mode": lambda: model._mode,
        "C": lambda: model._C,
        "t": lambda: 0,
        "t0": lambda: 0,
        "h": lambda: np.empty(2 * rank),
        "hu": lambda: np.empty(rank),
        "hv": lambda: np.empty(rank),
        "scores": lambda: np.zeros(n_rows),
        "nus": lambda: np.zeros(n_rows),
        "taus": lambda: np.zeros(n_rows),
    }
    names = list(inspect.signature(kernel.py_func).parameters)
    fixed = {name: sources[name]() for name in names if name not in calls[0]}
    arguments = [tuple(c[name] if name in c else fixed[name] for name in names) for c in calls]

    def job():
        for args in arguments:
            kernel(*args)

    return job


def breakdown(stream: Stream, uniform: Stream | None, repeats: int) -> list[dict]:
    """Median cost per example of the pieces of learn_one / predict_one / learn_many.

    A part is ``prepare(model) -> job``; ``job()`` is timed and covers ``count`` examples.
    Parts that learn get a fresh model from ``make`` before every repeat; read-only parts
    (``fresh=False``) share one model per ``make``. Repeats are interleaved across parts, so
    load changes on the shared machine hit them alike.
    """
    rows, labels = stream.rows(), stream.int_labels()
    d, rank, n = stream.n_features, 16, stream.n_rows
    batch = as_batch(stream.csr, d)
    parts: list[tuple[str, str, Callable, int, Callable | None, bool]] = []

    def add(model: str, part: str, prepare: Callable, count: int, make=None, fresh=True):
        parts.append((model, part, prepare, count, make, fresh))

    def each_row(factory: Callable, data: Stream = stream) -> tuple[Callable, int]:
        """``factory(model)(x, y)`` over every row of ``data``."""
        xs, ys = data.rows(), data.int_labels()

        def prepare(m):
            call = factory(m)

            def job():
                for x, y in zip(xs, ys, strict=True):
                    call(x, y)

            return job

        return prepare, len(xs)

    def row_calls(data: Stream, with_label: bool = True) -> list[dict[str, Any]]:
        out = []
        for (indices, values), y in zip(data.rows(), data.int_labels(), strict=True):
            out.append(
                {"indices": indices, "values": values} | ({"y": float(y)} if with_label else {})
            )
        return out

    def kernel_rows(kernel: Callable, calls: list[dict[str, Any]]) -> tuple[Callable, int]:
        return (lambda m: kernel_job(kernel, m, calls)), len(calls)

    def learn_many(data: Stream) -> tuple[Callable, int]:
        return (lambda m: lambda: m.learn_many(data.csr, data.labels)), data.n_rows

    batch_call = [
        {
            "indptr": batch.indptr,
            "indices": batch.indices,
            "values": batch.values,
            "y": stream.labels,
        }
    ]
    empty_row = {"indices": np.zeros(0, dtype=np.int64), "values": np.zeros(0), "y": 1.0}
    steps = row_calls(stream)
    small = 1 << 12
    folded = Stream("folded", "", sp.csr_matrix((1, small)), stream.labels)
    folded._cache["rows"] = [sparse_row(x[0] % small, x[1], small) for x in rows]
    folded._cache["int_labels"] = labels

    def learn_row(m):
        return lambda x, y: m._learn_row(x[0], x[1], float(y))

    def new_dos():
        return dos(rank)(d)

    name = f"DoS rank {rank}"
    add(name, "learn_one (whole call)", *each_row(lambda m: m.learn_one), new_dos)
    add(name, "check_binary_label(y)", *each_row(lambda m: lambda x, y: check_binary_label(y)))
    add(name, "as_row(x) (validation)", *each_row(lambda m: lambda x, y: as_row(x, d)))
    add(name, "_learn_row (after validation: scratch, kernel, Step)", *each_row(learn_row), new_dos)
    add(name, "_dos_step kernel alone", *kernel_rows(_dos_step, steps), new_dos)
    add(
        name,
        "_dos_step on an empty row of a 1-feature model (call floor)",
        (lambda m: kernel_job(_dos_step, m, [empty_row] * n)),
        n,
        lambda: dos(rank)(1),
        False,
    )
    add(
        name,
        "predict_one (whole call)",
        *each_row(lambda m: lambda x, y: m.predict_one(x)),
        new_dos,
        False,
    )
    add(
        name,
        "_dos_score kernel alone",
        *kernel_rows(_dos_score, row_calls(stream, False)),
        new_dos,
        False,
    )
    add(name, "learn_many (whole call)", *learn_many(stream), new_dos)
    add(name, "as_batch(csr) (validation)", (lambda m: lambda: as_batch(stream.csr, d)), n)
    add(
        name,
        "_dos_learn_batch kernel alone",
        (lambda m: kernel_job(_dos_learn_batch, m, batch_call)),
        n,
        new_dos,
    )
    folded_batch = as_batch(folded.rows(), small)
    folded_call = [
        {
            "indptr": folded_batch.indptr,
            "indices": folded_batch.indices,
            "values": folded_batch.values,
            "y": stream.labels,
        }
    ]
    add(
        name,
        "_dos_learn_batch kernel alone, ids folded into 2^12 (cache-resident)",
        (lambda m: kernel_job(_dos_learn_batch, m, folded_call)),
        n,
        lambda: dos(rank)(small),
    )
    add(
        name,
        "_dos_step kernel alone, ids folded into 2^12 (cache-resident)",
        *kernel_rows(_dos_step, row_calls(folded)),
        lambda: dos(rank)(small),
    )
    if uniform is not None:

        def new_uniform():
            return dos(rank)(uniform.n_features)

        add(
            name,
            "learn_one, uniform feature ids (whole call)",
            *each_row(lambda m: m.learn_one, uniform),
            new_uniform,
        )
        add(
            name,
            "_dos_step kernel alone, uniform feature ids",
            *kernel_rows(_dos_step, row_calls(uniform)),
            new_uniform,
        )
        add(name, "learn_many, uniform feature ids (whole call)", *learn_many(uniform), new_uniform)

    def new_linear():
        return linear_pa(d)

    add("LinearPA", "learn_one (whole call)", *each_row(lambda m: m.learn_one), new_linear)
    add("LinearPA", "_learn_row (after validation)", *each_row(learn_row), new_linear)
    add("LinearPA", "_linear_step kernel alone", *kernel_rows(_linear_step, steps), new_linear)
    add("LinearPA", "learn_many (whole call)", *learn_many(stream), new_linear)
    add(
        "LinearPA",
        "_linear_learn_batch kernel alone",
        (lambda m: kernel_job(_linear_learn_batch, m, batch_call)),
        n,
        new_linear,
    )

    measurements = [
        Measurement(stream.name, model, "ours", None, part) for model, part, *_ in parts
    ]
    shared: dict[Callable, Any] = {}
    for _ in range(repeats):
        gc.collect()
        for (_, _, prepare, count, make, fresh), samples in zip(parts, measurements, strict=True):
            if samples.error is not None:
                continue
            try:
                if make is None:
                    model = None
                elif fresh:
                    model = make()
                else:
                    if make not in shared:
                        shared[make] = make()
                    model = shared[make]
                samples.add(timed(prepare(model)), count)
            except Exception as problem:  # the model's internals moved: say so and go on
                samples.error = f"{type(problem).__name__}: {problem}"
            model = None
    return [
        {
            "model": m.learner,
            "part": m.op,
            "median_us": m.median_us,
            "median_wall_us": m.median_wall_us,
            "error": m.error,
        }
        for m in measurements
    ]


# -- report -------------------------------------------------------------------------------
def versions(peers: set[str]) -> dict[str, str]:
    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
    }
    for package, group in (("river", "river"), ("scikit-learn", "sklearn"), ("vowpalwabbit", "vw")):
        if group in peers:
            try:
                out[package] = metadata.version(package)
            except metadata.PackageNotFoundError:
                out[package] = "not installed"
    return out


def fmt_us(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def fmt_rate(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{1e6 / us:,.0f}"


def fmt_ratio(ratio: float) -> str:
    if ratio >= 1:
        return f"{ratio:,.1f}x faster" if ratio < 100 else f"{ratio:,.0f}x faster"
    return f"{1 / ratio:,.1f}x slower"


def lookup(results: list[Measurement]) -> dict[tuple[str, str, str], Measurement]:
    return {(m.stream, m.learner, m.op): m for m in results}


def ratio_lines(results: list[Measurement], streams: list[Stream]) -> list[dict]:
    """Ours vs the closest peer, each line a ratio of medians from the same run."""
    table = lookup(results)
    pairs = [
        ("LinearPA", "learn_one", "River PAClassifier", "learn_one"),
        ("LinearPA", "learn_one", "sklearn SGD hinge pa1", "learn_one"),
        ("LinearPA", "learn_one", "VW hinge", "learn_one"),
        ("LinearPA", "batch", "sklearn SGD hinge pa1", "batch"),
    ]
    for k in RANKS:
        pairs += [
            (f"DoS rank {k}", "learn_one", f"River FM rank {k}", "learn_one"),
            (f"DoS rank {k}", "batch", f"River FM rank {k}", "learn_one"),
            (f"DoS rank {k}", "learn_one", f"VW lrq rank {k}", "learn_one"),
            (f"DoS rank {k}", "predict_one", f"River FM rank {k}", "predict_one"),
        ]
    lines = []
    for stream in streams:
        for ours, our_op, peer, peer_op in pairs:
            mine = table.get((stream.name, ours, our_op))
            theirs = table.get((stream.name, peer, peer_op))
            if mine is None or theirs is None:
                continue
            ratio = None
            if mine.median_us is not None and theirs.median_us is not None:
                ratio = theirs.median_us / mine.median_us
            lines.append(
                {
                    "stream": stream.name,
                    "ours": f"{ours} {op_name(our_op, ours)}",
                    "peer": f"{peer} {op_name(peer_op, peer)}",
                    "ratio": ratio,
                    "peer_error": theirs.error,
                }
            )
    return lines


def op_name(op: str, learner: str) -> str:
    if op == "batch":
        return "learn_many" if not learner.startswith("sklearn") else "batch partial_fit"
    return op


def target_checks(results: list[Measurement], breakdown_rows: list[dict]) -> list[dict]:
    """The issue's targets on ``sparse150`` (DoS rank 16: learn_many <= 3 us per example,
    learn_one <= 10 us per call, >= 10x River FM rank 16's examples per second), checked on
    CPU time and on wall time; the uniform-id variant of the breakdown is checked too."""
    table = lookup(results)
    parts = {r["part"]: r for r in breakdown_rows if r["model"] == "DoS rank 16"}

    def medians(learner: str, op: str) -> tuple[float | None, float | None]:
        m = table.get(("sparse150", learner, op))
        return (None, None) if m is None else (m.median_us, m.median_wall_us)

    many, one = medians("DoS rank 16", "batch"), medians("DoS rank 16", "learn_one")
    fm = medians("River FM rank 16", "learn_one")
    uniform_many = parts.get("learn_many, uniform feature ids (whole call)", {})
    uniform_one = parts.get("learn_one, uniform feature ids (whole call)", {})
    limits = [
        ("DoS rank 16, ~150 nnz: learn_many <= 3 us per example", many, 3.0),
        ("DoS rank 16, ~150 nnz: learn_one <= 10 us per call", one, 10.0),
        (
            "same rows with uniform feature ids: learn_many <= 3 us",
            (uniform_many.get("median_us"), uniform_many.get("median_wall_us")),
            3.0,
        ),
        (
            "same rows with uniform feature ids: learn_one <= 10 us",
            (uniform_one.get("median_us"), uniform_one.get("median_wall_us")),
            10.0,
        ),
    ]
    checks = []
    for target, (cpu, wall), limit in limits:
        if cpu is not None:
            checks.append(
                {
                    "target": target,
                    "cpu": f"{fmt_us(cpu)} us",
                    "wall": f"{fmt_us(wall)} us",
                    "met": cpu <= limit,
                    "met_wall": wall is not None and wall <= limit,
                }
            )
    for label, ours in (("learn_one", one), ("learn_many", many)):
        if ours[0] is not None and fm[0] is not None:
            cpu, wall = fm[0] / ours[0], fm[1] / ours[1]
            checks.append(
                {
                    "target": f"DoS rank 16 {label} >= 10x River FM rank 16 examples/s",
                    "cpu": f"{cpu:,.0f}x",
                    "wall": f"{wall:,.0f}x",
                    "met": cpu >= 10.0,
                    "met_wall": wall >= 10.0,
                }
            )
    return checks


def breakdown_summary(rows: list[dict]) -> list[str]:
    """The breakdown read as sums: where DoS rank 16's learn_one / learn_many time goes."""
    us = {r["part"]: r["median_us"] for r in rows if r["model"] == "DoS rank 16"}

    def get(part: str) -> float:
        value = us.get(part)
        if value is None:
            raise KeyError(part)
        return value

    try:
        whole, kernel = get("learn_one (whole call)"), get("_dos_step kernel alone")
        inner, validation = (
            get("_learn_row (after validation: scratch, kernel, Step)"),
            get("as_row(x) (validation)"),
        )
        label, floor = (
            get("check_binary_label(y)"),
            get("_dos_step on an empty row of a 1-feature model (call floor)"),
        )
        folded = get("_dos_step kernel alone, ids folded into 2^12 (cache-resident)")
        many, batch_kernel = get("learn_many (whole call)"), get("_dos_learn_batch kernel alone")
        batch_validation = get("as_batch(csr) (validation)")
        folded_batch = get("_dos_learn_batch kernel alone, ids folded into 2^12 (cache-resident)")
    except KeyError:
        return []
    rest = whole - inner - validation - label
    return [
        f"- DoS rank 16 `learn_one` = {fmt_us(whole)} µs: the `_dos_step` call "
        f"{fmt_us(kernel)} µs (of which about {fmt_us(floor)} µs is the call floor) and "
        f"{fmt_us(whole - kernel)} µs of Python around it: `as_row` validation "
        f"{fmt_us(validation)} µs, label check {fmt_us(label)} µs, scratch allocation and the "
        f"`Step` result {fmt_us(max(inner - kernel, 0.0))} µs, method calls and the rest "
        f"{fmt_us(max(rest, 0.0))} µs.",
        f"- The same kernel with the parameters in cache takes {fmt_us(folded)} µs: about "
        f"{fmt_us(kernel - folded)} µs per example are memory stalls on the rows of "
        "(n_features + 1) x 2 rank float64 parameters.",
        f"- DoS rank 16 `learn_many` = {fmt_us(many)} µs per example: kernel "
        f"{fmt_us(batch_kernel)} µs, CSR validation {fmt_us(batch_validation)} µs; with the "
        f"parameters in cache the batch kernel takes {fmt_us(folded_batch)} µs per example.",
    ]


def render(
    results: list[Measurement],
    streams: list[Stream],
    learners: list[Learner],
    breakdown_rows: list[dict],
    meta: dict,
) -> str:
    table = lookup(results)
    out = [f"## {SECTION_TITLE}", ""]
    out.append(
        f"Generated by `{meta['command']}` on {meta['date']}: {meta['cpu']}, "
        f"{meta['cpus']} CPUs (shared with other work, so expect noise). Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + "."
    )
    out.append("")
    out.append(
        f"Microseconds of CPU time per example, median of {meta['repeats']} runs (a fresh model "
        "each run, GC off while timing; CPU time of the timing thread because the machine is "
        "shared, wall-clock medians are in `speed_pa.json`); examples/s = 1e6 / median. "
        "One-at-a-time calls include the "
        "Python call and input validation; ours get float64 arrays (dense) or sorted "
        "(int64, float64) tuples (sparse), River dicts of the non-zeros, scikit-learn 1-row "
        "arrays / CSR matrices, VW text lines of the non-zeros, all built before timing. The "
        "batch column is our `learn_many` on the whole CSR matrix (the loop runs in the "
        "kernel) and scikit-learn's `partial_fit` on the same matrix. Numba compilation is "
        "excluded. All linear learners are PA-I with C = 1; River FM and VW `--lrq` are "
        "SGD-trained factorisation machines of the same rank as DoS. Peers slower than "
        f"{meta['budget_seconds']:g} s per run are timed on the first rows of the stream "
        '(column "rows"). n/a: the peer failed or is missing (reason below); '
        "—: no such API."
    )
    out.append("")
    out.append("| stream | rows | features | mean non-zeros | description |")
    out.append("| --- | ---: | ---: | ---: | --- |")
    for s in streams:
        out.append(
            f"| {s.name} | {s.n_rows:,} | {s.n_features:,} | {s.mean_nnz:.1f} | {s.description} |"
        )
    notes: dict[str, str] = {}
    for s in streams:
        out += ["", f"### {s.name}", ""]
        out.append(
            "| learner | learn_one µs | learn_one ex/s | predict_one µs | batch µs | batch ex/s "
            "| rows |"
        )
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for learner in learners:
            learn, predict, batch = (table[s.name, learner.name, op] for op in OPS)
            for m in (learn, predict, batch):
                if m.error and m.error != "not applicable":
                    notes[learner.name] = m.error
            batch_us = "—" if learner.batch_label is None else fmt_us(batch.median_us)
            batch_rate = "—" if learner.batch_label is None else fmt_rate(batch.median_us)
            rows = f"{learn.rows:,}" if learn.rows else "n/a"
            out.append(
                f"| {learner.name} | {fmt_us(learn.median_us)} | {fmt_rate(learn.median_us)} | "
                f"{fmt_us(predict.median_us)} | {batch_us} | {batch_rate} | {rows} |"
            )
    if notes:
        out += ["", "Peers marked n/a:", ""]
        out += [f"- {name}: {why}" for name, why in notes.items()]
    ratios = ratio_lines(results, streams)
    if ratios:
        out += ["", "### Ratios (peer median / our median, same run)", ""]
        out.append("| stream | ours | vs | ratio |")
        out.append("| --- | --- | --- | ---: |")
        for r in ratios:
            value = "n/a" if r["ratio"] is None else fmt_ratio(r["ratio"])
            out.append(f"| {r['stream']} | {r['ours']} | {r['peer']} | {value} |")
    checks = target_checks(results, breakdown_rows)
    if checks:
        out += ["", "### Targets of the issue (stream sparse150)", ""]
        out.append("| target | CPU time | met | wall time | met |")
        out.append("| --- | ---: | :---: | ---: | :---: |")
        for c in checks:
            out.append(
                f"| {c['target']} | {c['cpu']} | {'yes' if c['met'] else 'no'} | {c['wall']} | "
                f"{'yes' if c['met_wall'] else 'no'} |"
            )
    if breakdown_rows:
        out += [
            "",
            f"### Where the time goes ({meta['breakdown_stream']}, µs per example, median)",
            "",
            "Each piece timed alone over the whole stream, repeats interleaved across pieces. "
            "Kernels are called directly from Python with their arguments and scratch built "
            "before timing, so a per-row kernel line is numba's dispatch plus the compiled "
            'work; the batch kernel line is the compiled work alone. "Call floor": the '
            "step kernel on an empty row of a 1-feature model (dispatch and unboxing of its "
            'arguments, plus a bias-only update). "Folded into 2^12": the same rows with '
            'feature ids taken modulo 4096, so the parameters stay in cache; "uniform feature '
            'ids": rows of the same size with ids drawn uniformly from all features.',
            "",
            "| model | part | CPU µs | wall µs |",
            "| --- | --- | ---: | ---: |",
        ]
        out += [
            f"| {r['model']} | {r['part']} | {fmt_us(r['median_us'])} | "
            f"{fmt_us(r['median_wall_us'])} |"
            if r["error"] is None
            else f"| {r['model']} | {r['part']} | n/a ({r['error']}) | n/a |"
            for r in breakdown_rows
        ]
        summary = breakdown_summary(breakdown_rows)
        if summary:
            out += [
                "",
                "Read as sums (CPU time; the pieces are timed apart, so they add up only roughly):",
                "",
            ] + summary
    return "\n".join(out) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's section of ``path`` (created if missing), leave the rest."""
    replace_section(path, BEGIN, END, section)


# -- CLI ----------------------------------------------------------------------------------
def parse_peers(text: str) -> set[str]:
    if text == "all":
        return set(PEER_GROUPS)
    if text == "none":
        return set()
    peers = {p.strip() for p in text.split(",") if p.strip()}
    unknown = peers - set(PEER_GROUPS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peers {sorted(unknown)}; use {PEER_GROUPS}")
    return peers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (< 30 s)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per number (default 5)")
    parser.add_argument(
        "--peers",
        type=parse_peers,
        default="all",
        help="all, none, or a comma list of river,sklearn,vw",
    )
    parser.add_argument(
        "--streams",
        default="mnist,sparse30,sparse150",
        help="comma list of mnist,sparse30,sparse150",
    )
    parser.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="markdown file whose section to rewrite ('-': print only); the "
        "raw numbers go to speed_pa.json beside it",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds per run above which a peer is timed on a prefix",
    )
    parser.add_argument("--no-breakdown", action="store_true", help="skip the cost breakdown")
    args = parser.parse_args(argv)
    peers = args.peers if isinstance(args.peers, set) else parse_peers(args.peers)
    quick = args.quick
    repeats = args.repeats or (1 if quick else 5)
    budget = args.budget or (0.1 if quick else 2.0)
    min_rows = 8 if quick else 100
    n_mnist, n_sparse = (1000, 2000) if quick else (10_000, 20_000)
    n_features = 1 << (16 if quick else 20)
    wanted = [s.strip() for s in args.streams.split(",") if s.strip()]
    started = time.perf_counter()

    streams: list[Stream] = []
    for name in wanted:
        if name == "mnist":
            try:
                streams.append(mnist_stream(n_mnist))
            except (OSError, ValueError) as error:
                print(f"stream mnist skipped: {error}", flush=True)
        elif name in ("sparse30", "sparse150"):
            nnz = int(name.removeprefix("sparse"))
            streams.append(sparse_stream(name, n_sparse, nnz, n_features, seed=nnz))
        else:
            parser.error(f"unknown stream {name!r}")
    if not streams:
        parser.error("no stream to run")
    learners = build_learners(peers)
    warm_up(streams)

    results: list[Measurement] = []
    for stream in streams:
        print(f"{stream.name}: {stream.description}", flush=True)
        with warnings.catch_warnings():  # scikit-learn's deprecation of PassiveAggressive
            warnings.simplefilter("ignore")
            results += measure_stream(stream, learners, repeats, budget, min_rows)
        stream._cache.clear()
        for m in results:
            if m.stream == stream.name and m.median_us is not None:
                print(
                    f"  {m.learner:28s} {m.op:12s} {fmt_us(m.median_us):>8s} us  ({m.rows} rows)",
                    flush=True,
                )

    breakdown_rows: list[dict] = []
    breakdown_stream = next((s for s in streams if s.name == "sparse150"), None)
    if breakdown_stream is not None and not args.no_breakdown:
        print("breakdown", flush=True)
        uniform = sparse_stream(
            "sparse150-uniform", breakdown_stream.n_rows, 150, n_features, seed=1150, uniform=True
        )
        breakdown_rows = breakdown(breakdown_stream, uniform, repeats)
        for r in breakdown_rows:
            print(f"  {r['model']:12s} {r['part']:62s} {fmt_us(r['median_us']):>8s} us")

    command = "python -m benchmarks.speed_pa" + (" " + " ".join(argv) if argv else "")
    if argv is None:
        command = "python -m benchmarks.speed_pa " + " ".join(sys.argv[1:])
    meta = {
        "command": command.strip(),
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "cpus": __import__("os").cpu_count(),
        "versions": versions(peers),
        "repeats": repeats,
        "budget_seconds": budget,
        "quick": quick,
        "breakdown_stream": "sparse150",
    }
    section = render(results, streams, learners, breakdown_rows, meta)
    if args.out == "-":
        print(section)
    else:
        out = Path(args.out)
        write_section(out, section)
        raw = {
            "meta": meta,
            "streams": [
                {
                    "name": s.name,
                    "rows": s.n_rows,
                    "features": s.n_features,
                    "mean_nnz": s.mean_nnz,
                    "description": s.description,
                }
                for s in streams
            ],
            "results": [m.as_json() for m in results],
            "ratios": ratio_lines(results, streams),
            "targets": target_checks(results, breakdown_rows),
            "breakdown": breakdown_rows,
        }
        out.with_name("speed_pa.json").write_text(json.dumps(raw, indent=1) + "\n")
        print(f"wrote {out} and {out.with_name('speed_pa.json')}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
