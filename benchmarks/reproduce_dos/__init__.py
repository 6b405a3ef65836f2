"""Reproduce section 4 of Saul 2021 (Figs 4-5): linear PA vs DoS PA on deformed digits.

``../shared/papers/dos-passive-aggressive.txt``, section 4. Ten-way digit classification by
the majority vote of 45 one-vs-one binary classifiers (pair (i, j), i < j: +1 for digit i,
-1 for digit j, trained only on those two digits), learned online by passive-aggressive
updates: linear (eq 2, zero start) and difference-of-squares (eqs 17-20, random start with
variance 1 / (rank (n + 1)), ranks d in {1, 2, 4, 8, 16}).

The paper streams 100M INFIMNIST digits (elastic distortions of the 60K MNIST training
images) and tests on the 10K MNIST test images. The training images are not available here,
so the stream is ``core.datasets.DeformationStream`` over the first 8,000 MNIST *test*
digits, and the test set is the last 2,000 (clean, never deformed, never trained on).

Recorded, as in the paper:

- Fig 4: the cumulative error rate on training examples (progressive validation: each
  example is predicted before it is learned) and the moving error rate on non-overlapping
  windows of 50K examples;
- Fig 5: every 50K examples, the test error of the live models and of the aligned
  time-averaged models (section 3.4: eq 28 with min-norm Lorentz boosts and Procrustes
  rotations, ``core.align.running_average`` per pair; plain means for linear weights), which
  fold in a snapshot of the live models every ``--average-every`` examples.

Speed: the 45 pair models of a family are stacked (``W`` of shape (45, 785, 2 rank), each
pair's feature-major ``[U^T | V^T]``, the layout of the public kernel entries of
:mod:`core.kernels`) and one numba kernel per family streams a chunk: the 45 scores with the
core score kernels on the non-zero pixels of the row, the 10-way vote (the prediction, before
learning), then the 9 updates of the pairs of the example's digit with the core step kernels.
Every model consumes the same generated chunks. The vote and the per-pair updates are those
of ``core.one_vs_one.OneVsOne`` (tests check it bit for bit), without its per-example Python
loop.

Parts: :mod:`~benchmarks.reproduce_dos.kernels` (the stacked one-vs-one kernels),
:mod:`~benchmarks.reproduce_dos.family` (45 pair models, live and averaged),
:mod:`~benchmarks.reproduce_dos.experiment` (the stream, the metrics, the run),
:mod:`~benchmarks.reproduce_dos.figures` (Figs 4 and 5),
:mod:`~benchmarks.reproduce_dos.report` (``results.md`` and the comparison with the paper),
:mod:`~benchmarks.reproduce_dos.cli` (the entry).

Usage::

    python -m benchmarks.reproduce_dos --quick          # smoke test, < 1 min
    python -m benchmarks.reproduce_dos --full           # 5M examples, about an hour
    python -m benchmarks.reproduce_dos --examples 200000 --out /tmp/dos

Writes ``reproduce_dos_fig4.png``, ``reproduce_dos_fig5.png``, ``reproduce_dos.json`` and
``results.md`` into ``--out`` (default ``docs/``).
"""
