"""Reproduce Table 2 and Figure 2 of Blondel et al. 2017 (multi-output polynomial networks).

``../shared/papers/multi-output-polynomial-networks.txt``, sections 6.2-6.4. Multi-class test
accuracy and model size on segment, vowel, satimage and letter (``../shared/data``):

- conditional gradient (Algorithm 1, ``core.mofm.MultiOutputPN``, multi-class logistic loss,
  square activation) with full refitting and with output-layer refitting, for the penalties
  l1, l1/l2 and l1/linf of Table 1;
- the linear baseline (multinomial logistic regression, scikit-learn), the kernel SVM with the
  quadratic kernel ``(x.x' + 1)^2`` (scikit-learn ``SVC(kernel="poly", degree=2, coef0=1,
  gamma=1)``, one-vs-one as LIBSVM), and one-vs-rest PNs (one single-output PN per class,
  Algorithm 1 with the binary logistic loss).

Splits (the issue's protocol): letter ``letter.scale.tr`` / ``.val`` / ``.t``
(10,500 / 4,500 / 5,000); vowel and satimage: a seeded stratified quarter of the training
file is held out for validation, the official test file is the test set; segment (no test file):
a seeded stratified 50 / 25 / 25 split. The paper instead split one pool of data 50 / 25 / 25
(its test accuracies are multiples of 1/3750 on letter, 1/1108 on satimage, 1/577 on segment
and 1/230 on vowel: a quarter of ``letter.scale``, of ``satimage.scale``, of segment, and not
of vowel's 528 training rows). Vowel's official test set is spoken by other speakers than its
training set, which makes it much harder (about 60 % for the usual classifiers), so the
script also runs the paper's protocol on vowel and satimage ("pooled": both files of vowel,
the training file of satimage, seeded stratified 50 / 25 / 25).

Model selection on the validation split only (section 6.1): for every penalty and refitting
mode, Algorithm 1 runs once per value of tau, and the greedy path is validated at every number
of basis vectors t <= k_max; the reported model maximises validation accuracy (ties: fewer
basis vectors). tau is given as a "linf-equivalent" tau0 scaled per penalty (Omega_l1 and
Omega_l1/l2 of a row exceed its Omega_l1/linf by about m / 2 and 0.6 sqrt(m) on these data):
tau = tau0 * {l1: m / 2, l1/l2: 0.6 sqrt(m), l1/linf: 1}. The small data sets use a grid of
three or four tau0; letter, whose runs are the expensive ones, uses the tau0 that a pilot
(output refit, l1/linf, k = 60: long enough for the grid's constraints to bind) picks on the
validation split from three values. Basis vector counts are the rows of H with a non-zero
output row at the selected t.

Figure 2 (section 6.2): the empirical approximation factor nu = f_1(h) / f_1(h*) of the
l1/linf basis selection, with h* the exact maximiser of f_1(h) = sum_c |h^T Gamma_c h| over the
unit ball (max over the sign patterns s of lambda_max(sum_c s_c Gamma_c)), at the first
iterations of Algorithm 1 on vowel, satimage and segment, for l1 init + refine (ours), random
init + refine, l1 init, random init and best data (the best normalised training example).

Usage::

    .venv/bin/python -m benchmarks.reproduce_mofm            # full run, writes docs/
    .venv/bin/python -m benchmarks.reproduce_mofm --quick --out /tmp/mofm   # < 1 min
    # one data set with other corrective iterations (output / full), written elsewhere
    .venv/bin/python -m benchmarks.reproduce_mofm --datasets satimage --refit-iter 40 40 \
        --out /tmp/satimage

The targets over repeated splits: one split decides little (the full-refit paths are
numerically chaotic, and a few hundred to 2,000 test examples give a standard error of 0.7-2
points), so every row and tau0 of the data sets with a seeded split (all but letter) also runs
on the split seeds 1 .. N - 1 (``--split-seeds N``, default 10; the main run is seed 0), and the
strict target check's model (row, tau and t chosen on validation within the paper's basis
budget) is reported per split with the mean and its standard error.

Writes ``mofm_results.md`` (tables), ``mofm_fig2.png``, ``mofm_paths.png`` (test accuracy along the
greedy paths, the paper's Figure 3), ``reproduce_mofm.json`` (the main run and the study's
summary) and ``reproduce_mofm_splits.json.gz`` (the study's other splits) into ``--out``
(default ``docs/``), and its speed section (fit time per basis vector, ``learn_one`` cost, one
online pass per data set) into ``benchmarks.md`` there, between ``<!-- mofm:begin -->`` and
``<!-- mofm:end -->``.
BLAS runs single-threaded (set before numpy loads): on a shared two-core machine a second
BLAS thread slows Algorithm 1 down several times; ``--jobs`` runs independent fits in
parallel processes instead.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gzip  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.markdown import replace_section  # noqa: E402
from core.datasets import data_dir, load_svmlight  # noqa: E402
from core.kernels.mofm import LOSSES  # noqa: E402
from core.mofm import MultiOutputPN, Problem, batch_loss_grad, select_basis  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: the results of the repeated-split study's other splits, beside ``reproduce_mofm.json``
SPLITS_FILE = "reproduce_mofm_splits.json.gz"
BEGIN = "<!-- mofm:begin -->"
END = "<!-- mofm:end -->"
PENALTIES = ("l1", "l1/l2", "l1/linf")
CORRECTIVES = ("full", "output")

#: Table 2 of the paper: accuracy (%) and number of basis / support vectors
PAPER = {
    ("full", "l1"): {"segment": (96.71, 41), "vowel": (87.83, 12), "satimage": (89.80, 25),
                     "letter": (92.29, 150)},
    ("full", "l1/l2"): {"segment": (96.71, 40), "vowel": (89.57, 15), "satimage": (89.08, 18),
                        "letter": (91.81, 106)},
    ("full", "l1/linf"): {"segment": (96.71, 24), "vowel": (86.96, 15), "satimage": (88.99, 20),
                          "letter": (92.35, 149)},
    ("output", "l1"): {"segment": (97.05, 20), "vowel": (80.00, 21), "satimage": (89.71, 40),
                       "letter": (91.01, 139)},
    ("output", "l1/l2"): {"segment": (96.36, 21), "vowel": (85.22, 15), "satimage": (89.71, 50),
                          "letter": (92.24, 150)},
    ("output", "l1/linf"): {"segment": (96.19, 16), "vowel": (86.96, 41),
                            "satimage": (89.35, 41), "letter": (91.68, 128)},
    "linear": {"segment": (92.55, None), "vowel": (60.00, None), "satimage": (83.03, None),
               "letter": (71.17, None)},
    "kernel": {"segment": (96.71, 238), "vowel": (85.22, 189), "satimage": (89.53, 688),
               "letter": (93.73, 3208)},
    "ovr": {"segment": (94.63, None), "vowel": (73.91, None), "satimage": (89.44, None),
            "letter": (75.36, None)},
}  # fmt: skip
#: the target: within 1.5 points of the paper's best multi-output PN, with no more basis vectors
TARGETS = {"letter": (92.35, 149), "vowel": (89.57, 15), "satimage": (89.80, 25),
           "segment": (97.05, 20)}  # fmt: skip
TARGET_MARGIN = 1.5


@dataclass(frozen=True)
class Spec:
    """A data set, its split and its budget."""

    name: str
    paper_name: str  # the column of Table 2
    n_features: int
    split: str  # "files", "holdout" (validation from the training file) or "pooled"
    files: tuple[str, ...]
    k_max: int
    k_max_full: int
    tau0_grid: tuple[float, ...]
    refit_iter: int
    refit_iter_full: int
    ovr_k_max: int
    pilot: bool = False
    split_seed: int = 0  # the seed of the validation (and, pooled, test) split


FULL_SPECS = (
    Spec("segment", "segment", 19, "pooled", ("segment/segment.scale",), 50, 50,
         (10.0, 30.0, 100.0, 300.0), 40, 40, 10),
    Spec("vowel", "vowel", 10, "holdout", ("vowel/vowel.scale", "vowel/vowel.scale.t"), 50, 50,
         (10.0, 30.0, 100.0, 300.0), 40, 40, 10),
    Spec("satimage", "satimage", 36, "holdout",
         ("satimage/satimage.scale", "satimage/satimage.scale.t"), 50, 50, (30.0, 100.0, 300.0),
         30, 25, 10),
    Spec("letter", "letter", 16, "files",
         ("letter/letter.scale.tr", "letter/letter.scale.val", "letter/letter.scale.t"), 150, 100,
         (300.0, 1000.0, 3000.0), 20, 10, 6, pilot=True),
    Spec("vowel (pooled)", "vowel", 10, "pooled", ("vowel/vowel.scale", "vowel/vowel.scale.t"), 50,
         50, (10.0, 30.0, 100.0, 300.0), 40, 40, 10),
    Spec("satimage (pooled)", "satimage", 36, "pooled", ("satimage/satimage.scale",), 50, 50,
         (30.0, 100.0, 300.0), 30, 25, 10),
)  # fmt: skip
QUICK_SPECS = (
    Spec("segment", "segment", 19, "pooled", ("segment/segment.scale",), 6, 4, (30.0,), 20, 5, 2),
    Spec("vowel", "vowel", 10, "holdout", ("vowel/vowel.scale", "vowel/vowel.scale.t"), 6, 4,
         (10.0, 30.0), 20, 5, 2, pilot=True),
)  # fmt: skip
PILOT_K = 60
PILOT_ITER = 20
SVC_C = (0.1, 1.0, 10.0)
LINEAR_C = (0.1, 1.0, 10.0, 100.0)
#: split seeds of the repeated-split study (seed 0 is the main run's split)
STUDY_SEEDS_FULL = 10
STUDY_SEEDS_QUICK = 2


# -- data ---------------------------------------------------------------------------------------
def _stratified_parts(y: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
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
        train, validation = _stratified_parts(y, (0.75, 0.25), spec.split_seed)
        Xtr, ytr, Xva, yva = X[train], y[train], X[validation], y[validation]
    else:
        X = np.vstack([a[0] for a in arrays])
        y = np.concatenate([a[1] for a in arrays])
        train, validation, test = _stratified_parts(y, (0.5, 0.25, 0.25), spec.split_seed)
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
            keep = _stratified_parts(y, (0.34, 0.66), 1)[0]
            return X[keep], y[keep]

        (Xtr, ytr), (Xva, yva), (Xte, yte) = cut(Xtr, ytr), cut(Xva, yva), cut(Xte, yte)
    classes = sorted(set(ytr.tolist()) | set(yva.tolist()) | set(yte.tolist()))
    return dict(train=(Xtr, ytr), validation=(Xva, yva), test=(Xte, yte), classes=classes)


def accuracy(predicted, truth) -> float:
    return float(np.mean(np.asarray(predicted) == np.asarray(truth)))


# -- jobs (run in worker processes) ------------------------------------------------------------
def tau_for(penalty: str, tau0: float, m: int) -> float:
    return tau0 * {"l1": m / 2.0, "l1/l2": 0.6 * np.sqrt(m), "l1/linf": 1.0}[penalty]


def job_cg(spec: Spec, quick: bool, penalty: str, corrective: str, tau0: float, k: int, iters: int):
    """Algorithm 1 once, validating (and testing) every number of basis vectors."""
    data = load(spec, quick)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["validation"], data["test"]
    m = len(data["classes"])
    model = MultiOutputPN(
        n_features=spec.n_features,
        classes=data["classes"],
        penalty=penalty,
        corrective=corrective,
        n_basis=k,
        tau=tau_for(penalty, tau0, m),
        refit_iter=iters,
        seed=0,
    )
    path = []
    callback_cpu = [0.0]

    def record(model, info):
        started = time.process_time()
        path.append(
            dict(
                t=info.iteration,
                basis=model.n_used_,
                validation=accuracy(model.predict_many(Xva), yva),
                test=accuracy(model.predict_many(Xte), yte),
                objective=info.objective,
            )
        )
        callback_cpu[0] += time.process_time() - started

    cpu, wall = time.process_time(), time.perf_counter()
    model.fit(Xtr, ytr, callback=record)
    cpu = time.process_time() - cpu - callback_cpu[0]
    return dict(
        kind="cg",
        dataset=spec.name,
        split_seed=spec.split_seed,
        penalty=penalty,
        corrective=corrective,
        tau0=tau0,
        tau=model.tau,
        k=k,
        refit_iter=iters,
        path=path,
        fit_cpu_seconds=cpu,
        wall_seconds=time.perf_counter() - wall,
        cpu_seconds_per_basis=cpu / max(1, len(path)),
    )


def job_ovr(spec: Spec, quick: bool, tau0: float, k: int, iters: int):
    """One-vs-rest PNs: one single-output PN per class (binary logistic loss), the same number
    t of basis vectors per class chosen on the validation split."""
    data = load(spec, quick)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["validation"], data["test"]
    classes = data["classes"]
    val_scores = np.full((k, len(yva), len(classes)), -np.inf)
    test_scores = np.full((k, len(yte), len(classes)), -np.inf)
    cpu = time.process_time()
    for c, label in enumerate(classes):
        model = MultiOutputPN(
            n_features=spec.n_features,
            n_outputs=1,
            loss="logistic",
            penalty="l1",
            n_basis=k,
            tau=tau0,
            refit_iter=iters,
        )

        def record(model, info, c=c):
            val_scores[info.iteration - 1 :, :, c] = model.score_many(Xva)[:, 0]
            test_scores[info.iteration - 1 :, :, c] = model.score_many(Xte)[:, 0]

        model.fit(Xtr, np.where(ytr == label, 1.0, -1.0)[:, None], callback=record)
    labels = np.array(classes)
    path = [
        dict(
            t=t + 1,
            basis=(t + 1) * len(classes),
            validation=accuracy(labels[np.argmax(val_scores[t], axis=1)], yva),
            test=accuracy(labels[np.argmax(test_scores[t], axis=1)], yte),
        )
        for t in range(k)
    ]
    return dict(
        kind="ovr",
        dataset=spec.name,
        tau0=tau0,
        path=path,
        fit_cpu_seconds=time.process_time() - cpu,
    )


def job_svc(spec: Spec, quick: bool, C: float):
    from sklearn.svm import SVC

    data = load(spec, quick)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["validation"], data["test"]
    cpu = time.process_time()
    model = SVC(kernel="poly", degree=2, coef0=1.0, gamma=1.0, C=C).fit(Xtr, ytr)
    return dict(
        kind="kernel",
        dataset=spec.name,
        C=C,
        validation=accuracy(model.predict(Xva), yva),
        test=accuracy(model.predict(Xte), yte),
        basis=int(model.n_support_.sum()),
        fit_cpu_seconds=time.process_time() - cpu,
    )


def job_linear(spec: Spec, quick: bool, C: float):
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    data = load(spec, quick)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["validation"], data["test"]
    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(C=C, max_iter=3000).fit(Xtr, ytr)
    return dict(
        kind="linear",
        dataset=spec.name,
        C=C,
        validation=accuracy(model.predict(Xva), yva),
        test=accuracy(model.predict(Xte), yte),
        basis=None,
        fit_cpu_seconds=time.process_time() - cpu,
    )


def job_figure2(spec: Spec, quick: bool, iterations: int, tau0: float):
    """nu = f_1(h) / f_1(h*) of five selection methods along Algorithm 1 (l1/linf, output
    refit), h* by enumeration of the sign patterns."""
    data = load(spec, quick)
    Xtr, ytr = data["train"]
    classes = data["classes"]
    m = len(classes)
    T = np.eye(m)[np.searchsorted(classes, ytr)]
    from core.features import as_batch

    problem = Problem(as_batch(Xtr, spec.n_features), spec.n_features, T, 0, 0, "dense")
    Z = np.hstack([Xtr, np.ones((len(Xtr), 1))])
    data_directions = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    rng = np.random.default_rng(0)
    ratios: dict[str, list[float]] = {
        "l1 init + refine (ours)": [],
        "random init + refine": [],
        "l1 init": [],
        "random init": [],
        "best data": [],
    }
    gradients = []

    def record(model, info):
        _, G = batch_loss_grad(LOSSES["softmax"], T, model.score_many(Xtr))
        gradients.append(G / len(ytr))

    # the gradients met by Algorithm 1: at U = 0, then after each iteration
    gradients.append(batch_loss_grad(LOSSES["softmax"], T, np.zeros((len(ytr), m)))[1] / len(ytr))
    MultiOutputPN(
        n_features=spec.n_features,
        classes=classes,
        penalty="l1/linf",
        n_basis=iterations - 1,
        tau=tau0,
        refit_iter=spec.refit_iter,
    ).fit(Xtr, ytr, callback=record)
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=m - 1)))
    signs = np.hstack([signs, np.ones((len(signs), 1))])  # s and -s give lambda_max, -lambda_min
    for G in gradients:
        gammas = problem.gammas(G)
        combined = np.tensordot(signs, gammas, axes=1)
        spectra = np.linalg.eigvalsh(combined)
        exact = float(np.max(np.maximum(spectra[:, -1], -spectra[:, 0])))

        def f1(h, gammas=gammas):
            return float(np.sum(np.abs(np.einsum("cij,i,j->c", gammas, h, h))))

        random_start = rng.standard_normal(problem.dim)
        random_start /= np.linalg.norm(random_start)
        ours, _ = select_basis(problem, G, 1.0)
        refined_random, _ = select_basis(problem, G, 1.0, init=random_start)
        l1_only, _ = select_basis(problem, G, np.inf)
        q = np.einsum("cij,ni,nj->nc", gammas, data_directions, data_directions)
        best_data = float(np.max(np.abs(q).sum(axis=1)))
        for name, value in (
            ("l1 init + refine (ours)", f1(ours)),
            ("random init + refine", f1(refined_random)),
            ("l1 init", f1(l1_only)),
            ("random init", f1(random_start)),
            ("best data", best_data),
        ):
            ratios[name].append(value / exact)
    return dict(kind="figure2", dataset=spec.name, m=m, ratios=ratios)


def job_speed(quick: bool):
    """Fit time per basis vector is measured by the CG jobs; here the online costs:
    ``learn_one`` / ``predict_one`` per example (CPU time, Python call and validation
    included, after a warm-up) on letter rows (dense, d = 16) and on sparse hashed-like rows
    (d = 2^18, 30 non-zeros), for k = 16 and 64 basis vectors, 26 outputs."""
    from core.datasets import load_svmlight as _load

    X, y = _load(data_dir() / "letter/letter.scale.tr", 16)
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
    results = []
    for stream, rows, d in (
        ("letter (dense, d=16)", [X[i] for i in range(n)], 16),
        ("sparse (d=2^18, 30 non-zeros)", sparse_rows, d_sparse),
    ):
        for k in (16, 64):
            learn, predict = [], []
            for _ in range(3):  # medians of three repeats: the machine is shared
                model = MultiOutputPN(n_features=d, classes=list(range(1, 27)), n_basis=k)
                for i in range(50):  # warm-up: compile and activate the basis
                    model.learn_one(rows[i], int(y[i]))
                started = time.process_time()
                for i in range(n):
                    model.learn_one(rows[i], int(y[i]))
                learn.append((time.process_time() - started) / n)
                started = time.process_time()
                for i in range(n):
                    model.predict_one(rows[i])
                predict.append((time.process_time() - started) / n)
            results.append(
                dict(
                    stream=stream,
                    k=k,
                    learn_one_us=float(np.median(learn)) * 1e6,
                    predict_one_us=float(np.median(predict)) * 1e6,
                )
            )
    return dict(kind="speed", results=results)


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


def job_pilot(*args):
    """A pilot run (``job_cg``) whose validation picks tau0 for a letter-like data set."""
    return dict(job_cg(*args), pilot=True)


def run_job(job):
    function, args = job
    return function(*args)


# -- selection ------------------------------------------------------------------------------------
def best_point(path: list[dict]) -> dict:
    """The path entry with the best validation accuracy (ties: fewer basis vectors, earlier)."""
    return max(path, key=lambda p: (p["validation"], -p["basis"], -p["t"]))


def select(results: list[dict], specs) -> dict:
    """Per data set and row of Table 2: the validation-selected result."""
    table: dict = {}
    for spec in specs:
        for corrective, penalty in itertools.product(CORRECTIVES, PENALTIES):
            runs = [
                r
                for r in results
                if r["kind"] == "cg"
                and r["dataset"] == spec.name
                and r["penalty"] == penalty
                and r["corrective"] == corrective
            ]
            if not runs:
                continue
            candidates = [(best_point(r["path"]), r) for r in runs]
            point, run = max(candidates, key=lambda pr: (pr[0]["validation"], -pr[0]["basis"]))
            table[(spec.name, corrective, penalty)] = dict(
                test=point["test"],
                validation=point["validation"],
                basis=point["basis"],
                t=point["t"],
                tau0=run["tau0"],
                tau=run["tau"],
                cpu_seconds_per_basis=run["cpu_seconds_per_basis"],
                fit_cpu_seconds=run["fit_cpu_seconds"],
                k=run["k"],
            )
        for kind in ("linear", "kernel"):
            runs = [r for r in results if r["kind"] == kind and r["dataset"] == spec.name]
            if runs:
                best = max(runs, key=lambda r: (r["validation"], -(r["basis"] or 0)))
                table[(spec.name, kind)] = dict(
                    test=best["test"], validation=best["validation"], basis=best["basis"],
                    C=best["C"], fit_cpu_seconds=best["fit_cpu_seconds"],
                )  # fmt: skip
        runs = [r for r in results if r["kind"] == "ovr" and r["dataset"] == spec.name]
        if runs:
            candidates = [(best_point(r["path"]), r) for r in runs]
            point, run = max(candidates, key=lambda pr: (pr[0]["validation"], -pr[0]["basis"]))
            table[(spec.name, "ovr")] = dict(
                test=point["test"], validation=point["validation"], basis=point["basis"],
                tau0=run["tau0"],
            )  # fmt: skip
    return table


# -- orchestration ------------------------------------------------------------------------------
def cg_jobs(spec: Spec, quick: bool, grid) -> list:
    """Algorithm 1 for every row of Table 2 and every tau0 of ``grid``."""
    jobs = []
    for corrective, penalty, tau0 in itertools.product(CORRECTIVES, PENALTIES, grid):
        k = spec.k_max_full if corrective == "full" else spec.k_max
        iters = spec.refit_iter_full if corrective == "full" else spec.refit_iter
        jobs.append((job_cg, (spec, quick, penalty, corrective, tau0, k, iters)))
    return jobs


def plan(specs, quick: bool, pilot_choice: dict) -> list:
    """Jobs of the main phase; letter-like specs need their pilot's tau0 first."""
    jobs = []
    for spec in specs:
        grid = (pilot_choice[spec.name],) if spec.pilot else spec.tau0_grid
        jobs += cg_jobs(spec, quick, grid)
        for tau0 in grid:
            jobs.append((job_ovr, (spec, quick, tau0, spec.ovr_k_max, spec.refit_iter)))
    return jobs


