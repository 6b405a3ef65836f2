"""Figure 2 (section 6.2): the empirical approximation factor nu = f_1(h) / f_1(h*) of the
l1/linf basis selection at the first iterations of Algorithm 1, h* by enumeration of the sign
patterns, for five selection methods."""

from __future__ import annotations

import itertools

import numpy as np

from benchmarks.reproduce_mofm.data import load
from benchmarks.reproduce_mofm.specs import Spec
from core.features import as_batch
from core.mofm import ACTIVATIONS, LOSSES, MultiOutputPN, Problem, batch_loss_grad, select_basis


def job_figure2(spec: Spec, quick: bool, iterations: int, tau0: float):
    """nu = f_1(h) / f_1(h*) of five selection methods along Algorithm 1 (l1/linf, output
    refit), h* by enumeration of the sign patterns."""
    data = load(spec, quick)
    Xtr, ytr = data["train"]
    classes = data["classes"]
    m = len(classes)
    T = np.eye(m)[np.searchsorted(classes, ytr)]
    problem = Problem(
        as_batch(Xtr, spec.n_features),
        spec.n_features,
        T,
        LOSSES["softmax"],
        ACTIVATIONS["square"],
        "dense",
    )
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
