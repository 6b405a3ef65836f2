"""The splits of the Table 2 reproduction: dense train / validation / test arrays per data set,
from the official files or from seeded stratified splits."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from benchmarks.reproduce_mofm.specs import Spec
from core.datasets import data_dir, load_svmlight


def stratified_parts(y: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Row indices of a seeded stratified split into parts of the given fractions."""
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in fractions]
    bounds = np.cumsum(fractions)[:-1]
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        cuts = np.round(bounds * len(rows)).astype(int)
        for part, chunk in zip(parts, np.split(rows, cuts), strict=True):
            part.extend(chunk.tolist())
    return [np.sort(np.array(part, dtype=int)) for part in parts]


@lru_cache(maxsize=8)
def load(spec: Spec, quick: bool) -> dict:
    """Dense train / validation / test arrays, int labels and the classes."""
    root = data_dir()
    loaded = [load_svmlight(root / f, spec.n_features) for f in spec.files]
    arrays = [(X.toarray(), y.astype(int)) for X, y in loaded]
    if spec.split == "files":
        (Xtr, ytr), (Xva, yva), (Xte, yte) = arrays
    elif spec.split == "holdout":
        (X, y), (Xte, yte) = arrays
        train, validation = stratified_parts(y, (0.75, 0.25), spec.split_seed)
        Xtr, ytr, Xva, yva = X[train], y[train], X[validation], y[validation]
    else:
        X = np.vstack([a[0] for a in arrays])
        y = np.concatenate([a[1] for a in arrays])
        train, validation, test = stratified_parts(y, (0.5, 0.25, 0.25), spec.split_seed)
        Xtr, ytr, Xva, yva, Xte, yte = (
            X[train],
            y[train],
            X[validation],
            y[validation],
            X[test],
            y[test],
        )
    if quick:  # a stratified third of every part

        def cut(X, y):
            keep = stratified_parts(y, (0.34, 0.66), 1)[0]
            return X[keep], y[keep]

        (Xtr, ytr), (Xva, yva), (Xte, yte) = cut(Xtr, ytr), cut(Xva, yva), cut(Xte, yte)
    classes = sorted(set(ytr.tolist()) | set(yva.tolist()) | set(yte.tolist()))
    return dict(train=(Xtr, ytr), validation=(Xva, yva), test=(Xte, yte), classes=classes)


def accuracy(predicted, truth) -> float:
    return float(np.mean(np.asarray(predicted) == np.asarray(truth)))
