"""The Table 3 protocol on MovieLens-100K (``--movielens PATH``): user features (gender, age
bucket, occupation, zip code) and the item's genres, one-hot and concatenated; a random
80/10/10 split with a fixed seed; one pass on the training part, hyperparameters chosen on
validation RMSE, test RMSE for LR and PQR with several k."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks.reproduce_pqr.a9a import grid_points
from benchmarks.reproduce_pqr.learners import feature_counts
from benchmarks.reproduce_pqr.metrics import rmse
from benchmarks.reproduce_pqr.settings import Settings
from core.pqr import PQR, top_k

#: MovieLens-1M age buckets (under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+)
AGE_EDGES = (18, 25, 35, 45, 50, 56)


def load_movielens(folder: str | Path) -> tuple[sp.csr_matrix, np.ndarray, list[str]]:
    """MovieLens-100K ratings as one-hot user features (gender, age bucket, occupation, zip
    code) concatenated with the item's genres (multi-hot); returns (X, ratings, feature names)."""
    folder = Path(folder)
    users = {}
    for line in (folder / "u.user").read_text(encoding="latin-1").splitlines():
        if line.strip():
            user, age, gender, occupation, zipcode = line.strip().split("|")
            users[int(user)] = (int(age), gender, occupation, zipcode)
    genres = {}
    n_genres = 0
    for line in (folder / "u.item").read_text(encoding="latin-1").splitlines():
        if line.strip():
            fields = line.strip().split("|")
            flags = np.array([int(f) for f in fields[5:]])
            n_genres = max(n_genres, flags.shape[0])
            genres[int(fields[0])] = np.flatnonzero(flags)
    ratings = np.loadtxt(folder / "u.data", dtype=np.int64, ndmin=2)
    genders = sorted({u[1] for u in users.values()})
    occupations = sorted({u[2] for u in users.values()})
    zipcodes = sorted({u[3] for u in users.values()})
    age_names = [f"age<{AGE_EDGES[0]}"] + [
        f"age{lo}-{hi - 1}" for lo, hi in zip(AGE_EDGES[:-1], AGE_EDGES[1:], strict=True)
    ]
    age_names.append(f"age>={AGE_EDGES[-1]}")
    names = (
        [f"gender={g}" for g in genders]
        + age_names
        + [f"occupation={o}" for o in occupations]
        + [f"zip={z}" for z in zipcodes]
        + [f"genre{g}" for g in range(n_genres)]
    )
    offsets = np.cumsum([0, len(genders), len(age_names), len(occupations), len(zipcodes)])
    gender_of = {g: i for i, g in enumerate(genders)}
    occupation_of = {o: i for i, o in enumerate(occupations)}
    zip_of = {z: i for i, z in enumerate(zipcodes)}
    indptr, indices = [0], []
    for user, item, _rating, _time in ratings:
        age, gender, occupation, zipcode = users[int(user)]
        row = [
            offsets[0] + gender_of[gender],
            offsets[1] + int(np.searchsorted(AGE_EDGES, age, side="right")),
            offsets[2] + occupation_of[occupation],
            offsets[3] + zip_of[zipcode],
        ]
        row += [offsets[4] + g for g in genres[int(item)]]
        indices += sorted(row)
        indptr.append(len(indices))
    X = sp.csr_matrix(
        (np.ones(len(indices)), np.array(indices, dtype=np.int64), np.array(indptr)),
        shape=(ratings.shape[0], len(names)),
    )
    return X, ratings[:, 2].astype(np.float64), names


def run_movielens(folder: str | Path, settings: Settings) -> dict:
    """Random 80/10/10 split (fixed seed), one pass on 80%, tuned on 10%, RMSE on 10%."""
    X, y, names = load_movielens(folder)
    order = np.random.default_rng(settings.seed).permutation(X.shape[0])
    n_train, n_valid = int(0.8 * X.shape[0]), int(0.1 * X.shape[0])
    train, valid = order[:n_train], order[n_train : n_train + n_valid]
    test = order[n_train + n_valid :]
    counts = feature_counts(X[train])
    rows = []
    for k in (0, *settings.movielens_ks):
        separation = top_k(counts, k).tolist()
        best = None
        for params in grid_points(settings.movielens_grid):
            model = PQR(
                n_features=X.shape[1], k=k, task="regression", separation=separation, **params
            )
            model.learn_many(X[train], y[train])
            error = rmse(model.predict_many(X[valid]), y[valid])
            if best is None or error < best[0]:
                best = (error, params, model)
        error, params, model = best
        rows.append(
            {
                "model": "LR" if k == 0 else f"PQR (k={k})",
                "k": k,
                "valid_rmse": error,
                "test_rmse": rmse(model.predict_many(X[test]), y[test]),
                "model_size": model.model_size(),
                "params": params,
            }
        )
        print(f"  MovieLens {rows[-1]['model']}: RMSE {rows[-1]['test_rmse']:.4f}", flush=True)
    return {"n_ratings": int(X.shape[0]), "n_features": len(names), "rows": rows}
