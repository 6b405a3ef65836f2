"""The Table 4 analogue on a9a: every model tuned on a validation split (one pass on the first
80% of the training file, log loss on the last 20%), then one pass over the whole file and AUC,
log loss and model size on ``a9a.t``."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.learners import OnePass
from benchmarks.peers import available
from benchmarks.peers.river import RiverFM
from benchmarks.peers.vw import VowpalWabbit
from benchmarks.reproduce_pqr.learners import OurPQR, top_k_of
from benchmarks.reproduce_pqr.metrics import auc, log_loss
from benchmarks.reproduce_pqr.settings import Settings
from benchmarks.streams import Stream, load_a9a


def grid_points(grid: dict) -> list[dict]:
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]


def tune(make: Callable[[dict], OnePass], grid: dict, train: Stream, valid: Stream) -> dict:
    """The grid point with the lowest validation log loss (one pass on ``train``)."""
    best, best_loss = None, np.inf
    for params in grid_points(grid):
        learner = make(params)
        try:
            learner.fit(train)
            loss = log_loss(learner.proba(valid), valid.labels)
        finally:
            learner.close()
        if loss < best_loss:
            best, best_loss = params, loss
    return best


def evaluate(learner: OnePass, train: Stream, test: Stream) -> dict:
    """Train on ``train`` (one pass), then AUC, log loss and model size on ``test``."""
    learner.fit(train)
    probabilities = learner.proba(test)
    result = {
        "model": learner.name,
        "auc": auc(probabilities, test.labels),
        "log_loss": log_loss(probabilities, test.labels),
        "model_size": learner.size(),
    }
    learner.close()
    return result


def run_a9a(settings: Settings, workdir: Path) -> tuple[dict, dict[str, Callable[[], OnePass]]]:
    """The table's rows, and per model name the factory of its tuned learner (for the speed
    rounds). VW writes its text files into ``workdir``."""
    X, y = load_a9a("a9a", settings.train_rows)
    X_test, y_test = load_a9a("a9a.t", settings.test_rows)
    cut = int(0.8 * X.shape[0])
    train = Stream("a9a_train", X, y)
    test = Stream("a9a_test", X_test, y_test)
    fit_part = Stream("a9a_fit", X[:cut], y[:cut])
    valid = Stream("a9a_valid", X[cut:], y[cut:])

    rows, chosen, makers = [], {}, {}

    def record(make: Callable[[], OnePass], params: dict, **extra) -> None:
        result = {**evaluate(make(), train, test), "params": params, **extra}
        rows.append(result)
        makers[result["model"]] = make
        print(f"  {result['model']}: AUC {result['auc']:.4f} ({params})", flush=True)

    for k in (0, *settings.ks):
        params = tune(lambda p, k=k: OurPQR(k, p, top_k_of(k)), settings.pqr_grid, fit_part, valid)
        chosen[k] = params
        record(lambda k=k, params=params: OurPQR(k, params, top_k_of(k)), params, k=k)
    # the separation estimated online: warm-up, then the top-k of the counts so far
    k, params = settings.warmup_k, chosen[settings.warmup_k]
    record(
        lambda k=k, params=params: OurPQR(k, params, "topk", settings.warmup, "warm-up"),
        params,
        k=k,
    )
    if available("river"):
        params = tune(lambda p: RiverFM(p), settings.river_grid, fit_part, valid)
        record(lambda params=params: RiverFM(params), params)
    if available("vowpalwabbit"):
        grids = {
            "ftrl": settings.vw_ftrl_grid,
            "quadratic": settings.vw_ftrl_grid,
            "lrq": settings.vw_lrq_grid,
        }
        for kind, grid in grids.items():
            params = tune(
                lambda p, kind=kind: VowpalWabbit(kind, p, workdir), grid, fit_part, valid
            )
            record(lambda kind=kind, params=params: VowpalWabbit(kind, params, workdir), params)
    return {"n_train": int(X.shape[0]), "n_test": int(X_test.shape[0]), "rows": rows}, makers
