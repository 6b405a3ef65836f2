"""The generic suite every model passes (CONVENTIONS.md, tests/).

``check_estimator(factory, X, y)`` runs every check on a fresh model from ``factory()``:
learn then predict from a fresh model, bit-exact state round-trip (also through
``from_state``), ``clone`` is unfitted, same seed and stream give identical models, one-example
and batch learning agree, and bad inputs raise ``ValueError`` leaving the state unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.base import from_state, state_digest


def digest(model) -> str:
    return state_digest(model.get_state())


def check_estimator(factory, X: np.ndarray, y, bad_labels=(0, 2, "spam", True, None)):
    """Run the generic suite. X: dense 2-D array; y: labels valid for the model."""
    n_rows, n_features = X.shape
    y = list(y)

    # predict before learning works and is deterministic
    fresh = factory()
    before = fresh.predict_many(X)
    assert len(before) == n_rows
    fresh.predict_one(X[0])

    # learn then predict
    model = factory()
    for x_i, y_i in zip(X, y, strict=True):
        model.learn_one(x_i, y_i)
    predictions = model.predict_many(X)
    assert len(predictions) == n_rows
    for x, predicted in zip(X[:5], predictions[:5], strict=True):
        assert np.array_equal(model.predict_one(x), predicted)  # labels or output vectors
    scores = np.asarray(model.score_many(X))
    assert np.all(np.isfinite(scores))

    # learn_many over the same stream gives the identical model
    batch_model = factory()
    batch_model.learn_many(X, np.asarray(y, dtype=object) if isinstance(y[0], str) else y)
    assert digest(batch_model) == digest(model)

    # ... and so does learn_many over random splits of the stream (batch boundaries)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, n_rows), size=min(5, n_rows - 1), replace=False))
    split_model = factory()
    for start, stop in zip(np.r_[0, cuts], np.r_[cuts, n_rows], strict=True):
        chunk = y[start:stop]
        split_model.learn_many(
            X[start:stop], np.asarray(chunk, dtype=object) if isinstance(y[0], str) else chunk
        )
    assert digest(split_model) == digest(model)

    # state round-trip is bit-exact, through set_state and from_state
    state = model.get_state()
    for array in state["arrays"].values():
        assert isinstance(array, np.ndarray) and array.flags.c_contiguous
    other = factory()
    other.set_state(state)
    assert digest(other) == digest(model)
    assert np.array_equal(np.asarray(other.score_many(X)), scores)
    rebuilt = from_state(state)
    assert digest(rebuilt) == digest(model)
    # the loaded state is a copy: learning more does not alias the source
    other.learn_one(X[0], y[0])
    assert digest(model) == state_digest(state)

    # clone is unfitted and keeps hyperparameters
    clone = model.clone()
    assert type(clone) is type(model)
    assert digest(clone) == digest(factory())
    assert clone.get_params().keys() == model.get_params().keys()

    # determinism: same factory (seed), same stream -> identical model
    again = factory()
    for x_i, y_i in zip(X, y, strict=True):
        again.learn_one(x_i, y_i)
    assert digest(again) == digest(model)

    # bad inputs raise ValueError and change nothing
    reference = digest(model)
    bad_rows = [
        np.full(n_features, np.nan),
        np.r_[np.ones(n_features - 1), np.inf],
        np.ones(n_features + 1),
        np.ones(max(n_features - 1, 0)),
        ([n_features], [1.0]),
        ([-1], [1.0]),
        ([0], [np.nan]),
        {"a": float("nan")},
        {"a": [1, 2]},
        "not an example",
    ]
    for bad in bad_rows:
        with pytest.raises(ValueError):
            model.learn_one(bad, y[0])
        with pytest.raises(ValueError):
            model.predict_one(bad)
    for label in bad_labels:
        with pytest.raises(ValueError):
            model.learn_one(X[0], label)
    bad_batch = X[:4].copy()
    bad_batch[3, 0] = np.nan
    with pytest.raises(ValueError):
        model.learn_many(bad_batch, y[:4])
    with pytest.raises(ValueError):
        model.learn_many(X[:4], y[:3])
    with pytest.raises(ValueError):
        model.learn_many(X[:4], [y[0], y[1], y[2], bad_labels[0]])
    assert digest(model) == reference

    # a state for other hyperparameters or with wrong shapes is refused, nothing written
    broken = model.get_state()
    name = next(iter(broken["arrays"]))
    broken["arrays"][name] = broken["arrays"][name][..., :-1].copy()
    with pytest.raises(ValueError):
        model.set_state(broken)
    assert digest(model) == reference

    # counters must be non-negative integers
    broken = model.get_state()
    if broken["scalars"]:
        name = next(iter(broken["scalars"]))
        broken["scalars"][name] = -1.5
        with pytest.raises(ValueError):
            model.set_state(broken)
        assert digest(model) == reference

    # empty batches are fine
    assert len(model.predict_many(X[:0])) == 0
    model.learn_many(X[:0], y[:0])
    assert digest(model) == reference
