import numpy as np
import pytest
import scipy.sparse as sp

from core.features import (
    FeatureHasher,
    as_batch,
    as_row,
    batch_from_rows,
    check_n_features,
    first_overflowing_row,
    squared_norm,
)


def test_dense_row():
    indices, values = as_row([1.0, 0.0, 2.5], 3)
    np.testing.assert_array_equal(indices, [0, 1, 2])
    np.testing.assert_array_equal(values, [1.0, 0.0, 2.5])
    assert indices.dtype == np.int64 and values.dtype == np.float64
    assert not indices.flags.writeable
    for bad, message in (
        ([1.0, 2.0], "length 2, expected 3"),
        ([1.0, np.nan, 0.0], "index 1 is not finite"),
        (np.array([1.0, 0.0, np.inf]), "index 2 is not finite"),
        (np.ones((1, 3)), "1-D"),
        (["a", "b", "c"], "numbers"),
    ):
        with pytest.raises(ValueError, match=message):
            as_row(bad, 3)


def test_sparse_row_canonicalises_duplicates():
    indices, values = as_row(([5, 1, 5], [1.0, 2.0, 3.0]), 10)
    np.testing.assert_array_equal(indices, [1, 5])
    np.testing.assert_array_equal(values, [2.0, 4.0])
    for bad, message in (
        (([10], [1.0]), "index 10 .* out of range \\[0, 10\\)"),
        (([-1], [1.0]), "out of range"),
        (([1, 2], [1.0]), "2 indices but 1 values"),
        (([1], [np.nan]), "not finite"),
        (([1.5], [1.0]), "integers"),
        (([1e308, 1], [1e308, 1e308]), "out of range"),
    ):
        with pytest.raises(ValueError, match=message):
            as_row(bad, 10)
    # duplicates that overflow once summed are caught after canonicalisation
    with pytest.raises(ValueError, match="not finite"):
        as_row(([1, 1], [1.7e308, 1.7e308]), 10)
    empty = as_row(([], []), 10)
    assert empty[0].shape == (0,) and empty[0].dtype == np.int64


def test_named_features_hashing_is_stable_and_signed():
    hasher = FeatureHasher(2**20)
    a = hasher.transform_one({"age": 31.0, "country": "fr", "member": True})
    b = as_row({"member": True, "country": "fr", "age": 31.0}, 2**20)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert set(np.abs(a[1])) == {31.0, 1.0}
    # strings are one-hot: a different value lands in another bucket
    c = hasher.transform_one({"country": "de"})
    assert c[0][0] not in set(hasher.transform_one({"country": "fr"})[0])
    # signs are balanced over many names
    signs = [hasher.transform_one({f"f{i}": 1.0})[1][0] for i in range(2000)]
    assert abs(np.mean(signs)) < 0.1
    for bad, message in (
        ({"a": float("nan")}, "'a' is not finite"),
        ({"a": None}, "'a' must be a number"),
        ({"a": [1, 2]}, "must be a number"),
        ({1: 2.0}, "names must be strings"),
    ):
        with pytest.raises(ValueError, match=message):
            hasher.transform_one(bad)


def test_collisions_are_summed():
    hasher = FeatureHasher(1)
    indices, values = hasher.transform_one({"a": 1.0, "b": 2.0, "c": "x"})
    assert indices.tolist() == [0] and values.shape == (1,)


def test_a_dense_batch_holds_what_scipy_would():
    """The dense branch builds the CSR arrays itself: the same arrays, dtypes and order as
    ``scipy.sparse.csr_matrix(dense)``, with ``-0.0`` dropped, empty rows kept and any memory
    layout read in row-major order."""
    rng = np.random.default_rng(4)
    dense = rng.standard_normal((7, 5)) * (rng.random((7, 5)) < 0.4)
    dense[1] = 0.0
    dense[3, 2] = -0.0
    dense[:, 4] = 0.0
    for X in (
        dense,
        np.asfortranarray(dense),
        dense.astype(np.float32),
        dense[::2],
        dense[:0],
        dense[:1],
        dense[1:2],
        dense[3:4],
    ):
        batch = as_batch(X, 5)
        expected = sp.csr_matrix(np.asarray(X, dtype=np.float64))
        assert batch.indptr.dtype == batch.indices.dtype == np.int64
        assert batch.values.dtype == np.float64 and batch.values.flags.c_contiguous
        np.testing.assert_array_equal(batch.indptr, expected.indptr)
        np.testing.assert_array_equal(batch.indices, expected.indices)
        np.testing.assert_array_equal(batch.values, expected.data)


