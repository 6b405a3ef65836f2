"""Figure 7.4: its data, its maps, and the invariance it shows."""

import numpy as np

from benchmarks.reproduce_thesis.cli import Settings
from benchmarks.reproduce_thesis.figure74 import random_affine, run_figure, two_classes


def test_two_classes_and_affine_maps():
    rng = np.random.default_rng(0)
    X, y = two_classes(rng, 100)
    radius = np.linalg.norm(X, axis=1)
    assert np.all(radius[y > 0] <= 1.0) and np.all(radius[y < 0] >= 1.0)
    assert np.sum(y > 0) == np.sum(y < 0) == 100
    M, shift = random_affine(rng)
    assert np.allclose(M, M.T) and np.all(np.linalg.eigvalsh(M) > 0) and shift.shape == (2,)


def test_the_ellipsoidal_classifier_is_invariant_and_the_svm_is_not():
    figure = run_figure(Settings(True, (), tests=2, exponents=(0.0, -3.0)))
    assert figure["maxsep_error_range_within_a_test"] == {"all": 0.0, "one": 0.0}
    svm = figure["mean_error"]["one"]["svm_gamma1"]
    assert svm[-1] > svm[0]
