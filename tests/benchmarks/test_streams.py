"""The shared streams: canonical, seeded, and read in every learner's form once."""

import numpy as np
import pytest

from benchmarks.streams import (
    A9A_FEATURES,
    Stream,
    hashed_stream,
    heavy_tailed_indices,
    load_a9a,
    mnist_stream,
    sparse_stream,
)


@pytest.mark.parametrize("uniform", [False, True])
def test_sparse_stream_is_canonical_and_seeded(uniform):
    stream = sparse_stream("s", 400, 30, 1 << 12, seed=3, uniform=uniform)
    again = sparse_stream("s", 400, 30, 1 << 12, seed=3, uniform=uniform)
    assert (stream.csr != again.csr).nnz == 0 and np.array_equal(stream.labels, again.labels)
    assert stream.csr.has_sorted_indices and stream.n_features == 1 << 12
    for i in range(stream.n_rows):
        indices, _ = stream.sparse_row(i)
        assert np.all(np.diff(indices) > 0)
    assert 25 < stream.mean_nnz <= 30 and set(np.unique(stream.labels)) == {-1.0, 1.0}
    assert ("uniform" if uniform else "heavy-tailed") in stream.description


def test_heavy_tailed_ids_favour_low_ranks():
    rng = np.random.default_rng(0)
    ids = heavy_tailed_indices(rng, (20_000, 1), 1 << 16, np.arange(1 << 16)).ravel()
    assert ids.min() >= 0 and ids.max() < 1 << 16
    # P(rank < 256) = log(2) / log(257), against 256 / 2^16 for uniform ids
    assert np.mean(ids < 256) == pytest.approx(np.log(2) / np.log(257), abs=0.01)


def test_hashed_stream():
    stream = hashed_stream(500, seed=1)
    X, y = stream.csr, stream.labels
    assert X.shape == (500, 2**20) and np.all(X.data == 1.0)
    assert 39 <= X.nnz / 500 <= 40 and set(np.unique(y)) == {-1.0, 1.0}
    assert X.has_sorted_indices


def test_views_are_built_once_and_rows_are_ours():
    stream = sparse_stream("s", 20, 5, 64, seed=0)
    calls = []
    first = stream.view("x", lambda s: calls.append(1) or [s.n_rows])
    assert stream.view("x", lambda s: calls.append(1)) is first and calls == [1]
    rows = stream.rows()
    assert all(i.dtype == np.int64 and v.dtype == np.float64 for i, v in rows)
    assert stream.int_labels() == [int(v) for v in stream.labels]
    stream.drop_views()
    assert stream.view("x", lambda s: "rebuilt") == "rebuilt"
    head = stream.prefix(5)
    assert head.n_rows == 5 and (head.csr != stream.csr[:5]).nnz == 0
    kept = Stream.from_rows("r", rows, stream.labels, 64)
    assert all(a is b for a, b in zip(kept.rows(), rows, strict=True))
    assert (kept.csr != stream.csr).nnz == 0


def test_data_set_streams():
    digits = mnist_stream(50)
    assert digits.dense.shape == (50, 784) and 0.0 <= digits.dense.min() <= digits.dense.max() <= 1
    assert digits.rows()[0].dtype == np.float64 and digits.rows()[0].shape == (784,)
    X, y = load_a9a("a9a.t", n_rows=100)
    assert X.shape == (100, A9A_FEATURES) and set(np.unique(y)) == {-1.0, 1.0}
