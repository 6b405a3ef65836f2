"""The feedback log's record format (``service.durability.feedback_log``): round trips,
refusal of truncated or foreign records; ``batch`` and ``same``, used by the logs' tests."""

from __future__ import annotations

import numpy as np
import pytest

from core.features import CSRBatch
from service.durability.feedback_log import LogCorrupt, decode_record, encode_record


def batch(seed: int, n_rows: int = 3) -> tuple[CSRBatch, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, n_rows)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.concatenate([np.sort(rng.choice(50, c, replace=False)) for c in counts])
    values = rng.standard_normal(indptr[-1])
    return CSRBatch(indptr, indices.astype(np.int64), values), rng.integers(0, 2, n_rows)


def same(a: CSRBatch, b: CSRBatch) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in ("indptr", "indices", "values")
    )


@pytest.mark.parametrize("targets", [np.array([0, 1, 1]), np.array([0.5, -1e300, np.pi])])
def test_record_round_trip(targets):
    rows, _ = batch(0)
    decoded, decoded_targets, at = decode_record(encode_record(rows, targets, at=12.5))
    assert same(rows, decoded) and at == 12.5
    assert decoded_targets.dtype == targets.dtype
    assert np.array_equal(decoded_targets, targets)


def test_empty_batch_round_trip():
    empty = CSRBatch(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0))
    decoded, targets, _ = decode_record(encode_record(empty, np.zeros(0, np.int64)))
    assert decoded.n_rows == 0 and targets.shape == (0,)


@pytest.mark.parametrize("cut", [0, 5, 20, -1])
def test_truncated_or_foreign_records_are_refused(cut):
    record = encode_record(*batch(1))
    with pytest.raises(LogCorrupt):
        decode_record(record[:cut])
    with pytest.raises(LogCorrupt):
        decode_record(b"XXXX" + record[4:])
