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

Parts: :mod:`~benchmarks.calibration.study` (the models and the two studies),
:mod:`~benchmarks.calibration.report` (tables, reliability curves, outputs),
:mod:`~benchmarks.calibration.cli` (the entry).
"""
