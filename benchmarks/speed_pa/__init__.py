"""Passive-aggressive learners: per-example cost against River, scikit-learn and Vowpal Wabbit.

Streams (the same examples, in the same order, for every learner; :mod:`benchmarks.streams`):

- ``mnist``: the 10,000 MNIST test digits as dense 784-d rows scaled to [0, 1], label +1 for
  digits 0-4 and -1 for 5-9;
- ``sparse30`` / ``sparse150``: synthetic rows with about 30 / 150 non-zeros out of 2^20
  features (2^16 with ``--quick``). Feature ids follow a heavy-tailed law
  ``P(rank r) ~ 1 / (r + 256)`` scattered by a random permutation (as hashing scatters
  them); values are N(0, 1 / nnz); the label is the sign of a hidden rank-2
  difference-of-squares rule ``|A x|^2 - |B x|^2``.

Ours (``core``): ``LinearPA`` and ``DoSClassifier`` with rank 1, 4, 16, all in PA-I mode with
C = 1. ``learn_one`` / ``predict_one`` get what a caller would hand them (a float64 array for a
dense row, an ``(indices, values)`` tuple of sorted unique int64 / float64 arrays for a sparse
row), Python call and validation included; ``learn_many`` gets the whole stream as a CSR matrix
(validation included, the loop runs in the kernel). Numba compilation is excluded (warm-up).

Peers (:mod:`benchmarks.peers`), on the same examples, with their inputs built before timing:
River ``PAClassifier`` (mode 1, C = 1) and ``FMClassifier`` (n_factors = our rank) on dicts;
scikit-learn ``SGDClassifier(loss="hinge", learning_rate="pa1", eta0=1)`` and
``PassiveAggressiveClassifier`` with one-row ``partial_fit`` calls, and one ``partial_fit`` on the
whole CSR as the batch counterpart; Vowpal Wabbit (``vowpalwabbit.Workspace``), linear with the
hinge loss and ``--lrq ffK`` (rank-K factorisation, logistic loss), learning from pre-formatted
text lines. Peers slower than a time budget per repeat are timed on a prefix of the stream (the
table says how many rows). A peer that is missing or fails is reported as "n/a" with the reason.

Each number is the median over ``--repeats`` runs of the per-example CPU time of the timing
thread (:mod:`benchmarks.timing`: a fresh model per run, GC off while timing; wall time is kept
in the JSON too). Repeats are interleaved across learners, and ratios are taken between medians
of the same run. A breakdown times the pieces of DoS rank 16's calls apart (validation, the
public kernel entries of :mod:`core.kernels` alone, the same kernels with cache-resident
parameters).

Parts: :mod:`~benchmarks.speed_pa.learners` (ours and the peers under test),
:mod:`~benchmarks.speed_pa.measure` (the interleaved timings),
:mod:`~benchmarks.speed_pa.breakdown` (where the time of one call goes),
:mod:`~benchmarks.speed_pa.report` (ratios, targets and the markdown section),
:mod:`~benchmarks.speed_pa.cli` (the entry).

Usage::

    python -m benchmarks.speed_pa                  # full run; rewrites docs/benchmarks.md
    python -m benchmarks.speed_pa --quick --out -  # < 30 s, print only
    python -m benchmarks.speed_pa --peers none --streams sparse150

``--out FILE`` rewrites only the section between ``<!-- speed_pa:begin -->`` and
``<!-- speed_pa:end -->`` (the file is created if missing) and writes the raw numbers to
``speed_pa.json`` beside it.
"""
