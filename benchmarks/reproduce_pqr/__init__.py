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

Parts: :mod:`~benchmarks.reproduce_pqr.settings` (grids and sizes),
:mod:`~benchmarks.reproduce_pqr.metrics` (AUC, log loss, RMSE),
:mod:`~benchmarks.reproduce_pqr.learners` (PQR / LR as a one-pass learner),
:mod:`~benchmarks.reproduce_pqr.a9a` (tuning and the Table 4 analogue),
:mod:`~benchmarks.reproduce_pqr.movielens` (the Table 3 protocol),
:mod:`~benchmarks.reproduce_pqr.speed` (interleaved timing rounds),
:mod:`~benchmarks.reproduce_pqr.report` (tables and figure), :mod:`~benchmarks.reproduce_pqr.cli`.

Usage::

    .venv/bin/python -m benchmarks.reproduce_pqr                 # full run, < 10 minutes
    .venv/bin/python -m benchmarks.reproduce_pqr --quick         # smoke test, seconds
    .venv/bin/python -m benchmarks.reproduce_pqr --movielens ~/ml-100k

Writes ``reproduce_pqr.json`` and ``reproduce_pqr.png`` into ``--out`` (default ``docs/``),
the results tables into ``pqr.md`` (between ``<!-- pqr-results:begin -->`` and
``<!-- pqr-results:end -->``) and the speed table into ``benchmarks.md`` (between
``<!-- pqr:begin -->`` and ``<!-- pqr:end -->``); text outside the markers is kept.
"""
