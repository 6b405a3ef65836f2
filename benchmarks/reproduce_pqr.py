"""Reproduce the PQR paper's experiments (Ma, Tables 3-4) on the data available here.

``../shared/papers/projective-quadratic-regression.txt``, section 4. Every model sees the
training examples once, one by one, in order (the paper's online protocol).

- **a9a, Table 4 analogue.** The paper's binary sets (Avazu, Criteo, KDD2012) are not here;
  a9a (UCI Adult, 123 binary features) is. One pass over ``a9a`` in file order, then AUC and
  log loss on ``a9a.t``, for LR (``core.pqr.PQR`` with k = 0, FTRL-Proximal as in the paper),
  PQR with several k (H = the top-k features of the training part, Algorithm 2's
  "pre-calculated separation"; plus one run where H comes from a warm-up of the stream), River's
  ``FMClassifier`` (SGD, the paper's "vanilla FM") and Vowpal Wabbit (``--ftrl``, and
  ``--lrq`` for a low-rank FM). Hyperparameters are chosen by validation log loss: train on the
  first 80% of the training file, validate on the last 20%; the chosen setting is then trained
  on the whole file and tested. Training time is relative to LR's; model size is the number of
  non-zero parameters.
- **MovieLens, Table 3 protocol** (``--movielens PATH``, a MovieLens-100K folder with
  ``u.data``, ``u.user``, ``u.item``): user features gender, age (MovieLens-1M buckets),
  occupation and zip code, item features the genres, one-hot and concatenated; random
  80/10/10 split with a fixed seed; one pass on the training part, hyperparameters chosen on
  validation RMSE, test RMSE for LR and PQR with several k.
- **Speed**: examples per second of learning for PQR, LR, River FM and VW on a9a and on a
  hashed sparse stream (about 40 non-zeros out of 2^20 features, Zipf-distributed values).
  Ours: ``learn_many`` on a CSR matrix (validation included). VW: its native parser and learner
  over a text file (a ``Workspace`` built with ``-d``, minus the time to build an empty one;
  parsing included). River: ``learn_one`` on dicts.

Usage::

    .venv/bin/python -m benchmarks.reproduce_pqr                 # full run, < 10 minutes
    .venv/bin/python -m benchmarks.reproduce_pqr --quick         # smoke test, seconds
    .venv/bin/python -m benchmarks.reproduce_pqr --movielens ~/ml-100k

Writes ``reproduce_pqr.json`` and ``reproduce_pqr.png`` into ``--out`` (default ``docs/``),
the results tables into ``pqr.md`` (between ``<!-- pqr-results:begin -->`` and
``<!-- pqr-results:end -->``) and the speed table into ``benchmarks.md`` (between
``<!-- pqr:begin -->`` and ``<!-- pqr:end -->``); text outside the markers is kept.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

from benchmarks.markdown import replace_section
from core.datasets import data_dir, load_svmlight
from core.pqr import PQR, top_k

ROOT = Path(__file__).resolve().parents[1]

A9A_FEATURES = 123
#: MovieLens-1M age buckets (under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+)
AGE_EDGES = (18, 25, 35, 45, 50, 56)

#: The paper's Table 3 (ML100K row) and Table 4 (Avazu), quoted beside our numbers.
PAPER_TABLE3_ML100K = {
    "LR": 1.0429,
    "FM": 1.0316,
    "CFM": 1.0326,
    "DiFacto": 1.0312,
    "PQR (k=500)": 1.0225,
    "PQR (k=1000)": 1.0215,
    "PQR (k=2000)": 1.0215,
}
PAPER_TABLE4_AVAZU = {
    "LR": (0.7562, 0.3939, 1.0, "16.37K"),
    "FM": (0.7752, 0.3840, 58.5, "1.17M"),
    "PQR (k=2000)": (0.7757, 0.3830, 3.3, "0.68M"),
    "PQR (k=4000)": (0.7777, 0.3818, 3.6, "1.32M"),
    "PQR (k=8000)": (0.7785, 0.3812, 3.8, "1.97M"),
}


@dataclass
class Settings:
    """What one run does; ``quick`` shrinks everything to seconds."""

    quick: bool
    ks: tuple[int, ...] = (10, 20, 40, 80, 123)
    warmup_k: int = 80
    warmup: int = 1000
    pqr_grid: dict = field(
        default_factory=lambda: {
            "alpha": [0.01, 0.02, 0.05, 0.1, 0.2],
            "beta": [0.1, 1.0],
            "l1": [0.0, 1.0],
            "l2": [0.0, 10.0],
        }
    )
    river_grid: dict = field(
        default_factory=lambda: {"n_factors": [8], "learning_rate": [0.005, 0.01, 0.02]}
    )
    vw_ftrl_grid: dict = field(
        default_factory=lambda: {
            "ftrl_alpha": [0.01, 0.05, 0.1, 0.5],
            "ftrl_beta": [0.1, 1.0],
            "l1": [0.0, 1e-6],
        }
    )
    vw_lrq_grid: dict = field(
        default_factory=lambda: {"rank": [4, 8], "learning_rate": [0.05, 0.1, 0.5], "l2": [0.0]}
    )
    movielens_ks: tuple[int, ...] = (20, 100, 400)
    movielens_grid: dict = field(
        default_factory=lambda: {
            "alpha": [0.01, 0.03, 0.1, 0.3],
            "beta": [1.0],
            "l1": [0.0, 1.0],
            "l2": [0.0, 10.0],
        }
    )
    train_rows: int | None = None
    test_rows: int | None = None
    hashed_rows: int = 200_000
    river_speed_rows: int = 1000
    slow_rows: int = 5000
    repeats: int = 5
    seed: int = 0

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if not quick:
            return cls(quick=False)
        return cls(
            quick=True,
            ks=(4, 16),
            warmup_k=16,
            warmup=200,
            pqr_grid={"alpha": [0.05, 0.2], "beta": [1.0], "l1": [0.0], "l2": [0.0]},
            river_grid={"n_factors": [4], "learning_rate": [0.01]},
            vw_ftrl_grid={"ftrl_alpha": [0.1], "ftrl_beta": [1.0], "l1": [0.0]},
            vw_lrq_grid={"rank": [4], "learning_rate": [0.5], "l2": [0.0]},
            movielens_ks=(4, 16),
            movielens_grid={"alpha": [0.05, 0.2], "beta": [1.0], "l1": [0.0], "l2": [0.0]},
            train_rows=1500,
            test_rows=1000,
            hashed_rows=3000,
            river_speed_rows=100,
            slow_rows=300,
            repeats=1,
        )


# -- metrics ------------------------------------------------------------------------------------
def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted one half); labels -1 / +1."""
    ranks = rankdata(scores)
    positive = labels > 0
    n_pos = int(np.count_nonzero(positive))
    n_neg = labels.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_loss(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of labels -1 / +1 under P(y = +1)."""
    p = np.clip(probabilities, 1e-15, 1.0 - 1e-15)
    return float(-np.mean(np.where(labels > 0, np.log(p), np.log1p(-p))))


def rmse(predictions: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sqrt(np.mean((predictions - targets) ** 2)))


def grid_points(grid: dict) -> list[dict]:
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]


def feature_counts(X: sp.csr_matrix) -> np.ndarray:
    """Number of rows in which each feature is non-zero."""
    return np.bincount(X.indices[X.data != 0], minlength=X.shape[1])


# -- learners -----------------------------------------------------------------------------------
class Learner:
    """One model under test: ``fit`` returns training seconds, ``proba`` P(y = +1 | x)."""

    name: str

    def fit(self, data: Split) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def proba(self, data: Split) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def size(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


@dataclass
class Split:
    """One part of a data set in the three forms the learners read (built on demand)."""

    X: sp.csr_matrix
    y: np.ndarray
    workdir: Path
    tag: str
    _rows: list | None = None
    _vw: Path | None = None

    def rows(self) -> list[dict]:
        if self._rows is None:
            X = self.X
            self._rows = [
                dict(
                    zip(
                        X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                        X.data[X.indptr[i] : X.indptr[i + 1]].tolist(),
                        strict=True,
                    )
                )
                for i in range(X.shape[0])
            ]
        return self._rows

    def vw_lines(self) -> list[str]:
        X = self.X
        lines = []
        for i in range(X.shape[0]):
            start, stop = X.indptr[i], X.indptr[i + 1]
            features = " ".join(
                f"f{j}:{v:.17g}"
                for j, v in zip(X.indices[start:stop], X.data[start:stop], strict=True)
            )
            lines.append(f"{int(self.y[i])} |a {features}")
        return lines

    def vw_file(self) -> Path:
        if self._vw is None:
            self._vw = self.workdir / f"{self.tag}.vw"
            self._vw.write_text("\n".join(self.vw_lines()) + "\n")
        return self._vw


class OurPQR(Learner):
    def __init__(
        self, k: int, params: dict, separation, warmup: int | None = None, label: str = ""
    ):
        self.k, self.params, self.separation, self.warmup = k, params, separation, warmup
        self.name = "LR" if k == 0 else f"PQR (k={k})"
        if label:
            self.name = f"PQR (k={k}, {label} {warmup})"
        self.model: PQR | None = None

    def fit(self, data: Split) -> float:
        separation = self.separation
        if callable(separation):
            separation = separation(data)
        self.model = PQR(
            n_features=data.X.shape[1],
            k=self.k,
            separation=separation,
            warmup=self.warmup,
            **self.params,
        )
        start = time.perf_counter()
        self.model.learn_many(data.X, data.y)
        return time.perf_counter() - start

    def scores(self, data: Split) -> np.ndarray:
        return self.model.score_many(data.X)

    def proba(self, data: Split) -> np.ndarray:
        return self.model.predict_proba_many(data.X)

    def size(self) -> int:
        return self.model.model_size()


def top_k_of(k: int) -> Callable[[Split], list[int]]:
    """The pre-calculated separation of Algorithm 2: the top-k features of the training part."""
    return lambda data: top_k(feature_counts(data.X), k).tolist()


class RiverFM(Learner):
    name = "River FM"

    def __init__(self, params: dict, seed: int = 0):
        self.params, self.seed = params, seed

    def fit(self, data: Split) -> float:
        from river import facto, optim

        rate = self.params["learning_rate"]
        self.model = facto.FMClassifier(
            n_factors=self.params["n_factors"],
            weight_optimizer=optim.SGD(rate),
            latent_optimizer=optim.SGD(rate),
            intercept_lr=rate,
            seed=self.seed,
        )
        rows, labels = data.rows(), (data.y > 0).tolist()
        start = time.perf_counter()
        for row, label in zip(rows, labels, strict=True):
            self.model.learn_one(row, label)
        return time.perf_counter() - start

    def proba(self, data: Split) -> np.ndarray:
        return np.array([self.model.predict_proba_one(row)[True] for row in data.rows()])

    def size(self) -> int:
        weights = sum(1 for w in self.model.weights.values() if w != 0)
        latents = sum(int(np.count_nonzero(v)) for v in self.model.latents.values())
        return weights + latents + int(self.model.intercept != 0)


class VowpalWabbit(Learner):
    """VW through its Python bindings; training runs VW's own parser over a text file."""

    NAMES = {"ftrl": "VW --ftrl", "quadratic": "VW --ftrl -q aa", "lrq": "VW --lrq"}

    def __init__(self, kind: str, params: dict, bits: int = 18):
        self.kind, self.params, self.bits = kind, params, bits
        self.name = self.NAMES[kind]
        if kind == "lrq":
            self.name += f" (rank {params['rank']})"
        self.workspace = None

    def arguments(self) -> str:
        p = self.params
        common = f"--loss_function logistic --link logistic -b {self.bits} --quiet"
        if self.kind == "lrq":
            return (
                f"--lrq aa{p['rank']} --learning_rate {p['learning_rate']} --l2 {p['l2']} {common}"
            )
        quadratic = " -q aa" if self.kind == "quadratic" else ""
        return (
            f"--ftrl --ftrl_alpha {p['ftrl_alpha']} --ftrl_beta {p['ftrl_beta']} "
            f"--l1 {p['l1']}{quadratic} {common}"
        )

    def fit(self, data: Split) -> float:
        """VW learns the whole file while its Workspace is built; the time to build an empty
        Workspace (option parsing, weight table) is subtracted."""
        import vowpalwabbit

        self.close()
        path = data.vw_file()
        start = time.perf_counter()
        vowpalwabbit.Workspace(self.arguments()).finish()
        setup = time.perf_counter() - start
        start = time.perf_counter()
        self.workspace = vowpalwabbit.Workspace(f"{self.arguments()} -d {path}")
        self.workspace.run_parser()  # a no-op when the constructor has consumed the file
        return max(time.perf_counter() - start - setup, 1e-9)

    def proba(self, data: Split) -> np.ndarray:
        lines = [line.split(" ", 1)[1] for line in data.vw_lines()]  # drop the labels
        return np.array([self.workspace.predict(line) for line in lines])

    def size(self) -> int:
        ws = self.workspace
        return sum(1 for i in range(ws.num_weights()) if ws.get_weight(i) != 0)

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.finish()
            self.workspace = None


def available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# -- tuning and evaluation ----------------------------------------------------------------------
def tune(make: Callable[[dict], Learner], grid: dict, train: Split, valid: Split) -> dict:
    """The grid point with the lowest validation log loss (one pass on ``train``)."""
    best, best_loss = None, np.inf
    for params in grid_points(grid):
        learner = make(params)
        try:
            learner.fit(train)
            loss = log_loss(learner.proba(valid), valid.y)
        finally:
            learner.close()
        if loss < best_loss:
            best, best_loss = params, loss
    return best


def evaluate(learner: Learner, train: Split, test: Split) -> dict:
    """Train on ``train`` (one pass), then AUC, log loss and model size on ``test``."""
    learner.fit(train)
    probabilities = learner.proba(test)
    result = {
        "model": learner.name,
        "auc": auc(probabilities, test.y),
        "log_loss": log_loss(probabilities, test.y),
        "model_size": learner.size(),
    }
    learner.close()
    return result


def timing_rounds(learners: dict, repeats: int) -> tuple[dict, dict]:
    """Seconds per example of one training pass, in interleaved rounds.

    ``learners`` maps a name to ``(make, data, rounds)``; round r times every learner with
    ``rounds > r`` one after the other, so that each model's ratio to LR (which comes first)
    compares passes made under the same machine load. Returns per name the examples per
    second (median over rounds) and the median over rounds of its time / LR's time, and the
    last learner of each name.
    """
    per_example: dict[str, list[float]] = {name: [] for name in learners}
    last = {}
    for r in range(repeats):
        for name, (make, data, rounds) in learners.items():
            if r < rounds:
                learner = make()
                per_example[name].append(learner.fit(data) / data.X.shape[0])
                learner.close()
                last[name] = learner
    lr = per_example["LR"]
    timings = {
        name: {
            "examples_per_second": 1.0 / float(np.median(times)),
            "vs_lr": float(np.median([t / lr[r] for r, t in enumerate(times)])),
            "rounds": len(times),
            "rows": learners[name][1].X.shape[0],
        }
        for name, times in per_example.items()
    }
    return timings, last


def run_a9a(settings: Settings, workdir: Path) -> dict:
    folder = data_dir() / "a9a"
    X, y = load_svmlight(folder / "a9a", n_features=A9A_FEATURES)
    X_test, y_test = load_svmlight(folder / "a9a.t", n_features=A9A_FEATURES)
    if settings.train_rows:
        X, y = X[: settings.train_rows], y[: settings.train_rows]
    if settings.test_rows:
        X_test, y_test = X_test[: settings.test_rows], y_test[: settings.test_rows]
    cut = int(0.8 * X.shape[0])
    train = Split(X, y, workdir, "a9a_train")
    test = Split(X_test, y_test, workdir, "a9a_test")
    fit_part = Split(X[:cut], y[:cut], workdir, "a9a_fit")
    valid = Split(X[cut:], y[cut:], workdir, "a9a_valid")

    rows, chosen, makers = [], {}, {}

    def record(make: Callable[[], Learner], params: dict, **extra) -> None:
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
            params = tune(lambda p, kind=kind: VowpalWabbit(kind, p), grid, fit_part, valid)
            record(lambda kind=kind, params=params: VowpalWabbit(kind, params), params)
    return {"n_train": int(X.shape[0]), "n_test": int(X_test.shape[0]), "rows": rows}, makers


# -- MovieLens (Table 3 protocol) --------------------------------------------------------------
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


# -- speed -------------------------------------------------------------------------------------
def hashed_stream(
    n_rows: int, n_fields: int = 40, n_features: int = 2**20, seed: int = 0
) -> tuple[sp.csr_matrix, np.ndarray]:
    """About n_fields non-zeros (value 1) per row out of n_features: field f takes a
    Zipf-distributed value (exponent 1.3) and the pair (f, value) is hashed to a column, as
    categorical click logs are. Labels come from a random logistic model of the columns."""
    rng = np.random.default_rng(seed)
    vocabulary = rng.integers(10, 100_000, n_fields)
    values = np.minimum(rng.zipf(1.3, (n_rows, n_fields)) - 1, vocabulary - 1)
    keys = np.arange(n_fields, dtype=np.int64) * 1_000_003 + values
    columns = (keys * 2_654_435_761 + 97) % n_features
    rows = np.repeat(np.arange(n_rows), n_fields)
    X = sp.csr_matrix((np.ones(rows.shape[0]), (rows, columns.ravel())), shape=(n_rows, n_features))
    X.data[:] = 1.0  # a hash collision inside a row keeps the value 1
    X.sort_indices()
    weights = rng.standard_normal(n_features) * 0.3
    logits = X @ weights
    y = np.where(rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logits)), 1.0, -1.0)
    return X, y


