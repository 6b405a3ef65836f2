"""Figure 7.4 (section 7.4): invariance to coordinate rescaling of the maximal-separation-ratio
(ellipsoidal) classifier, against degree-2 polynomial SVMs, on 2-D data mapped by random affine
maps."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from benchmarks.peers.sklearn import quadratic_svc
from core.separation import EllipsoidalClassifier

#: standard deviation putting 97.8% of a 2-D Gaussian inside the unit ball
SIGMA = 1.0 / math.sqrt(2.0 * math.log(1.0 / 0.022))


def ball_points(rng: np.random.Generator, count: int) -> np.ndarray:
    out = np.empty((0, 2))
    while out.shape[0] < count:
        points = rng.normal(0.0, SIGMA, (2 * count, 2))
        out = np.vstack([out, points[np.einsum("ij,ij->i", points, points) <= 1.0]])
    return out[:count]


def two_classes(rng: np.random.Generator, per_class: int) -> tuple[np.ndarray, np.ndarray]:
    positives = ball_points(rng, per_class)
    inner = ball_points(rng, per_class)
    radii = np.maximum(np.linalg.norm(inner, axis=1, keepdims=True), 1e-12)
    negatives = inner / radii**2  # r -> 1/r along the same direction
    X = np.vstack([positives, negatives])
    return X, np.r_[np.ones(per_class), -np.ones(per_class)]


def random_affine(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    Q, _ = np.linalg.qr(rng.standard_normal((2, 2)))
    M = Q @ np.diag(np.exp(rng.uniform(-1.0, 1.0, 2))) @ Q.T
    return M, rng.normal(0.0, 2.0, 2)


def run_figure(settings) -> dict:
    """Mean test errors over ``settings.tests`` random affine maps, for every exponent k of
    the rescaling 10^k of both coordinates ("all") or the first one ("one")."""
    rng = np.random.default_rng(settings.seed)
    models = ("maxsep", "svm_gamma1", "svm_scale")
    errors = {
        mode: {model: np.zeros((settings.tests, len(settings.exponents))) for model in models}
        for mode in ("all", "one")
    }
    t_values = []
    started = time.perf_counter()
    for test in range(settings.tests):
        X, y = two_classes(rng, settings.train)
        Xt, yt = two_classes(rng, settings.test)
        M, shift = random_affine(rng)
        X, Xt = X @ M.T + shift, Xt @ M.T + shift
        for mode in ("all", "one"):
            for j, k in enumerate(settings.exponents):
                if mode == "one" and k == 0.0:  # same data as "all" at k = 0
                    for model in models:
                        errors["one"][model][test, j] = errors["all"][model][test, j]
                    continue
                scale = np.array([10.0**k, 10.0**k if mode == "all" else 1.0])
                A, At = X * scale, Xt * scale
                maxsep = EllipsoidalClassifier(n_features=2).fit(A, y)
                t_values.append(maxsep.t_)
                errors[mode]["maxsep"][test, j] = np.mean(maxsep.predict_many(At) != yt)
                for model, gamma in (("svm_gamma1", 1.0), ("svm_scale", "scale")):
                    svm = quadratic_svc(A, y, gamma=gamma)
                    errors[mode][model][test, j] = np.mean(svm.predict(At) != yt)
        if (test + 1) % 50 == 0:
            print(f"  figure 7.4: {test + 1}/{settings.tests} tests, "
                  f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    spread = {
        mode: float(np.max(np.ptp(errors[mode]["maxsep"], axis=1))) for mode in ("all", "one")
    }
    return {
        "exponents": list(settings.exponents),
        "tests": settings.tests,
        "mean_error": {
            mode: {model: errors[mode][model].mean(axis=0).tolist() for model in models}
            for mode in errors
        },
        "maxsep_error_range_within_a_test": spread,
        "maxsep_t_mean": float(np.mean(t_values)),
        "seconds": time.perf_counter() - started,
    }


def plot_figure(figure: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = figure["exponents"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {
        "maxsep": ("max. separation ratio", "k"),
        "svm_gamma1": ("SVM, (x.x' + 1)^2", "tab:red"),
        "svm_scale": ("SVM, sklearn gamma='scale'", "tab:blue"),
    }
    for model, (label, colour) in styles.items():
        for mode, line in (("all", "-"), ("one", "--")):
            which = "both coordinates" if mode == "all" else "first coordinate"
            ax.plot(k, 100 * np.array(figure["mean_error"][mode][model]), line, color=colour,
                    marker="o", ms=3, label=f"{label}, {which} rescaled")  # fmt: skip
    ax.set_xlabel("exponent of the rescaling coefficient (10^k)")
    ax.set_ylabel(f"test error, %  (mean over {figure['tests']} random affine maps)")
    ax.set_title("Figure 7.4: coordinate rescaling invariance")
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
