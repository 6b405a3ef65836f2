"""Reproduce Table 6.1 and Figure 7.4 of Kharechko's thesis (linear and ellipsoidal separation).

``../shared/papers/linear-and-ellipsoidal-separation-thesis.txt``.

- **Table 6.1** (section 6.7): the feasibility problems of the 14 SDPLIB MAX-CUT relaxations
  (problem 6.7, ``-L/4 + diag(x) >= 0``; the SDPA files store ``F0 = +L/4`` with SDPA's
  ``sum x_i F_i - F0`` convention, so the thesis's ``F0`` is minus the file's), homogenised
  (Proposition 6.2, with ``y_0 > 0`` kept by an extra 1 x 1 block) and solved through the
  Cholesky oracle (Algorithm 7) by the parametric perceptron rescaling algorithm (PRA,
  Algorithm 6 with the chapter's parameters: theta = 1/sqrt(n), sigma = 1/(32 n),
  rho = 1/(16 sqrt(n)), Algorithm 8 as its modified perceptron) and by the ellipsoid algorithm
  (EA, Algorithm 2 with footnote 9's safeguard). Updates and seconds of both, the thesis's
  beside, and a check that each returned ``x`` is strictly feasible (smallest eigenvalue of
  ``diag(x) - L/4``).
- **Figure 7.4** (section 7.4): invariance to coordinate rescaling. 2-D data: a Gaussian
  with 97.8% of its mass in the unit ball (points outside dropped), positives the points,
  negatives points mapped by r -> 1/r. Each test draws a training set (50 + 50) and a test set
  (200 + 200), maps both by a random affine map (a random positive definite matrix with
  eigenvalues in [e^-1, e], a shift of standard deviation 2), then rescales both coordinates,
  or only the first, by 10^k. Test error of the maximal-separation-ratio classifier and of a
  degree-2 polynomial SVM: the thesis's kernel ``(x.x' + 1)^2``, i.e.
  ``SVC(kernel="poly", degree=2, coef0=1, gamma=1)``, and scikit-learn's default
  ``gamma="scale"`` (which undoes a uniform rescaling, not a one-axis one), averaged over the
  tests.

Usage::

    python -m benchmarks.reproduce_thesis            # full run (about 15 minutes)
    python -m benchmarks.reproduce_thesis --quick    # smoke test, seconds

Writes ``reproduce_thesis.json``, ``thesis_fig7_4.png`` and ``separation_results.md`` into
``--out`` (default ``docs/``). ``--from-json`` rebuilds the markdown and figure from a saved
JSON without recomputing.

Parts: :mod:`~benchmarks.reproduce_thesis.table61` (Table 6.1),
:mod:`~benchmarks.reproduce_thesis.figure74` (Figure 7.4),
:mod:`~benchmarks.reproduce_thesis.report` (the markdown page and the outputs),
:mod:`~benchmarks.reproduce_thesis.cli` (settings and the entry).
"""