def study_specs(specs, seeds: int) -> list[Spec]:
    """The repeated-split study: the data sets with a seeded split (not letter's files), each
    with the split seeds 1 .. seeds - 1 (seed 0 is the main run)."""
    return [
        replace(spec, split_seed=seed)
        for spec in specs
        if spec.split != "files"
        for seed in range(1, seeds)
    ]


def study_jobs(specs, quick: bool, seeds: int) -> list:
    """Algorithm 1 for every row and tau0 on the study's other splits (no baselines)."""
    specs = study_specs(specs, seeds)
    return [job for spec in specs for job in cg_jobs(spec, quick, spec.tau0_grid)]


def baseline_jobs(specs, quick: bool) -> list:
    jobs = []
    for spec in specs:
        jobs += [(job_svc, (spec, quick, C)) for C in SVC_C]
        jobs += [(job_linear, (spec, quick, C)) for C in LINEAR_C]
    return jobs


def pilot_jobs(specs, quick: bool) -> list:
    return [
        (job_pilot, (spec, quick, "l1/linf", "output", tau0, min(PILOT_K, spec.k_max), PILOT_ITER))
        for spec in specs
        if spec.pilot
        for tau0 in spec.tau0_grid
    ]


def figure2_jobs(specs, quick: bool) -> list:
    names = {"vowel", "satimage", "segment"}
    iterations = 3 if quick else 15
    return [
        (job_figure2, (spec, quick, iterations, spec.tau0_grid[-1]))
        for spec in specs
        if spec.name in names
    ]


