"""The jobs of Table 2, each run in a worker process: Algorithm 1 along its greedy path, the
one-vs-rest PNs, and the kernel and linear baselines."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.peers.sklearn import logistic_regression, quadratic_svc
from benchmarks.reproduce_mofm.data import accuracy, load
from benchmarks.reproduce_mofm.specs import Spec
from core.mofm import MultiOutputPN


def tau_for(penalty: str, tau0: float, m: int) -> float:
    """tau of a penalty from the linf-equivalent tau0 (m outputs)."""
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
    """The kernel SVM with the quadratic kernel ``(x.x' + 1)^2`` (LIBSVM's one-vs-one)."""
    return _baseline(
        "kernel", spec, quick, C, lambda X, y: quadratic_svc(X, y, C=C), _support_vectors
    )


def job_linear(spec: Spec, quick: bool, C: float):
    """The linear baseline: multinomial logistic regression."""
    return _baseline(
        "linear", spec, quick, C, lambda X, y: logistic_regression(X, y, C), lambda model: None
    )


def _support_vectors(model) -> int:
    return int(model.n_support_.sum())


def _baseline(kind: str, spec: Spec, quick: bool, C: float, fit, basis):
    """A scikit-learn baseline fitted on the training split, its validation and test
    accuracy, and ``basis(model)``, the number of basis (support) vectors or None."""
    data = load(spec, quick)
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data["train"], data["validation"], data["test"]
    cpu = time.process_time()
    model = fit(Xtr, ytr)
    return dict(
        kind=kind,
        dataset=spec.name,
        C=C,
        validation=accuracy(model.predict(Xva), yva),
        test=accuracy(model.predict(Xte), yte),
        basis=basis(model),
        fit_cpu_seconds=time.process_time() - cpu,
    )


def job_pilot(*args):
    """A pilot run (``job_cg``) whose validation picks tau0 for a letter-like data set."""
    return dict(job_cg(*args), pilot=True)


def run_job(job):
    """``(function, args)`` -> ``function(*args)``: what a worker process runs."""
    function, args = job
    return function(*args)
