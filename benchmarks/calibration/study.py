"""The calibration studies: the models (each classifier with Platt and isotonic calibrators,
and a model trained for probabilities as the reference) and the two runs, a9a and MNIST, scored
on held-out examples."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from benchmarks.streams import A9A_FEATURES, load_a9a
from core.calibration import Calibrated
from core.datasets import mnist_split
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.metrics import expected_calibration_error, log_loss, reliability_curve
from core.mofm import MultiOutputPN
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.pqr import PQR
from core.separation import Perceptron

N_BINS = 10


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
    """One pass over a9a in file order (the first 3,000 rows if ``quick``), then a9a.t."""
    X, y = load_a9a("a9a", 3000 if quick else None)
    X_test, y_test = load_a9a("a9a.t", 1000 if quick else None)
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
    """``epochs`` shuffled passes over the first 8,000 MNIST test digits (1,500 if
    ``quick``), then the last 2,000 (500)."""
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