def execute(specs, quick: bool, jobs_count: int, log, seeds: int = 1) -> tuple[list, dict]:
    """Run every job on a process pool, at most ``jobs_count`` in flight, the longest first:
    the letter pilots, then (once the pilots have picked tau0) the letter runs, which make
    the critical path, while the small jobs fill the other worker."""
    results: list[dict] = []
    pilot_choice: dict[str, float] = {}
    pending_pilots = {spec.name: len(spec.tau0_grid) for spec in specs if spec.pilot}
    urgent = pilot_jobs(specs, quick)  # run before anything else, in order
    queue = plan([s for s in specs if not s.pilot], quick, pilot_choice)
    queue += baseline_jobs(specs, quick) + figure2_jobs(specs, quick) + [(job_speed, (quick,))]
    queue += [(job_online, (s, quick)) for s in specs if not s.name.endswith("(pooled)")]
    queue += study_jobs(specs, quick, seeds)
    queue.sort(key=expected_cost, reverse=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs_count) as pool:
        futures: dict = {}
        while urgent or queue or futures:
            while (urgent or queue) and len(futures) < jobs_count:
                job = urgent.pop(0) if urgent else queue.pop(0)
                futures[pool.submit(run_job, job)] = job
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in done:
                job = futures.pop(future)
                result = future.result()
                result.setdefault("pilot", False)
                results.append(result)
                log(f"[{time.perf_counter() - started:7.1f} s] {describe(result)}")
                if job[0] is not job_pilot:
                    continue
                name = result["dataset"]
                pending_pilots[name] -= 1
                if pending_pilots[name]:
                    continue
                pilots = [r for r in results if r["pilot"] and r["dataset"] == name]
                chosen = max(
                    pilots, key=lambda r: (best_point(r["path"])["validation"], -r["tau0"])
                )
                pilot_choice[name] = chosen["tau0"]
                log(f"pilot for {name}: tau0 = {chosen['tau0']:g}")
                spec = next(s for s in specs if s.name == name)
                urgent += sorted(plan([spec], quick, pilot_choice), key=expected_cost, reverse=True)
    return results, pilot_choice


