"""The seeded stratified splits of the Table 2 reproduction."""

import numpy as np

from benchmarks.reproduce_mofm.data import stratified_parts


def test_stratified_split_is_seeded_disjoint_and_balanced():
    y = np.repeat(np.arange(3), [40, 80, 120])
    parts = stratified_parts(y, (0.5, 0.25, 0.25), seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(240))
    for part, fraction in zip(parts, (0.5, 0.25, 0.25), strict=True):
        np.testing.assert_allclose(np.bincount(y[part]), fraction * np.array([40, 80, 120]))
    again = stratified_parts(y, (0.5, 0.25, 0.25), seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
