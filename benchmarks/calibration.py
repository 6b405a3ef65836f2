"""Calibrated probabilities on a9a and MNIST: log loss, Brier score, expected calibration error
and reliability curves of ``core.calibration`` on the classifiers of ``core``.

- **a9a** (binary): one pass over ``a9a`` in file order, then the test file ``a9a.t``. Linear
  PA-I, DoS PA-I and the normalized perceptron, each wrapped in ``Calibrated`` with Platt
  scaling and with isotonic regression; PQR's logistic model (k = 0, FTRL; its own sigmoid)
  as the reference of a model trained for probabilities.
- **MNIST** (10 classes): the first 8,000 MNIST test digits (``core.datasets.mnist_split``,
  pixels / 255), shuffled with a fixed seed, ``epochs`` passes, then the last 2,000 digits.
  One-vs-rest linear PA-I and one-vs-one DoS PA-I, on calibrated bases (Platt), and
  MultiOutputPN (softmax, online AdaGrad) as the reference of a model trained for
  probabilities. The reliability curve is over the top class's probability.

Every calibrator learns the progressive scores of its model (scored before each update);
the test examples are never learned.

Usage::

    python -m benchmarks.calibration            # full run, about a minute
    python -m benchmarks.calibration --quick    # smoke test, seconds

Writes ``calibration.json`` and ``calibration.png`` into ``--out`` (default ``docs/``) and the
results into ``calibration.md`` there (between ``<!-- calibration:begin -->`` and
``<!-- calibration:end -->``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from core.calibration import Calibrated
from core.datasets import data_dir, load_svmlight, mnist_split
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.metrics import expected_calibration_error, log_loss, reliability_curve
from core.mofm import MultiOutputPN
from core.multiclass import OneVsOne, OneVsRest
from core.pqr import PQR
from core.separation import Perceptron

ROOT = Path(__file__).resolve().parents[1]
A9A_FEATURES = 123
N_BINS = 10
HEADER = "# Calibrated probabilities\n\nWritten by `python -m benchmarks.calibration`.\n"


def binary_models(n_features: int) -> dict[str, Callable]:
    """name -> factory of the a9a study's models."""
    models: dict[str, Callable] = {}
    for base_name, base in (
        ("linear PA-I", lambda: LinearPA(n_features=n_features, mode="pa1", C=0.01)),
        ("DoS PA-I", lambda: DoSClassifier(n_features=n_features, rank=4, mode="pa1", C=0.01)),
        ("perceptron", lambda: Perceptron(n_features=n_features)),
    ):
        for method in ("platt", "isotonic"):
            models[f"{base_name} + {method}"] = lambda base=base, method=method: Calibrated(
                model=base(), method=method
            )
    models["PQR k=0 (its sigmoid)"] = lambda: PQR(n_features=n_features, k=0, alpha=0.1)
    return models


def multiclass_models(n_features: int, classes: list) -> dict[str, Callable]:
    """name -> factory of the MNIST study's models."""
    return {
        "one-vs-rest linear PA-I + platt": lambda: OneVsRest(
            base=Calibrated(model=LinearPA(n_features=n_features, mode="pa1", C=0.01)),
            classes=classes,
        ),
        "one-vs-one DoS PA-I + platt": lambda: OneVsOne(
            base=Calibrated(model=DoSClassifier(n_features=n_features, rank=2, mode="pa1", C=0.01)),
            classes=classes,
        ),
        "MultiOutputPN softmax (its own)": lambda: MultiOutputPN(
            n_features=n_features, classes=classes, n_basis=16, tau=1000.0, learning_rate=0.05
        ),
    }


def evaluate(model, X_test, y_index, probabilities) -> dict:
    """Accuracy, log loss, Brier score, ECE and the reliability curve of test probabilities."""
    p = np.asarray(probabilities)
    if p.ndim == 1:  # binary: P(positive); the curve is of P(positive) against the frequency
        confidence, event = p, (y_index == 1).astype(float)
        predicted = (p > 0.5).astype(np.int64)
        brier = float(np.mean((p - event) ** 2))
    else:
        confidence, predicted = p.max(axis=1), p.argmax(axis=1)
        event = (predicted == y_index).astype(float)
        onehot = np.eye(p.shape[1])[y_index]
        brier = float(np.mean(np.sum((p - onehot) ** 2, axis=1)))
    mean, frequency, count = reliability_curve(confidence, event, N_BINS)
    return {
        "accuracy": float(np.mean(predicted == y_index)),
        "log_loss": log_loss(p, y_index),
        "brier": brier,
        "ece": expected_calibration_error(confidence, event, N_BINS),
        "reliability": {
            "mean_probability": mean.tolist(),
            "frequency": frequency.tolist(),
            "count": count.tolist(),
        },
    }