def expected_cost(job) -> float:
    """A rough CPU cost, to start the long jobs first: n_train * k^2 * m for Algorithm 1."""
    function, args = job
    if function in (job_cg, job_pilot):
        spec, quick, _, corrective, _, k, iters = args
        data = load(spec, quick)
        cost = len(data["train"][1]) * k * k * len(data["classes"]) * iters
        return cost * (3.0 if corrective == "full" else 1.0)
    if function is job_svc:
        return len(load(*args[:2])["train"][1]) ** 2 * 50.0
    return 1e6


def describe(result: dict) -> str:
    kind = result["kind"]
    if kind == "cg":
        best = best_point(result["path"])
        seed = result.get("split_seed", 0)
        return (
            f"{result['dataset']:18s}{f' [split {seed}]' if seed else ''} "
            f"{result['corrective']:6s} {result['penalty']:8s} "
            f"tau0={result['tau0']:<6g} val {100 * best['validation']:.2f} test "
            f"{100 * best['test']:.2f} ({best['basis']}) {result['fit_cpu_seconds']:.1f} s cpu"
        )
    if kind in ("linear", "kernel"):
        return (
            f"{result['dataset']:18s} {kind:6s} C={result['C']:<6g} val "
            f"{100 * result['validation']:.2f} test {100 * result['test']:.2f} "
            f"{result['fit_cpu_seconds']:.1f} s cpu"
        )
    if kind == "ovr":
        best = best_point(result["path"])
        return (
            f"{result['dataset']:18s} ovr    tau0={result['tau0']:<6g} val "
            f"{100 * best['validation']:.2f} test {100 * best['test']:.2f}"
        )
    if kind == "online":
        return (
            f"{result['dataset']:18s} online pass: progressive "
            f"{100 * result['progressive_last_quarter']:.2f} test {100 * result['test']:.2f}"
        )
    if kind == "figure2":
        return f"{result['dataset']:18s} figure 2 ({len(result['ratios']['l1 init'])} gradients)"
    return "speed"