def test_batches_from_every_form_agree():
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((5, 4)) * (rng.random((5, 4)) < 0.5)
    from_dense = as_batch(dense, 4)
    from_sparse = as_batch(sp.csr_matrix(dense), 4)
    from_rows = as_batch([(np.flatnonzero(r), r[np.flatnonzero(r)]) for r in dense], 4)
    for batch in (from_sparse, from_rows):
        np.testing.assert_array_equal(batch.indptr, from_dense.indptr)
        np.testing.assert_array_equal(batch.indices, from_dense.indices)
        np.testing.assert_array_equal(batch.values, from_dense.values)
    assert from_dense.n_rows == 5
    row = from_dense.row(2)
    np.testing.assert_array_equal(row[1], dense[2][dense[2] != 0])
    assert as_batch(np.zeros((0, 4)), 4).n_rows == 0
    assert batch_from_rows([]).n_rows == 0
    for rows in ([from_dense.row(2)], [from_dense.row(2), from_dense.row(0)]):
        batch = batch_from_rows(rows)
        assert batch.indptr.dtype == from_dense.indptr.dtype and batch.n_rows == len(rows)
        for i, (indices, values) in enumerate(rows):
            np.testing.assert_array_equal(batch.row(i)[0], indices)
            np.testing.assert_array_equal(batch.row(i)[1], values)
    unsorted = sp.csr_matrix(
        (np.array([1.0, 2.0]), np.array([3, 1]), np.array([0, 2])), shape=(1, 4)
    )
    np.testing.assert_array_equal(as_batch(unsorted, 4).indices, [1, 3])


def test_bad_batches_name_the_row():
    dense = np.ones((3, 4))
    dense[2, 1] = np.nan
    with pytest.raises(ValueError, match="row 2: feature value at index 1"):
        as_batch(dense, 4)
    with pytest.raises(ValueError, match="3 columns, expected 4"):
        as_batch(np.ones((2, 3)), 4)
    with pytest.raises(ValueError, match="2-D"):
        as_batch(np.ones(4), 4)
    with pytest.raises(ValueError, match="row 1: "):
        as_batch([[1.0, 2.0, 3.0, 4.0], [1.0]], 4)
    bad_sparse = sp.csr_matrix(np.ones((2, 4)))
    bad_sparse.data[5] = np.inf
    with pytest.raises(ValueError, match="row 1: feature value"):
        as_batch(bad_sparse, 4)
    with pytest.raises(ValueError, match="shape"):
        as_batch(sp.csr_matrix(np.ones((2, 5))), 4)


def test_n_features_validation():
    assert check_n_features(3) == 3
    for bad in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError):
            check_n_features(bad)


def test_unreadable_example():
    with pytest.raises(ValueError, match="cannot read an example"):
        as_row("abc", 3)
    with pytest.raises(ValueError, match="cannot read an example"):
        as_row(3.0, 3)


def test_first_overflowing_row_against_a_numpy_reference():
    """The first row whose squared norm, summed in order, is not finite: finite squares
    whose sum overflows count, empty rows never do, -1 when every row is fine."""

    def reference(batch, start=0.0):
        for i in range(batch.n_rows):
            with np.errstate(over="ignore"):
                total = np.cumsum(np.concatenate(([start], batch.row(i)[1] ** 2)))
            if not np.isfinite(total[-1]):
                return i
        return -1

    rows = [
        (np.array([0, 1]), np.array([1.0, -2.0])),
        (np.array([], dtype=np.int64), np.array([])),
        (np.array([0, 1, 2]), np.array([1e154, 1e154, 1e154])),  # squares finite, sum not
        (np.array([3]), np.array([1e155])),  # the square itself overflows
        (np.array([3]), np.array([1e-300])),
    ]
    for order in ([0, 1, 2, 3, 4], [0, 1, 3, 2], [0, 1, 4], [4, 3], [1], []):
        batch = batch_from_rows([rows[k] for k in order])
        assert first_overflowing_row(batch) == reference(batch)
        # from 1.0, as the multiclass reductions check (the intercept's constant feature)
        assert first_overflowing_row(batch, 1.0) == reference(batch, 1.0)
    assert first_overflowing_row(batch_from_rows([rows[2]])) == 0
    assert first_overflowing_row(batch_from_rows([rows[0], rows[4]])) == -1


def test_squared_norm_of_any_layout():
    """Contiguous, transposed (a DoS buffer's U_/V_ views), strided and empty arrays."""
    rng = np.random.default_rng(0)
    buffer = rng.standard_normal((7, 6))
    cases = [
        buffer,
        buffer.T,
        buffer[:, ::2],
        buffer[::3],
        rng.standard_normal(5),
        rng.standard_normal((2, 3, 4)),
        np.zeros((0, 3)),
        np.float64(2.0) * np.ones(()),
    ]
    for array in cases:
        assert squared_norm(array) == pytest.approx(float(np.sum(np.square(array))), rel=1e-12)
