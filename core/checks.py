"""The checks every model of the protocol passes, published so that a new model can run them.

Like ``river.checks`` and scikit-learn's ``check_estimator``: :func:`check_estimator` runs
every check of :data:`CHECKS` on fresh models from a factory, over a small stream ``(X, y)``
the caller supplies (dense rows, labels valid for the model). Each check raises
``AssertionError`` with what went wrong; none needs pytest.

- a fresh model predicts (before learning) and learns then predicts;
- ``learn_many`` over the stream, whole or cut anywhere, gives the model of the ``learn_one``
  loop, bit for bit;
- the state round-trips bit-exactly through ``set_state`` and ``from_state``, and loading
  copies;
- ``clone`` is unfitted and keeps the hyperparameters; the same seed and stream give the same
  model;
- bad rows, labels, batches and states raise ``ValueError`` and change nothing;
- empty batches are fine;
- probabilities (where the model gives them) are finite, in [0, 1] and sum to 1 per row.

>>> import numpy as np
>>> from core.linear import LinearPA
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((30, 3)); y = np.where(X[:, 0] > 0, 1, -1)
>>> check_estimator(lambda: LinearPA(n_features=3), X, y)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.base import Estimator
from core.registry import from_state, state_digest

__all__ = [
    "CHECKS",
    "check_bad_input",
    "check_bad_state",
    "check_clone_and_determinism",
    "check_empty_batch",
    "check_estimator",
    "check_learn_many",
    "check_learn_predict",
    "check_probabilities",
    "check_state_round_trip",
    "digest",
]

#: labels that no model of the stream's kind accepts (the default of ``bad_labels``)
BAD_LABELS = (0, 2, "spam", True, None)
#: rows no model accepts, for a model of ``n`` features
BAD_ROWS: Callable[[int], list] = lambda n: [  # noqa: E731
    np.full(n, np.nan),
    np.r_[np.ones(n - 1), np.inf],
    np.ones(n + 1),
    np.ones(max(n - 1, 0)),
    ([n], [1.0]),
    ([-1], [1.0]),
    ([0], [np.nan]),
    {"a": float("nan")},
    {"a": [1, 2]},
    "not an example",
]


def digest(model: Estimator) -> str:
    """``state_digest`` of a model's state: equal iff the states are equal."""
    return state_digest(model.get_state())


def _raises(error: type[Exception], call: Callable, *args) -> None:
    try:
        call(*args)
    except error:
        return
    raise AssertionError(f"{getattr(call, '__name__', call)}{args!r:.120} did not raise {error}")


def _labels_for_batch(y: list):
    """Labels as a batch takes them (strings as an object array, like a caller's column)."""
    return np.asarray(y, dtype=object) if isinstance(y[0], str) else y


def _learned(factory, X, y) -> Estimator:
    model = factory()
    for x_i, y_i in zip(X, y, strict=True):
        model.learn_one(x_i, y_i)
    return model


def check_learn_predict(factory, X, y, **_) -> None:
    """A fresh model predicts; after learning the stream, predictions and scores are finite
    and ``predict_one`` agrees with ``predict_many``."""
    fresh = factory()
    assert len(fresh.predict_many(X)) == X.shape[0]
    fresh.predict_one(X[0])
    model = _learned(factory, X, y)
    predictions = model.predict_many(X)
    assert len(predictions) == X.shape[0]
    for x, predicted in zip(X[:5], predictions[:5], strict=True):
        assert np.array_equal(model.predict_one(x), predicted), "predict_one != predict_many"
    assert np.all(np.isfinite(np.asarray(model.score_many(X)))), "scores are not finite"


def check_learn_many(factory, X, y, **_) -> None:
    """``learn_many`` over the stream, whole or cut at random places, gives the ``learn_one``
    loop's model bit for bit."""
    reference = digest(_learned(factory, X, y))
    whole = factory()
    whole.learn_many(X, _labels_for_batch(y))
    assert digest(whole) == reference, "learn_many differs from the learn_one loop"
    n_rows = X.shape[0]
    cuts = np.sort(
        np.random.default_rng(0).choice(np.arange(1, n_rows), min(5, n_rows - 1), replace=False)
    )
    split = factory()
    for start, stop in zip(np.r_[0, cuts], np.r_[cuts, n_rows], strict=True):
        split.learn_many(X[start:stop], _labels_for_batch(y[start:stop]))
    assert digest(split) == reference, "learn_many in chunks differs from the learn_one loop"


def check_state_round_trip(factory, X, y, **_) -> None:
    """``get_state`` gives C-contiguous arrays; ``set_state`` and ``from_state`` rebuild the
    model bit for bit; a loaded state is a copy."""
    model = _learned(factory, X, y)
    scores = np.asarray(model.score_many(X))
    state = model.get_state()
    for array in state["arrays"].values():
        assert isinstance(array, np.ndarray) and array.flags.c_contiguous
    other = factory()
    other.set_state(state)
    assert digest(other) == digest(model), "set_state did not restore the model"
    assert np.array_equal(np.asarray(other.score_many(X)), scores)
    assert digest(from_state(state)) == digest(model), "from_state did not rebuild the model"
    other.learn_one(X[0], y[0])
    assert digest(model) == state_digest(state), "a loaded state shares memory with its source"


