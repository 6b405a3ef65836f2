"""Online learning with ``MultiOutputPN``: the per-example cost of ``learn_one`` /
``predict_one``, and one online pass over a data set's training part."""

from __future__ import annotations

import numpy as np

from benchmarks.reproduce_mofm.data import accuracy, load
from benchmarks.reproduce_mofm.specs import Spec
from benchmarks.timing import Samples, timed
from core.datasets import data_dir, load_svmlight
from core.mofm import MultiOutputPN


def job_speed(quick: bool):
    """Fit time per basis vector is measured by the CG jobs; here the online costs:
    ``learn_one`` / ``predict_one`` per example (CPU time, Python call and validation
    included, after a warm-up; medians of three runs) on letter rows (dense, d = 16) and on
    sparse hashed-like rows (d = 2^18, 30 non-zeros), for k = 16 and 64 basis vectors, 26
    outputs."""
    X, y = load_svmlight(data_dir() / "letter/letter.scale.tr", 16)
    X = X.toarray()
    y = y.astype(int)
    n = 300 if quick else 3000
    rng = np.random.default_rng(0)
    d_sparse, nnz = 2**18, 30
    sparse_rows = [
        (np.sort(rng.choice(d_sparse, size=nnz, replace=False)).astype(np.int64),
         rng.standard_normal(nnz) / np.sqrt(nnz))
        for _ in range(n)
    ]  # fmt: skip
    labels = [int(label) for label in y[:n]]
    results = []
    for stream, rows, d in (
        ("letter (dense, d=16)", [X[i] for i in range(n)], 16),
        ("sparse (d=2^18, 30 non-zeros)", sparse_rows, d_sparse),
    ):
        for k in (16, 64):
            learn, predict = Samples(), Samples()
            for _ in range(3):
                model = MultiOutputPN(n_features=d, classes=list(range(1, 27)), n_basis=k)
                for i in range(50):  # warm-up: compile and activate the basis
                    model.learn_one(rows[i], labels[i])
                learn.add(timed(lambda m=model, xs=rows: _learn_all(m, xs, labels)), n)
                predict.add(timed(lambda m=model, xs=rows: _predict_all(m, xs)), n)
            results.append(
                dict(
                    stream=stream,
                    k=k,
                    learn_one_us=learn.median_us,
                    predict_one_us=predict.median_us,
                )
            )
    return dict(kind="speed", results=results)


def _learn_all(model, rows, labels) -> None:
    for x, label in zip(rows, labels, strict=True):
        model.learn_one(x, label)


def _predict_all(model, rows) -> None:
    for x in rows:
        model.predict_one(x)


def job_online(spec: Spec, quick: bool, k: int = 64):
    """One online pass: the training part in a seeded random order, each example predicted
    (``predict_one``) then learned (``learn_one``, AdaGrad from a seeded random basis of k
    vectors, default settings); the progressive accuracy of the last quarter of the pass and
    the test accuracy of the model at its end."""
    data = load(spec, quick)
    (Xtr, ytr), (Xte, yte) = data["train"], data["test"]
    order = np.random.default_rng(0).permutation(len(ytr))
    model = MultiOutputPN(n_features=spec.n_features, classes=data["classes"], n_basis=k, seed=0)
    hits = np.zeros(len(order), dtype=bool)
    for position, i in enumerate(order):
        hits[position] = model.predict_one(Xtr[i]) == ytr[i]
        model.learn_one(Xtr[i], int(ytr[i]))
    return dict(
        kind="online",
        dataset=spec.name,
        k=k,
        n=len(order),
        progressive_last_quarter=float(hits[3 * len(order) // 4 :].mean()),
        test=accuracy(model.predict_many(Xte), yte),
    )