def run_speed(settings: Settings, workdir: Path, a9a_makers: dict) -> dict:
    """Examples per second of learning on a9a (every model of the accuracy table, tuned) and on
    the hashed stream (fixed hyperparameters), in interleaved rounds (``timing_rounds``). VW
    --lrq and River, 10-1000x slower, learn a prefix of the stream (River: one round)."""
    folder = data_dir() / "a9a"
    X, y = load_svmlight(folder / "a9a", n_features=A9A_FEATURES)
    if settings.train_rows:
        X, y = X[: settings.train_rows], y[: settings.train_rows]
    a9a = Split(X, y, workdir, "speed_a9a")
    hashed = Split(*hashed_stream(settings.hashed_rows, seed=settings.seed), workdir, "hashed")

    def prefix(data: Split, rows: int) -> Split:
        return Split(data.X[:rows], data.y[:rows], workdir, f"{data.tag}_{rows}")

    def plan(name: str, make: Callable[[], Learner], data: Split) -> tuple:
        if name.startswith("River"):
            return make, prefix(data, settings.river_speed_rows), 1
        if name.startswith("VW --lrq"):
            return make, prefix(data, settings.slow_rows), settings.repeats
        return make, data, settings.repeats

    streams = {"a9a": (a9a, {name: plan(name, m, a9a) for name, m in a9a_makers.items()})}
    fixed = {"alpha": 0.05, "beta": 1.0, "l1": 0.0, "l2": 0.0}
    makers: dict[str, Callable[[], Learner]] = {}
    for k in (0, 20) if settings.quick else (0, 20, 100):
        model = OurPQR(k, fixed, top_k_of(k))
        makers[model.name] = lambda k=k: OurPQR(k, fixed, top_k_of(k))
    if available("vowpalwabbit"):
        makers["VW --ftrl"] = lambda: VowpalWabbit(
            "ftrl", {"ftrl_alpha": 0.1, "ftrl_beta": 1.0, "l1": 0.0}, bits=20
        )
        makers["VW --lrq (rank 8)"] = lambda: VowpalWabbit(
            "lrq", {"rank": 8, "learning_rate": 0.5, "l2": 0.0}, bits=20
        )
    if available("river"):
        makers["River FM"] = lambda: RiverFM({"n_factors": 8, "learning_rate": 0.01})
    streams["hashed 2^20"] = (hashed, {name: plan(name, m, hashed) for name, m in makers.items()})

    table = []
    for stream, (data, learners) in streams.items():
        timings, last = timing_rounds(learners, settings.repeats)
        for name, timing in timings.items():
            row = {"stream": stream, "model": name, **timing, "nnz": data.X.nnz / data.X.shape[0]}
            if isinstance(last[name], OurPQR):
                members = last[name].model.members_
                in_h = np.isin(data.X.indices, members[members >= 0])
                row["h"] = float(np.count_nonzero(in_h)) / data.X.shape[0]
            table.append(row)
        print(f"  speed on {stream}: done", flush=True)
    return {"rows": table}