# -- outputs ------------------------------------------------------------------------------------
def cell(entry, paper=None) -> str:
    if entry is None:
        return "n/a"
    text = f"{100 * entry['test']:.2f}"
    if entry.get("basis") is not None:
        text += f" ({entry['basis']})"
    return text


def paper_cell(value) -> str:
    accuracy_value, basis = value
    return f"{accuracy_value:.2f}" + (f" ({basis})" if basis is not None else "")


def table_markdown(table: dict, specs) -> str:
    names = [s.name for s in specs]
    header = "| | " + " | ".join(f"{n}: ours | paper" for n in names) + " |"
    lines = [header, "|---" * (1 + 2 * len(names)) + "|"]
    rows = [
        ("**Conditional gradient, full refitting**", None),
        *[(f"{p}", ("full", p)) for p in PENALTIES],
        ("**Conditional gradient, output-layer refitting**", None),
        *[(f"{p}", ("output", p)) for p in PENALTIES],
        ("**Baselines**", None),
        ("Linear (softmax)", "linear"),
        ("Kernelized (quadratic SVC)", "kernel"),
        ("OvR PN", "ovr"),
    ]
    paper_names = {s.name: s.paper_name for s in specs}
    for label, key in rows:
        if key is None:
            lines.append(f"| {label} |" + " |" * (2 * len(names)))
            continue
        cells = []
        for name in names:
            entry = table.get((name, *key) if isinstance(key, tuple) else (name, key))
            paper = PAPER[key].get(paper_names[name])
            cells += [cell(entry), paper_cell(paper) if paper else "n/a"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def budget_points(results: list[dict], spec: Spec, budget: int) -> dict:
    """Per row of Table 2 that has one: the path entry with the best validation accuracy among
    those with at most ``budget`` basis vectors (over the runs of every tau)."""
    points = {}
    for corrective, penalty in itertools.product(CORRECTIVES, PENALTIES):
        admissible = [
            p
            for r in results
            if r["kind"] == "cg"
            and not r.get("pilot")
            and r["dataset"] == spec.name
            and r["penalty"] == penalty
            and r["corrective"] == corrective
            for p in r["path"]
            if p["basis"] <= budget
        ]
        if admissible:
            points[(corrective, penalty)] = best_point(admissible)
    return points


def strict_choice(points: dict) -> tuple[tuple[str, str], dict]:
    """The strict target check's model among ``budget_points``: the row (and its point) with
    the best validation accuracy, ties to fewer basis vectors."""
    return max(points.items(), key=lambda kv: (kv[1]["validation"], -kv[1]["basis"]))


def targets_markdown(results: list[dict], specs) -> tuple[str, dict]:
    """The targets, checked two ways: (a) the strict one, model and row both chosen on the
    validation split among models within the paper's basis budget; (b) the paper's way of
    naming a "best" row: the highest test accuracy of the six rows (each row validated within
    the budget)."""
    lines = [
        "| data set | paper's best multi-output PN (basis vectors) | needs | (a) chosen on "
        "validation within the budget | (b) best of the six rows within the budget | met |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = {}
    for spec in specs:
        if spec.paper_name not in TARGETS:
            continue
        goal, budget = TARGETS[spec.paper_name]
        points = budget_points(results, spec, budget)
        if not points:
            verdicts[spec.name] = dict(validated=False, best_row=False)
            lines.append(f"| {spec.name} | {goal:.2f} ({budget}) | | none | none | no |")
            continue
        chosen = strict_choice(points)
        best = max(points.items(), key=lambda kv: kv[1]["test"])
        need = goal - TARGET_MARGIN

        def show(item):
            (corrective, penalty), point = item
            return f"{100 * point['test']:.2f} ({point['basis']}; {corrective} / {penalty})"

        verdict = dict(
            validated=bool(100 * chosen[1]["test"] >= need),
            best_row=bool(100 * best[1]["test"] >= need),
        )
        verdicts[spec.name] = verdict
        met = "yes" if verdict["validated"] else ("(b) only" if verdict["best_row"] else "no")
        lines.append(
            f"| {spec.name} | {goal:.2f} ({budget}) | >= {need:.2f} | {show(chosen)} | "
            f"{show(best)} | {met} |"
        )
    return "\n".join(lines), verdicts


def split_study(results: list[dict], specs) -> dict:
    """The target over repeated splits. Per data set with a seeded split and per split seed:
    the strict check's model (row, tau and t chosen on validation among the models within the
    paper's basis budget, as column (a) of the targets) and each row's own validation-selected
    model within the budget. One split decides little: with full refitting the greedy path is
    numerically chaotic and a few hundred to 2,000 test examples give a binomial standard error
    of 0.7-2 points, so the verdict is the mean over the splits."""
    study = {}
    for spec in specs:
        if spec.split == "files" or spec.paper_name not in TARGETS:
            continue
        runs = [r for r in results if r["kind"] == "cg" and r["dataset"] == spec.name]
        seeds = sorted({r.get("split_seed", 0) for r in runs})
        if len(seeds) < 2:
            continue
        goal, budget = TARGETS[spec.paper_name]
        need = goal - TARGET_MARGIN
        chosen, rows = [], {}
        for seed in seeds:
            split_runs = [r for r in runs if r.get("split_seed", 0) == seed]
            points = budget_points(split_runs, spec, budget)
            (corrective, penalty), point = strict_choice(points)
            chosen.append(
                dict(
                    seed=seed,
                    test=100 * point["test"],
                    validation=100 * point["validation"],
                    basis=point["basis"],
                    row=f"{corrective} / {penalty}",
                )
            )
            for (corrective, penalty), point in points.items():
                rows.setdefault(f"{corrective} / {penalty}", []).append(100 * point["test"])
        tests = np.array([c["test"] for c in chosen])
        mean, sd = float(tests.mean()), float(tests.std(ddof=1))
        study[spec.name] = dict(
            need=need,
            budget=budget,
            chosen=chosen,
            mean=mean,
            sd=sd,
            standard_error=sd / np.sqrt(len(tests)),
            splits_meeting=int(np.sum(tests >= need)),
            met_on_mean=bool(mean >= need),
            rows={row: (float(np.mean(v)), float(np.std(v, ddof=1))) for row, v in rows.items()},
        )
    return study


def study_markdown(study: dict) -> str:
    if not study:
        return ""
    count = len(next(iter(study.values()))["chosen"])
    lines = [
        f"Test accuracy (%) of the strict check's model (column (a): row, tau and t chosen on "
        f"validation within the paper's basis budget) on {count} seeded splits (seed 0 is the "
        "main run above). Holdout data sets: the validation quarter of the training file "
        "changes, the official test file stays; pooled and segment: all three parts change.",
        "",
        "| data set | needs (basis) | per split seed | mean +- standard error (sd) | range | "
        "splits meeting | met on the mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in study.items():
        per_seed = ", ".join(f"{c['test']:.2f} ({c['basis']})" for c in entry["chosen"])
        tests = [c["test"] for c in entry["chosen"]]
        lines.append(
            f"| {name} | >= {entry['need']:.2f} (<= {entry['budget']}) | {per_seed} | "
            f"{entry['mean']:.2f} +- {entry['standard_error']:.2f} ({entry['sd']:.2f}) | "
            f"{min(tests):.2f}-{max(tests):.2f} | {entry['splits_meeting']} of {len(tests)} | "
            f"{'yes' if entry['met_on_mean'] else 'no'} |"
        )
    row_names = [f"{c} / {p}" for c, p in itertools.product(CORRECTIVES, PENALTIES)]
    lines += [
        "",
        "Each row's own validation-selected model within the budget, mean (sd) over the splits:",
        "",
        "| data set | " + " | ".join(row_names) + " |",
        "|---" * (1 + len(row_names)) + "|",
    ]
    for name, entry in study.items():
        cells = [
            f"{entry['rows'][row][0]:.2f} ({entry['rows'][row][1]:.2f})"
            if row in entry["rows"]
            else "n/a"
            for row in row_names
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_paths(results, table, specs, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in specs if any(r["dataset"] == s.name for r in results)]
    figure, axes = plt.subplots(2, len(shown), figsize=(4.2 * len(shown), 7), squeeze=False)
    for column, spec in enumerate(shown):
        for row, corrective in enumerate(CORRECTIVES):
            axis = axes[row, column]
            for penalty in PENALTIES:
                entry = table.get((spec.name, corrective, penalty))
                if entry is None:
                    continue
                run = next(
                    r
                    for r in results
                    if r["kind"] == "cg"
                    and not r.get("pilot")
                    and r["dataset"] == spec.name
                    and r["penalty"] == penalty
                    and r["corrective"] == corrective
                    and r["tau0"] == entry["tau0"]
                )
                t = [p["t"] for p in run["path"]]
                axis.plot(t, [100 * p["test"] for p in run["path"]], label=penalty)
            kernel = table.get((spec.name, "kernel"))
            if kernel:
                axis.axhline(
                    100 * kernel["test"], color="k", ls="--", lw=0.8, label="quadratic SVC"
                )
            axis.set_title(f"{spec.name}: {corrective} refitting", fontsize=9)
            axis.set_xlabel("basis vectors added (t)")
            axis.set_ylabel("test accuracy (%)")
            low = min(
                100 * p["test"]
                for r in results
                if r["kind"] == "cg" and r["dataset"] == spec.name
                for p in r["path"]
            )  # noqa: E501
            axis.set_ylim(max(low, 100 * (kernel["test"] if kernel else 0.5) - 25), 100)
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.suptitle("Test accuracy along the greedy path (validation-selected tau)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_figure2(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = [r for r in results if r["kind"] == "figure2"]
    if not entries:
        return
    methods = list(entries[0]["ratios"])
    figure, axis = plt.subplots(figsize=(8.5, 4.2))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        means = [np.mean(e["ratios"][method]) for e in entries]
        lows = [np.mean(e["ratios"][method]) - np.min(e["ratios"][method]) for e in entries]
        highs = [np.max(e["ratios"][method]) - np.mean(e["ratios"][method]) for e in entries]
        positions = np.arange(len(entries)) + (j - (len(methods) - 1) / 2) * width
        axis.bar(positions, means, width, yerr=[lows, highs], capsize=2, label=method)
    axis.set_xticks(np.arange(len(entries)))
    axis.set_xticklabels([f"{e['dataset']} (m = {e['m']})" for e in entries])
    axis.set_ylabel(r"$\hat\nu = f_1(\hat h) / f_1(h^*)$")
    axis.set_ylim(0, 1.05)
    axis.axhline(1.0, color="k", lw=0.6)
    axis.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    axis.set_title(
        "Figure 2: approximation factor of the l1/linf basis selection "
        "(mean, min-max over the first iterations)",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def figure2_markdown(results) -> str:
    entries = [r for r in results if r["kind"] == "figure2"]
    if not entries:
        return ""
    methods = list(entries[0]["ratios"])
    lines = [
        "| method | " + " | ".join(f"{e['dataset']} (m = {e['m']})" for e in entries) + " |",
        "|---" * (1 + len(entries)) + "|",
    ]
    for method in methods:
        values = [
            f"{np.mean(e['ratios'][method]):.3f} (min {np.min(e['ratios'][method]):.3f})"
            for e in entries
        ]
        lines.append(f"| {method} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def speed_markdown(results, table, specs) -> str:
    speed = next((r for r in results if r["kind"] == "speed"), None)
    lines = [
        "## Multi-output polynomial networks (`benchmarks/reproduce_mofm.py`)",
        "",
        "CPU seconds on this machine (2 cores; single-threaded BLAS). **Fit time per "
        "basis vector**: Algorithm 1's CPU time (selection and corrective steps; validation "
        "excluded) divided by the number of iterations, for the validation-selected runs of "
        "the reproduction (k = the path's length):",
        "",
        "| data set | n train | m | refitting | penalty | k | fit CPU s | s / basis vector |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for spec in specs:
        if spec.name.endswith("(pooled)"):
            continue
        for corrective, penalty in itertools.product(CORRECTIVES, PENALTIES):
            entry = table.get((spec.name, corrective, penalty))
            if entry is None:
                continue
            lines.append(
                f"| {spec.name} | {entry.get('n_train', '')} | {entry.get('m', '')} | "
                f"{corrective} | {penalty} | {entry['k']} | {entry['fit_cpu_seconds']:.1f} | "
                f"{entry['cpu_seconds_per_basis']:.3f} |"
            )
    if speed:
        lines += [
            "",
            "**Online cost** (`learn_one` = one AdaGrad step on V and H with the projections; "
            "`predict_one` = scores and argmax; Python call and validation included; 26 "
            "classes):",
            "",
            "| stream | k | learn_one | predict_one |",
            "|---|---|---|---|",
        ]
        for row in speed["results"]:
            lines.append(
                f"| {row['stream']} | {row['k']} | {row['learn_one_us']:.1f} us | "
                f"{row['predict_one_us']:.1f} us |"
            )
    online = [r for r in results if r["kind"] == "online"]
    if online:
        lines += [
            "",
            f"**Online learning** (one pass of `learn_one` over the training part in a seeded "
            f"random order, each example predicted before it is learned; AdaGrad from a seeded "
            f"random basis of k = {online[0]['k']}, default settings; Algorithm 1's rows are "
            "in Table 2 of `mofm_results.md`):",
            "",
            "| data set | examples | progressive accuracy, last quarter | test accuracy after "
            "the pass |",
            "|---|---|---|---|",
        ]
        for row in online:
            lines.append(
                f"| {row['dataset']} | {row['n']} | {100 * row['progressive_last_quarter']:.2f} "
                f"| {100 * row['test']:.2f} |"
            )
    return "\n".join(lines)


def write_section(path: Path, body: str) -> None:
    """Rewrite only our section of a shared markdown file (created with a header if missing)."""
    replace_section(path, BEGIN, END, body)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small data sets, tiny paths")
    parser.add_argument("--out", default=str(ROOT / "docs"), help="output directory")
    parser.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    parser.add_argument(
        "--from-json",
        help="rebuild the tables and figures from a saved reproduce_mofm.json (no fitting)",
    )
    parser.add_argument(
        "--split-seeds",
        type=int,
        help=f"splits of the repeated-split study, seed 0 included (default "
        f"{STUDY_SEEDS_FULL}, quick {STUDY_SEEDS_QUICK}; 1 skips it)",
    )
    parser.add_argument(
        "--datasets", nargs="+", metavar="NAME", help="only these data sets (e.g. satimage)"
    )
    parser.add_argument(
        "--refit-iter",
        nargs=2,
        type=int,
        metavar=("OUTPUT", "FULL"),
        help="corrective iterations per Algorithm 1 iteration (output / full refitting) for "
        "the data sets run, instead of each data set's own",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        args.quick = saved["config"]["mode"] == "quick"
        args.jobs = saved["config"]["jobs"]
        args.datasets = saved["config"].get("datasets")
        args.refit_iter = saved["config"].get("refit_iter")
        results, pilot_choice = saved["results"], saved["config"]["pilot_tau0"]
        wall = saved["config"]["wall_seconds"]
        splits = Path(args.from_json).with_name(SPLITS_FILE)
        if splits.exists():
            results = results + json.loads(gzip.decompress(splits.read_bytes()))
    specs = QUICK_SPECS if args.quick else FULL_SPECS
    if args.datasets:
        unknown = set(args.datasets) - {s.name for s in specs}
        if unknown:
            parser.error(f"unknown data sets {sorted(unknown)}: {[s.name for s in specs]}")
        specs = tuple(s for s in specs if s.name in args.datasets)
    if args.refit_iter:
        output, full = args.refit_iter
        specs = tuple(replace(s, refit_iter=output, refit_iter_full=full) for s in specs)
    if not args.from_json:
        wall = time.perf_counter()
        log = lambda line: print(line, flush=True)  # noqa: E731
        seeds = args.split_seeds or (STUDY_SEEDS_QUICK if args.quick else STUDY_SEEDS_FULL)
        results, pilot_choice = execute(specs, args.quick, args.jobs, log, seeds)
        wall = time.perf_counter() - wall
    study = split_study(results, specs)
    results_by_seed = results
    results = [r for r in results if r.get("split_seed", 0) == 0]  # the main run
    other_splits = [r for r in results_by_seed if r.get("split_seed", 0) != 0]
    table = select(results, specs)
    for spec in specs:
        data = load(spec, args.quick)
        for key, entry in table.items():
            if key[0] == spec.name:
                entry["n_train"] = len(data["train"][1])
                entry["m"] = len(data["classes"])
    main_specs = [s for s in specs if not s.name.endswith("(pooled)")]
    pooled_specs = [s for s in specs if s.name.endswith("(pooled)")]
    targets, verdicts = targets_markdown(results, specs)
    plot_figure2(results, out / "mofm_fig2.png")
    plot_paths(results, table, main_specs, out / "mofm_paths.png")
    cpu_total = sum(r.get("fit_cpu_seconds", 0.0) for r in results_by_seed)
    config = dict(
        mode="quick" if args.quick else "full",
        jobs=args.jobs,
        wall_seconds=wall,
        fit_cpu_seconds=cpu_total,
        pilot_tau0=pilot_choice,
        datasets=args.datasets,
        refit_iter=args.refit_iter,
        date=saved["config"]["date"]
        if args.from_json
        else datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    )
    markdown = [
        "# Multi-output polynomial networks: reproduction of Table 2 and Figure 2",
        "",
        "Generated by `benchmarks/reproduce_mofm.py`"
        + (
            " in **quick mode** (small subsets, short paths: not the reproduction)"
            if args.quick
            else ""
        )
        + f"; {wall / 60:.1f} min wall with {args.jobs} worker processes, "
        f"{cpu_total / 60:.1f} min of fit CPU time. See the script's docstring for the protocol.",
        "",
        "## Table 2: test accuracy (%) and number of basis / support vectors",
        "",
        "Our splits (the issue's protocol: official test files; validation held out from the "
        "training file; segment 50 / 25 / 25):",
        "",
        table_markdown(table, main_specs),
    ]
    if pooled_specs:
        markdown += [
            "",
            "The paper's protocol (one pool split 50 / 25 / 25) on vowel and satimage:",
            "",
            table_markdown(table, pooled_specs),
        ]
    markdown += [
        "",
        "## Targets: within 1.5 points of the paper's best multi-output PN, with no more basis "
        "vectors",
        "",
        "(a) is the honest check: the row, tau and t are all chosen on the validation split, "
        "among the models with at most the paper's number of basis vectors. (b) picks the row "
        "by test accuracy, as the paper's 'best' does; it is shown for comparability only. "
        "The target is the issue's, on its splits; the pooled rows apply it to the paper's "
        "protocol for information.",
        "",
        targets,
    ]
    if study:
        markdown += ["", "### The targets over repeated splits", "", study_markdown(study)]
    markdown += [
        "",
        "## Figure 2: approximation factor of the l1/linf basis selection",
        "",
        "![Figure 2](mofm_fig2.png)",
        "",
        figure2_markdown(results),
        "",
        "## Test accuracy along the greedy paths (cf. the paper's Figure 3)",
        "",
        "![paths](mofm_paths.png)",
        "",
        "## Selected hyperparameters",
        "",
        "| data set | row | tau0 | tau | t (iterations) | validation accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for key, entry in table.items():
        if len(key) == 3:
            markdown.append(
                f"| {key[0]} | {key[1]} / {key[2]} | {entry['tau0']:g} | {entry['tau']:.4g} | "
                f"{entry['t']} | {100 * entry['validation']:.2f} |"
            )
        elif "C" in entry:
            markdown.append(
                f"| {key[0]} | {key[1]} | C = {entry['C']:g} | | | "
                f"{100 * entry['validation']:.2f} |"
            )
    (out / "mofm_results.md").write_text("\n".join(markdown) + "\n")
    write_section(out / "benchmarks.md", speed_markdown(results, table, main_specs))
    serialisable = {" / ".join(k): v for k, v in table.items()}
    (out / "reproduce_mofm.json").write_text(
        json.dumps(
            dict(
                config=config,
                table=serialisable,
                verdicts=verdicts,
                split_study=study,
                results=results,
            ),
            indent=1,
            default=float,
        )
    )
    # the study's other splits (tens of thousands of path points) go to a compressed file
    # beside the JSON; --from-json reads it back
    compact = json.dumps(other_splits, separators=(",", ":"), default=float).encode()
    (out / SPLITS_FILE).write_bytes(gzip.compress(compact, mtime=0))
    met_on_mean = {name: entry["met_on_mean"] for name, entry in study.items()}
    print(
        f"done in {wall:.0f} s wall, {cpu_total:.0f} s fit CPU; targets met: {verdicts}; "
        f"on the mean of the repeated splits: {met_on_mean}"
    )
    return dict(config=config, table=table, verdicts=verdicts, split_study=study, results=results)


if __name__ == "__main__":
    main()
