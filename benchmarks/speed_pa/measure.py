"""The interleaved timings of every learner on one stream: ``learn_one`` then ``predict_one``
on the same fresh model, and the batch call on another, every repeat."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.learners import Timed
from benchmarks.speed_pa.learners import dos, linear_pa
from benchmarks.streams import Stream
from benchmarks.timing import Samples, interleaved, timed, warm_up

OPS = ("learn_one", "predict_one", "batch")


@dataclass
class Measurement:
    """The samples of one learner's operation on one stream."""

    stream: str
    learner: str
    family: str
    rank: int | None
    op: str
    samples: Samples = field(default_factory=Samples)

    @property
    def error(self) -> str | None:
        return self.samples.error

    @property
    def rows(self) -> int:
        return self.samples.rows

    @property
    def median_us(self) -> float | None:
        return self.samples.median_us

    @property
    def median_wall_us(self) -> float | None:
        return self.samples.median_wall_us

    def as_json(self) -> dict:
        labels = {k: getattr(self, k) for k in ("stream", "learner", "family", "rank", "op")}
        return labels | self.samples.as_json()


def warm_up_ours(streams: list[Stream]) -> None:
    """Compile every kernel our timed calls reach, for every input kind, on tiny models."""
    for stream in streams:
        warm_up(
            (linear_pa(stream.n_features), dos(2)(stream.n_features)),
            stream.rows()[:3],
            stream.int_labels()[:3],
            batch=stream.csr[:3],
        )


def rows_for(learner: Timed, stream: Stream, budget: float, min_rows: int) -> int:
    """How many rows to time: the whole stream, or the prefix that fits the time budget."""
    n = stream.n_rows
    if learner.whole_stream:
        return n
    pilot = min(n, max(3, min_rows // 4))
    model = learner.new()
    try:
        seconds = timed(lambda: learner.learn_one(model, pilot)).wall / pilot
    finally:
        learner.close(model)
    if seconds * n <= budget:
        return n
    return min(n, max(min_rows, int(budget / seconds)))


def measure_stream(
    stream: Stream, learners: list[Timed], repeats: int, budget: float, min_rows: int, log=print
) -> list[Measurement]:
    """Time every learner on one stream; repeats are interleaved across learners. A learner
    that is unavailable or fails gets the reason as its error."""
    results: dict[tuple[str, str], Measurement] = {}
    active: list[tuple[Timed, int]] = []
    for learner in learners:
        for op in OPS:
            results[learner.name, op] = Measurement(
                stream.name, learner.name, learner.family, learner.rank, op
            )
        problem = learner.unavailable()
        if problem is None:
            try:
                learner.prepare(stream)
                active.append((learner, rows_for(learner, stream, budget, min_rows)))
            except Exception as error:
                problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            log(f"  {learner.name}: n/a ({problem})")
            for op in OPS:
                results[learner.name, op].samples.error = problem
    tasks = [
        (lambda learner=learner, n=n: _measure_once(learner, n, stream, results, log))
        for learner, n in active
    ]
    interleaved(repeats, tasks, log)
    for learner, _ in active:
        learner.release()
    measurements = list(results.values())
    for m in measurements:
        if m.error is None and not m.samples.cpu:
            m.samples.error = "not applicable"
    return measurements


def _measure_once(
    learner: Timed, n: int, stream: Stream, results: dict[tuple[str, str], Measurement], log
) -> None:
    learn, predict, batch = (results[learner.name, op].samples for op in OPS)
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
            log(f"  {learner.name}: n/a ({learn.error})")
    if learner.batch_label is not None and batch.error is None:
        try:
            model = learner.new()
            try:
                batch.add(timed(lambda: learner.batch(model)), stream.n_rows)
            finally:
                learner.close(model)
        except Exception as error:
            batch.error = f"{type(error).__name__}: {error}"
            log(f"  {learner.name} batch: n/a ({batch.error})")