# -- reports -----------------------------------------------------------------------------------
def _size(n: int) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.2f}K"
    return str(n)


def results_markdown(result: dict) -> str:
    a9a = result.get("a9a")
    lines = []
    if a9a:
        lines += [
            f"One pass over a9a ({a9a['n_train']} examples, file order), tested on a9a.t "
            f"({a9a['n_test']} examples). Training time: the median over "
            f"{result['settings']['repeats']} interleaved rounds of the model's time per example "
            "over LR's in the same round (see the speed table in benchmarks.md; River and VW "
            "--lrq learn a prefix of the file).",
            "",
            "| a9a | AUC | LogLoss | Training time | Model size | hyperparameters |",
            "|---|---|---|---|---|---|",
        ]
        for row in a9a["rows"]:
            params = ", ".join(f"{k}={v:g}" for k, v in row["params"].items())
            lines.append(
                f"| {row['model']} | {row['auc']:.4f} | {row['log_loss']:.4f} | "
                f"{row['time_vs_lr']:.1f}x | {_size(row['model_size'])} | {params} |"
            )
        lines += [
            "",
            "The paper's Table 4 on Avazu (d = 1M) for comparison:",
            "",
            "| Avazu (paper) | AUC | LogLoss | Training time | Model size |",
            "|---|---|---|---|---|",
        ]
        for name, (auc_, loss, ratio, size) in PAPER_TABLE4_AVAZU.items():
            lines.append(f"| {name} | {auc_:.4f} | {loss:.4f} | {ratio:.1f}x | {size} |")
    movielens = result.get("movielens")
    if movielens:
        lines += [
            "",
            f"MovieLens ({movielens['n_ratings']} ratings, {movielens['n_features']} one-hot "
            "features), test RMSE after one pass on 80%:",
            "",
            "| model | test RMSE | validation RMSE | model size |",
            "|---|---|---|---|",
        ]
        for row in movielens["rows"]:
            lines.append(
                f"| {row['model']} | {row['test_rmse']:.4f} | {row['valid_rmse']:.4f} | "
                f"{_size(row['model_size'])} |"
            )
        paper = ", ".join(f"{k} {v:.4f}" for k, v in PAPER_TABLE3_ML100K.items())
        lines += ["", f"The paper's Table 3 (ML100K): {paper}."]
    return "\n".join(lines)