def run_a9a(quick: bool) -> dict:
    folder = data_dir() / "a9a"
    X, y = load_svmlight(folder / "a9a", n_features=A9A_FEATURES)
    X_test, y_test = load_svmlight(folder / "a9a.t", n_features=A9A_FEATURES)
    if quick:
        X, y, X_test, y_test = X[:3000], y[:3000], X_test[:1000], y_test[:1000]
    y, y_test = np.where(y > 0, 1, -1), np.where(y_test > 0, 1, -1)
    results = {}
    for name, factory in binary_models(A9A_FEATURES).items():
        model = factory()
        started = time.perf_counter()
        model.learn_many(X, y)
        seconds = time.perf_counter() - started
        result = evaluate(
            model, X_test, (y_test > 0).astype(np.int64), model.predict_proba_many(X_test)
        )
        results[name] = {**result, "train_seconds": seconds}
    return {"n_train": int(X.shape[0]), "n_test": int(X_test.shape[0]), "models": results}


def run_mnist(quick: bool, epochs: int, seed: int) -> dict:
    (source, source_labels), (test, test_labels) = mnist_split()
    X = source.reshape(source.shape[0], -1) / 255.0
    X_test = test.reshape(test.shape[0], -1) / 255.0
    y, y_test = source_labels.astype(np.int64), test_labels.astype(np.int64)
    if quick:
        X, y, X_test, y_test = X[:1500], y[:1500], X_test[:500], y_test[:500]
    classes = list(range(10))
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(X.shape[0]) for _ in range(epochs)])
    results = {}
    for name, factory in multiclass_models(X.shape[1], classes).items():
        model = factory()
        started = time.perf_counter()
        model.learn_many(X[order], y[order])
        seconds = time.perf_counter() - started
        result = evaluate(model, X_test, y_test, model.predict_proba_many(X_test))
        results[name] = {**result, "train_seconds": seconds}
    return {
        "n_train": int(order.shape[0]),
        "n_test": int(X_test.shape[0]),
        "epochs": epochs,
        "seed": seed,
        "models": results,
    }


def table(study: dict) -> str:
    lines = [
        "| model | accuracy | log loss | Brier | ECE |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in study["models"].items():
        lines.append(
            f"| {name} | {100 * r['accuracy']:.2f}% | {r['log_loss']:.4f} | {r['brier']:.4f} "
            f"| {r['ece']:.4f} |"
        )
    return "\n".join(lines)


def render(results: dict, command: str) -> str:
    a9a, mnist = results["a9a"], results["mnist"]
    return "\n\n".join(
        [
            f"Command: `{command}` (seeded: the same figures on every run; training seconds, "
            "in the JSON, are not).",
            f"**a9a**: {a9a['n_train']:,} training examples in one pass, {a9a['n_test']:,} "
            "test examples; probability of the positive class (>50K).",
            table(a9a),
            f"**MNIST**: {mnist['n_train']:,} examples ({mnist['epochs']} shuffled passes over "
            f"the 8,000 source digits, seed {mnist['seed']}), {mnist['n_test']:,} held-out "
            "test digits; the ECE and curve are of the top class's probability.",
            table(mnist),
            "ECE: expected calibration error over 10 equal-width bins. The reliability "
            "curves are in `calibration.png` (predicted probability against observed "
            "frequency; the diagonal is perfect calibration).",
        ]
    )


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 5))
    for axis, (title, study) in zip(
        axes,
        (("a9a: P(>50K)", results["a9a"]), ("MNIST: top class", results["mnist"])),
        strict=True,
    ):
        axis.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        for name, r in study["models"].items():
            curve = r["reliability"]
            axis.plot(
                curve["mean_probability"], curve["frequency"], marker="o", markersize=3, label=name
            )
        axis.set_title(title)
        axis.set_xlabel("predicted probability")
        axis.set_ylabel("observed frequency")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small subsets (a smoke test)")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the MNIST digits")
    parser.add_argument("--seed", type=int, default=0, help="seed of the MNIST shuffles")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output folder")
    args = parser.parse_args(argv)
    results = {
        "config": {"quick": args.quick, "epochs": args.epochs, "seed": args.seed},
        "environment": environment(),
        "a9a": run_a9a(args.quick),
        "mnist": run_mnist(args.quick, 1 if args.quick else args.epochs, args.seed),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, args.out / "calibration.png")
    command = "python -m benchmarks.calibration" + (" --quick" if args.quick else "")
    replace_section(
        args.out / "calibration.md",
        "<!-- calibration:begin -->",
        "<!-- calibration:end -->",
        render(results, command),
        header=HEADER,
    )
    print(render(results, command))
    return results


if __name__ == "__main__":
    main()
