"""Time ``predict_many`` of the dense multi-class model in an earlier checkout of the project.

Run by ``benchmarks.dense_multiclass --before CHECKOUT`` in a child process whose imports come
from ``CHECKOUT`` only, given first on its ``PYTHONPATH`` (for example ``git worktree add
/tmp/before 4c0d960``, the commit issue 18 was filed at; the script checks where ``core``
came from): it learns the rows of ``ROWS.npz`` by that checkout's default ``learn_many``
in calls of ``--body`` rows, times one ``predict_many`` of the first ``--body`` rows by the
averaged model (after a warm-up call) and prints its CPU and wall seconds and the
predictions as JSON.

    PYTHONPATH=CHECKOUT python benchmarks/predict_before.py CHECKOUT ROWS.npz [--body 5000]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout")
    parser.add_argument("rows", help=".npz with X (n, 784) and y (n,)")
    parser.add_argument("--body", type=int, default=5000)
    args = parser.parse_args()
    import core

    if not Path(core.__file__).resolve().is_relative_to(Path(args.checkout).resolve()):
        parser.error(f"core comes from {core.__file__}, not {args.checkout}: set PYTHONPATH")
    from core.averaging import Averaged
    from core.calibration import Calibrated
    from core.dos import DoSClassifier
    from core.one_vs_one import OneVsOne

    data = np.load(args.rows)
    X, y = data["X"], data["y"]
    base = Calibrated(model=DoSClassifier(n_features=X.shape[1], rank=16), method="platt")
    model = Averaged(model=OneVsOne(base=base, classes=list(range(10))), interval=5000)
    for start in range(0, len(X), args.body):
        model.learn_many(X[start : start + args.body], y[start : start + args.body])
    scorer, rows = model.scorer("averaged"), X[: args.body]
    scorer.predict_many(rows[:100])
    gc.collect()
    gc.disable()
    wall, cpu = time.perf_counter(), time.thread_time()
    predictions = scorer.predict_many(rows)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"cpu": cpu, "wall": wall, "predictions": predictions.tolist()}))


if __name__ == "__main__":
    main()