def speed_markdown(result: dict) -> str:
    speed = result["speed"]
    lines = [
        "## PQR: examples per second of learning",
        "",
        f"Written by `benchmarks/reproduce_pqr.py` ({result['settings']['mode']} run, "
        f"{result['machine']}, a machine shared with other jobs). Ours: `learn_many` on a CSR "
        "matrix (input validation included); VW: its own parser and learner on a text file (a "
        "Workspace built with `-d`, minus the time to build an empty one; parsing included); "
        "River: `learn_one` on dicts. Models are timed in interleaved rounds; `examples/s` is "
        "the median over rounds, `time vs LR` the median over rounds of the model's time per "
        "example over LR's in the same round; `rows` is the length of the timed prefix; `h` is "
        "the mean number of a row's features in H. On a9a the hyperparameters are those tuned "
        "for the accuracy table; on the hashed stream they are fixed (PQR/LR: alpha 0.05, H the "
        "top-k of the stream).",
        "",
        "| stream | model | examples/s | time vs LR | rows | nnz / row | h |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in speed["rows"]:
        h = f"{row['h']:.1f}" if "h" in row else ""
        lines.append(
            f"| {row['stream']} | {row['model']} | {row['examples_per_second']:,.0f} | "
            f"{row['vs_lr']:.2f}x | {row['rows']:,} | {row['nnz']:.1f} | {h} |"
        )
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["a9a"]["rows"] if "k" in r and "warm-up" not in r["model"]]
    ks = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(ks, [r["auc"] for r in rows], "o-", label="PQR (k = 0: LR)")
    for r in result["a9a"]["rows"]:
        if "k" not in r:
            left.axhline(r["auc"], linestyle=":", color="grey")
            left.annotate(r["model"], (ks[-1], r["auc"]), fontsize=7, ha="right", va="bottom")
    left.set_xlabel("k (order of PQR)")
    left.set_ylabel("test AUC on a9a.t")
    left.legend(fontsize=8)
    right.plot(ks, [r["time_vs_lr"] for r in rows], "o-", label="PQR training time / LR")
    right.axhline(4.0, color="red", linestyle="--", label="target 4x")
    right.set_xlabel("k (order of PQR)")
    right.set_ylabel("training time relative to LR")
    right.legend(fontsize=8)
    fig.suptitle("PQR on a9a: one online pass (FTRL-Proximal, tuned on a validation split)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny subsets and grids (seconds)")
    parser.add_argument("--movielens", type=Path, help="a MovieLens-100K folder (Table 3)")
    parser.add_argument("--no-a9a", action="store_true", help="skip a9a and the speed tables")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output directory")
    args = parser.parse_args(argv)
    settings = Settings.make(args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "settings": {**asdict(settings), "mode": "quick" if args.quick else "full"},
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        if not args.no_a9a:
            print("a9a (Table 4 analogue)", flush=True)
            result["a9a"], makers = run_a9a(settings, workdir)
            print("speed", flush=True)
            result["speed"] = run_speed(settings, workdir, makers)
            timing = {r["model"]: r for r in result["speed"]["rows"] if r["stream"] == "a9a"}
            for row in result["a9a"]["rows"]:
                row["time_vs_lr"] = timing[row["model"]]["vs_lr"]
        if args.movielens:
            print("MovieLens (Table 3 protocol)", flush=True)
            result["movielens"] = run_movielens(args.movielens, settings)
    result["seconds"] = time.perf_counter() - started
    (args.out / "reproduce_pqr.json").write_text(json.dumps(result, indent=1, default=float))
    replace_section(
        args.out / "pqr.md",
        "<!-- pqr-results:begin -->",
        "<!-- pqr-results:end -->",
        results_markdown(result),
        "# Projective quadratic regression (PQR)\n",
    )
    if "a9a" in result:
        if available("matplotlib"):
            plot(result, args.out / "reproduce_pqr.png")
        else:
            print("matplotlib is not installed: no figure", flush=True)
        replace_section(
            args.out / "benchmarks.md",
            "<!-- pqr:begin -->",
            "<!-- pqr:end -->",
            speed_markdown(result),
            "# Benchmarks\n",
        )
    print(f"wrote {args.out}: reproduce_pqr.json, pqr.md ({result['seconds']:.0f} s)", flush=True)
    return result


if __name__ == "__main__":
    main()
