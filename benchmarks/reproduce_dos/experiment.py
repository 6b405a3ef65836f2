"""The experiment of section 4: every family learns one deformation stream, with progressive
validation, moving-window errors and periodic test evaluations of live and averaged models."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from benchmarks.environment import environment
from benchmarks.reproduce_dos.family import Family
from core.datasets import DeformationStream, mnist_split


@dataclass
class Config:
    examples: int = 5_000_000
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16)
    window: int = 50_000
    eval_every: int = 50_000
    average_every: int = 50_000
    chunk: int = 10_000
    stream_seed: int = 0
    init_seed: int = 0
    mode: str = "full"
    deformation: dict = field(default_factory=dict)


QUICK = dict(examples=4000, ranks=(1, 4), window=1000, eval_every=1000, average_every=1000)


def error_rate(predictions: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(predictions != labels))


def run(
    config: Config, log=print, threads: int = 1, checkpoint=None, checkpoint_every: int = 0
) -> dict:
    """Train every family on one deformation stream; return the results (JSON-ready).

    ``threads`` > 1 learns the families of a chunk in parallel (the kernels release the GIL;
    each family only touches its own arrays, so results are identical). ``checkpoint(result)``
    is called with the results so far every ``checkpoint_every`` examples, so that a run cut
    short still leaves consistent (partial) outputs."""
    (source_images, source_labels), (test_images, test_labels) = mnist_split()
    X_test = test_images.reshape(len(test_images), -1) / 255.0
    y_test = test_labels.astype(np.int64)
    stream = DeformationStream(source_images, source_labels, seed=config.stream_seed)
    config.deformation = {
        name: getattr(stream, name)
        for name in ("sigma", "alpha", "max_rotation", "max_scale", "max_shear", "max_shift")
    }
    config.deformation["field_components"] = int(stream.basis_rows_.shape[1])
    families = [Family(None, config.init_seed)] + [
        Family(rank, config.init_seed) for rank in config.ranks
    ]
    names = [f.name for f in families]
    clock = time.perf_counter()
    stream.take(0)
    for family in families:
        family.warm_up(np.ascontiguousarray(X_test[:2]), y_test[:2])
    log(f"kernels compiled or loaded in {time.perf_counter() - clock:.1f} s", flush=True)
    results = {
        name: {"cumulative": [], "windows": [], "test": []} for name in names
    }  # cumulative: [t, error]; windows: [t_end, error]; test: [t, live, averaged]
    mistakes = dict.fromkeys(names, 0)
    window_mistakes = dict.fromkeys(names, 0)
    seconds_generating = 0.0
    seconds_evaluating = 0.0
    started = time.perf_counter()
    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def learn_all(X, y):
        if pool is None:
            return [family.learn(X, y) for family in families]
        return list(pool.map(lambda family: family.learn(X, y), families))

    def summary_of(t):
        timing = {
            "seconds_total": time.perf_counter() - started,
            "seconds_generating": seconds_generating,
            "seconds_evaluating": seconds_evaluating,
            "threads": threads,
        }
        return summarise(config, families, results, t, timing)

    t = 0
    while t < config.examples:
        boundary = config.examples
        for interval in (config.chunk, config.window, config.eval_every, config.average_every):
            boundary = min(boundary, (t // interval + 1) * interval)
        clock = time.perf_counter()
        X, y = stream.take(boundary - t)
        seconds_generating += time.perf_counter() - clock
        for family, predicted in zip(families, learn_all(X, y), strict=True):
            wrong = int(np.count_nonzero(predicted != y))
            mistakes[family.name] += wrong
            window_mistakes[family.name] += wrong
        t = boundary
        for name in names:
            results[name]["cumulative"].append([t, mistakes[name] / t])
        if t % config.window == 0 or t == config.examples:
            span = t - (math.ceil(t / config.window) - 1) * config.window
            for name in names:
                results[name]["windows"].append([t, window_mistakes[name] / span])
                window_mistakes[name] = 0
        if t % config.average_every == 0:
            for family in families:
                family.fold_snapshot()
        if t % config.eval_every == 0 or t == config.examples:
            clock = time.perf_counter()
            for family in families:
                live = error_rate(family.predict(X_test), y_test)
                averaged = (
                    error_rate(family.predict(X_test, averaged=True), y_test)
                    if family.n_averaged
                    else None
                )
                results[family.name]["test"].append([t, live, averaged])
            seconds_evaluating += time.perf_counter() - clock
            elapsed = time.perf_counter() - started
            summary = "  ".join(
                f"{name}: {100 * mistakes[name] / t:.2f}%/{100 * results[name]['test'][-1][1]:.2f}%"
                for name in names
            )
            eta = elapsed / t * (config.examples - t)
            log(
                f"{t:>10,d} examples  {elapsed:8.1f} s  {t / elapsed:8.0f} ex/s  "
                f"eta {eta / 60:6.1f} min  [cumulative/test error] {summary}",
                flush=True,
            )
            if (
                checkpoint is not None
                and checkpoint_every
                and t % checkpoint_every == 0
                and (t < config.examples)
            ):
                checkpoint(summary_of(t))
    if pool is not None:
        pool.shutdown()
    return summary_of(config.examples)


def summarise(config, families, results, t: int, timing: dict) -> dict:
    """The JSON-ready results after t examples (t < config.examples: a partial run)."""
    models = {}
    for family in families:
        record = results[family.name]
        last_test = record["test"][-1]
        models[family.name] = {
            "rank": family.rank,
            "final_cumulative_error": record["cumulative"][-1][1],
            "final_moving_error": record["windows"][-1][1],
            "final_test_error_live": last_test[1],
            "final_test_error_averaged": last_test[2],
            "n_averaged": family.n_averaged,
            "seconds_learning": family.seconds_learning,
            "examples_per_second": t / family.seconds_learning,
            **record,
        }
    return {
        "config": asdict(config),
        "examples_done": t,
        "models": models,
        "timing": {
            **timing,
            "images_per_second_generator": t / timing["seconds_generating"],
            "microseconds_per_example_all_models": 1e6 * timing["seconds_total"] / t,
        },
        "environment": environment(),
    }