def check_clone_and_determinism(factory, X, y, **_) -> None:
    """``clone`` is unfitted with the same hyperparameters; the same factory (seed) and stream
    give the same model."""
    model = _learned(factory, X, y)
    clone = model.clone()
    assert type(clone) is type(model)
    assert digest(clone) == digest(factory()), "clone is not a fresh model"
    assert clone.get_params().keys() == model.get_params().keys()
    assert digest(_learned(factory, X, y)) == digest(model), "learning is not deterministic"


def check_bad_input(factory, X, y, *, bad_labels: Sequence = BAD_LABELS, **_) -> None:
    """Bad rows, labels and batches raise ``ValueError`` and leave the model unchanged."""
    model = _learned(factory, X, y)
    reference = digest(model)
    for bad in BAD_ROWS(X.shape[1]):
        _raises(ValueError, model.learn_one, bad, y[0])
        _raises(ValueError, model.predict_one, bad)
    for label in bad_labels:
        _raises(ValueError, model.learn_one, X[0], label)
    bad_batch = X[:4].copy()
    bad_batch[3, 0] = np.nan
    _raises(ValueError, model.learn_many, bad_batch, y[:4])
    _raises(ValueError, model.learn_many, X[:4], y[:3])
    _raises(ValueError, model.learn_many, X[:4], [y[0], y[1], y[2], bad_labels[0]])
    assert digest(model) == reference, "a refused input changed the model"


#: what no count of a state holds: negative, fractional, beyond int64, a boolean, not a number
BAD_COUNTS = (-1, -1.5, 0.5, 2**63, 10**40, 10**400, True, float("nan"), "3", None)
#: what no float scalar of a state holds
BAD_FLOATS = (float("nan"), float("inf"), 10**400, True, "0.5", None)


def check_bad_state(factory, X, y, **_) -> None:
    """A state with a wrong shape or dtype (bytes, objects), a count that is not an integer in
    [0, 2**63), a float scalar that is not finite, or missing parts is refused with
    ``ValueError`` and nothing is written (``set_state`` and ``set_scalars``)."""
    model = _learned(factory, X, y)
    reference = digest(model)

    state = model.get_state()  # (set_state reads its state, never writes it)

    def refused(broken) -> None:
        _raises(ValueError, model.set_state, broken)
        assert digest(model) == reference, "a refused state changed the model"

    name, array = next(iter(state["arrays"].items()))
    for wrong in (array[..., :-1].copy(), np.ones_like(array, np.uint8), array.astype(object)):
        refused({**state, "arrays": {**state["arrays"], name: wrong}})
    refused({k: v for k, v in state.items() if k != "scalars"})
    for key, value in state["scalars"].items():
        for bad in BAD_COUNTS if isinstance(value, int) else BAD_FLOATS:
            scalars = {**state["scalars"], key: bad}
            refused({**state, "scalars": scalars})
            _raises(ValueError, model.set_scalars, scalars)
            assert digest(model) == reference, "refused scalars changed the model"


def check_empty_batch(factory, X, y, **_) -> None:
    """Empty batches predict nothing and learn nothing."""
    model = _learned(factory, X, y)
    reference = digest(model)
    assert len(model.predict_many(X[:0])) == 0
    model.learn_many(X[:0], y[:0])
    assert digest(model) == reference


def check_probabilities(factory, X, y, **_) -> None:
    """Where the model gives probabilities: one row per example, finite, in [0, 1], summing
    to 1, and ``predict_proba_one`` agrees with ``predict_proba_many``."""
    model = _learned(factory, X, y)
    if not callable(getattr(model, "predict_proba_many", None)):
        return
    try:
        probabilities = np.asarray(model.predict_proba_many(X))
    except ValueError:  # a configuration without probabilities (e.g. a regression task)
        return
    assert probabilities.shape[0] == X.shape[0]
    assert np.all(np.isfinite(probabilities)) and np.all(
        (0 <= probabilities) & (probabilities <= 1)
    )
    if probabilities.ndim == 2 and getattr(model, "classes_", None) is not None:
        assert np.allclose(probabilities.sum(axis=1), 1.0), "probabilities do not sum to 1"
    one = np.asarray(model.predict_proba_one(X[0]))
    assert np.allclose(one, probabilities[0], rtol=1e-12, atol=1e-15)


#: every check, in the order :func:`check_estimator` runs them
CHECKS = (
    check_learn_predict,
    check_learn_many,
    check_state_round_trip,
    check_clone_and_determinism,
    check_bad_input,
    check_bad_state,
    check_empty_batch,
    check_probabilities,
)


def check_estimator(factory: Callable[[], Estimator], X, y, *, bad_labels=BAD_LABELS) -> None:
    """Run every check of :data:`CHECKS` on models from ``factory``.

    Parameters
    ----------
    factory : callable
        Returns a fresh model each call (same hyperparameters and seed).
    X : ndarray of shape (n_rows, n_features)
        A small dense stream (at least 5 rows).
    y : sequence
        Labels (or targets) valid for the model, one per row.
    bad_labels : sequence
        Labels the model must refuse (the first is also used inside a batch).

    Raises
    ------
    AssertionError
        Naming the first property that does not hold.
    """
    X = np.asarray(X, dtype=float)
    y = list(y)
    for check in CHECKS:
        check(factory, X, y, bad_labels=bad_labels)
