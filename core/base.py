"""The one model protocol, and the parameter / state plumbing every model shares.

Every online model implements

- ``learn_one(x, y)`` / ``learn_many(X, y)``: learn from one example or a batch, in order,
  returning a :class:`Step` / :class:`Steps` (what the model predicted before each update);
- ``predict_one(x)`` / ``predict_many(X)``: labels; ``score_one`` / ``score_many``: the raw
  decision values;
- ``get_state()`` / ``set_state(state)``: plain contiguous numpy arrays plus scalars (no
  pickles, no numba types), checked for shapes and dtypes on the way back in;
- ``clone()``: a fresh, unfitted model with the same hyperparameters.

Batch models (:class:`BatchClassifier`) replace ``learn_one`` / ``learn_many`` by ``fit``.

Hyperparameters are keyword-only constructor arguments stored unchanged under their own
names; learned arrays end in ``_`` and are listed in the class attribute ``_arrays``
(learned scalars in ``_scalars``). Composite models (one-vs-one, averaging) list their
sub-models through ``_children()``; their arrays are flattened with dotted prefixes. Every
model class registers itself in ``core.registry``, which rebuilds models from their states.

>>> from core.linear import LinearPA
>>> from core.registry import from_state
>>> model = LinearPA(n_features=2, classes=["ham", "spam"])
>>> step = model.learn_one([1.0, 0.0], "spam")
>>> step.predicted, step.loss, model.predict_one([1.0, 0.0])
('ham', 1.0, 'spam')
>>> from_state(model.get_state()).score_one([1.0, 0.0])
1.0
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from core.config import INDEX
from core.features import CSRBatch, Row, as_batch, as_row
from core.labels import LabelMap, check_binary_label, check_binary_labels, check_targets
from core.registry import from_state, params_spec, plain_value, register, with_defaults
from core.state import state_array, state_scalar

__all__ = [
    "BatchClassifier",
    "BinaryClassifier",
    "BinaryModel",
    "Estimator",
    "PartialBatchError",
    "Step",
    "Steps",
    "steps_from",
]


class Step(NamedTuple):
    """What one ``learn_one`` did, measured before the update (progressive validation).

    Attributes
    ----------
    score : float or ndarray
        What ``score_one(x)`` returned before the update: a float for a binary or regression
        model, an array (one entry per class or output) for a multi-output one.
    loss : float
        The model's loss on the example before the update (the hinge loss
        ``max(0, 1 - y score)`` of the passive-aggressive models, the perceptron loss
        ``max(0, -y score)``, PQR's log or squared loss, a reduction's sum over its binary
        models, a multi-output model's loss).
    aggressive : bool
        Whether the example changed the model.
    n_aggressive : int
        How many binary models made an update (0 or 1 for a single model).
    predicted : label, float or None
        What ``predict_one(x)`` returned before the update (None for a model of target
        vectors).

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> LinearPA(n_features=1).learn_one([1.0], 1)
    Step(score=0.0, loss=1.0, aggressive=True, n_aggressive=1, predicted=-1)
    """

    score: Any
    loss: float
    aggressive: bool
    n_aggressive: int = 0
    predicted: Any = None

    @property
    def scores(self):
        """``score``, under the name multi-output callers use."""
        return self.score


@dataclass(frozen=True)
class Steps:
    """What one ``learn_many`` did, per example (the same meaning as :class:`Step`).

    Attributes
    ----------
    scores : ndarray of shape (n,) or (n, n_outputs), or None
        Scores before each update; None when the learner does not compute them (one-vs-one
        learns a batch pair by pair).
    losses : ndarray of shape (n,)
    aggressive : ndarray of bool, shape (n,)
    aggressive_counts : ndarray of int64, shape (n,)
        Binary models updated by each example (``aggressive`` as 0 / 1 for a single model).
    predicted : ndarray of shape (n,), or None
        Predictions before each update, when the learner computes them.

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> steps = LinearPA(n_features=1).learn_many([[1.0], [1.0]], [1, 1])
    >>> steps.scores, steps.aggressive, steps.n_aggressive, steps.predicted
    (array([0., 1.]), array([ True, False]), 1, array([-1,  1]))
    """

    scores: np.ndarray | None
    losses: np.ndarray
    aggressive: np.ndarray
    aggressive_counts: np.ndarray | None = None
    predicted: np.ndarray | None = None

    def __post_init__(self):
        if self.aggressive_counts is None:
            object.__setattr__(self, "aggressive_counts", self.aggressive.astype(INDEX))

    @property
    def n_aggressive(self) -> int:
        """Updates made by the whole call (binary models times examples)."""
        return int(np.sum(self.aggressive_counts))

    def __len__(self) -> int:
        return self.losses.shape[0]


class PartialBatchError(ValueError):
    """A batch refused part-way: a row's score, squared norm or gradient overflows float64.

    The rows before it were learned (in order, as ``learn_one`` would have), that row and the
    rest were not. A wrapper that learns from the model's steps (a calibrator, a running
    average) accounts for exactly the rows in ``learned``.

    Attributes
    ----------
    learned : Steps
        The steps of the rows that were learned: the first ``len(learned)`` rows.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = DoSClassifier(n_features=1, rank=1, init_scale=1e3)  # scores ~1e6 x^2
    >>> try:
    ...     model.learn_many([[1.0], [2.0], [1e153], [1.0]], [1, -1, 1, 1])
    ... except PartialBatchError as error:
    ...     print(error)
    ...     len(error.learned), model.n_seen_
    row 2: the example's squared norm or score overflows float64 (2 earlier rows were learned)
    (2, 2)
    """

    def __init__(self, message: str, learned: Steps):
        super().__init__(message)
        self.learned = learned


class Estimator:
    """Base class of every model: hyperparameters, cloning and state.

    Subclasses declare their learned arrays in ``_arrays`` and learned scalars in
    ``_scalars``, and their sub-models through ``_children()``; this class turns them into
    ``get_state`` / ``set_state`` and registers the class in ``core.registry.MODEL_KINDS`` so
    that ``core.registry.from_state`` can rebuild it.

    Attributes
    ----------
    averageable : bool
        Whether the element-wise (aligned) running average of two states is a meaningful
        model (``core.averaging.Averaged`` refuses models that say no, e.g. FTRL's z and n).

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> model = LinearPA(n_features=3, mode="pa1", C=0.5)
    >>> model.get_params()["C"], model.clone().n_seen_
    (0.5, 0)
    """

    _arrays: ClassVar[tuple[str, ...]] = ()
    _scalars: ClassVar[tuple[str, ...]] = ()
    #: arrays whose rows along the given axis are the features (n_features + 1 of them,
    #: the bias last), of which learning an example changes only its non-zeros' and the
    #: bias's (``feature_axes``)
    _feature_axes: ClassVar[dict[str, int]] = {}
    averageable: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register(cls)

    # -- hyperparameters ---------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, as stored.

        Returns
        -------
        dict
            ``{name: value}`` for every keyword-only constructor argument.

        Examples
        --------
        >>> from core.dos import DoSClassifier
        >>> DoSClassifier(n_features=4, rank=2).get_params()["rank"]
        2
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def clone(self) -> Estimator:
        """A fresh, unfitted model with the same hyperparameters.

        Sub-models are cloned too and other parameters deep-copied, so that clones share
        nothing mutable.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1)
        >>> _ = model.learn_one([1.0], 1)
        >>> model.w_, model.clone().w_
        (array([0.5, 0.5]), array([0., 0.]))
        """
        params = {
            k: v.clone() if isinstance(v, Estimator) else copy.deepcopy(v)
            for k, v in self.get_params().items()
        }
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __reduce__(self):
        """Pickle and copy through the state, so that arrays that are views of one buffer (the
        DoS ``U_`` and ``V_``) come back as views of one buffer."""
        return (from_state, (self.get_state(),))

    # -- state ---------------------------------------------------------------------------
    def _children(self) -> list[tuple[str, Estimator]]:
        """The sub-models with their state prefixes: the hook a composite model overrides
        (read them through :meth:`children`)."""
        return []

    def children(self) -> list[tuple[str, Estimator]]:
        """The sub-models of a composite model, with the prefixes of their entries in its
        state (``"live"``, ``"0"``, ...); empty for a plain model.

        Returns
        -------
        list of (str, Estimator)

        Examples
        --------
        >>> from core.calibration import Calibrated
        >>> from core.linear import LinearPA
        >>> [prefix for prefix, _ in Calibrated(model=LinearPA(n_features=1)).children()]
        ['model', 'calibrator']
        """
        return self._children()

    def is_averageable(self) -> bool:
        """Whether this model and every sub-model are ``averageable`` (what
        ``core.averaging.Averaged`` requires of the model it averages).

        Examples
        --------
        >>> from core.calibration import Calibrated
        >>> from core.linear import LinearPA
        >>> Calibrated(model=LinearPA(n_features=1), method="isotonic").is_averageable()
        False
        """
        return self.averageable and all(child.is_averageable() for _, child in self._children())

    def get_state(self, order: str = "C") -> dict[str, Any]:
        """The learned state: ``{"kind", "params", "arrays", "scalars"}``.

        Parameters
        ----------
        order : {"C", "K"}
            ``"C"`` copies every array C-contiguous; ``"K"`` copies each array in its own
            memory layout (a plain memory copy, several times faster for the transposed views
            of DoS models): the same values, for a capture taken under a lock and made
            contiguous after it.

        Returns
        -------
        dict
            ``params`` is JSON-serialisable (sub-models are written as ``{"kind", "params"}``),
            ``arrays`` maps names to copies, ``scalars`` maps names to ints / floats.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> state = LinearPA(n_features=2).get_state()
        >>> state["kind"], state["arrays"]["w_"], state["scalars"]
        ('LinearPA', array([0., 0., 0.]), {'n_seen_': 0, 'n_updates_': 0})
        """
        if order not in ("C", "K"):
            raise ValueError(f"order must be 'C' or 'K', got {order!r}")
        arrays = {name: np.array(array, order=order, copy=True) for name, array in self.arrays()}
        return {**self.get_state_meta(), "arrays": arrays}

    def get_state_meta(self) -> dict[str, Any]:
        """``get_state()`` without the arrays: ``kind``, ``params`` and every scalar (sub-models'
        with their dotted prefixes); copies nothing.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> LinearPA(n_features=2).get_state_meta()["scalars"]
        {'n_seen_': 0, 'n_updates_': 0}
        """
        return {
            "kind": type(self).__name__,
            "params": params_spec(self),
            "scalars": self._all_scalars(),
        }

    def _all_scalars(self) -> dict[str, Any]:
        scalars = {name: plain_value(getattr(self, name)) for name in self._scalars}
        for prefix, child in self._children():
            scalars.update({f"{prefix}.{k}": v for k, v in child._all_scalars().items()})
        return scalars

    def arrays(self):
        """Yield ``(name, array)`` for every learned array, sub-models' with their dotted
        prefixes, without copying (read them under the model's lock).

        Examples
        --------
        >>> from core.dos import DoSClassifier
        >>> [name for name, _ in DoSClassifier(n_features=2).arrays()]
        ['U_', 'V_']
        """
        for name in self._arrays:
            yield name, getattr(self, name)
        for prefix, child in self._children():
            for name, array in child.arrays():
                yield f"{prefix}.{name}", array

    def feature_axes(self) -> dict[str, int]:
        """The learned arrays (named as in ``arrays()``) that an example changes only in
        the rows of its non-zero features and of the bias, with the axis of those rows
        (of length ``n_features + 1``, the bias last). Learning from a sparse example
        leaves every other row of them bit for bit as it was: a copy of the model kept up
        to date needs only those rows (the service's delta publication). Arrays not
        listed may change anywhere.

        Examples
        --------
        >>> from core.dos import DoSClassifier
        >>> DoSClassifier(n_features=2).feature_axes()
        {'U_': 1, 'V_': 1}
        """
        axes = dict(self._feature_axes)
        for prefix, child in self._feature_children():
            axes.update({f"{prefix}.{name}": axis for name, axis in child.feature_axes().items()})
        return axes

    def _feature_children(self) -> list[tuple[str, Estimator]]:
        """The sub-models whose ``feature_axes`` are this model's: those that learn the
        examples themselves (all of them, unless a model says otherwise)."""
        return self._children()

    def set_scalars(self, scalars: dict[str, Any]) -> None:
        """Load the ``scalars`` of a state (every one, sub-models' dotted) without touching
        the arrays, checked as ``set_state`` checks them: for a model whose arrays were
        written in place, row by row (``feature_axes``).

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1)
        >>> model.set_scalars({"n_seen_": 3, "n_updates_": 2})
        >>> model.n_seen_
        3
        """
        if not isinstance(scalars, dict):
            raise ValueError(f"scalars are a dict, got {type(scalars).__name__}")
        writes = self._check_scalars(scalars)
        unknown = set(scalars) - {_dotted(prefix, name) for prefix, _, name, _ in writes}
        if unknown:
            raise ValueError(f"unknown scalars: {sorted(unknown)[:5]}")
        for _, target, name, value in writes:
            setattr(target, name, value)
        for target in {id(t): t for _, t, _, _ in writes}.values():
            target._state_loaded()

    def _check_scalars(self, scalars: dict, prefix: str = "") -> list:
        """``(prefix, model, name, value)`` for every scalar of the model and its sub-models,
        checked (ValueError if one is missing or is not a valid value)."""
        writes = []
        for name in self._scalars:
            key = _dotted(prefix, name)
            if key not in scalars:
                raise ValueError(f"state misses scalar {key!r}")
            value = state_scalar(key, scalars[key], getattr(self, name))
            writes.append((prefix, self, name, value))
        for child_prefix, child in self._children():
            writes += child._check_scalars(scalars, _dotted(prefix, child_prefix))
        return writes

    def set_state(self, state: dict[str, Any]) -> None:
        """Load a state from ``get_state``; everything is checked before anything is written.

        A state written before a hyperparameter existed loads when the model has that
        hyperparameter at its default value.

        Parameters
        ----------
        state : dict
            ``get_state()``'s output for the same kind and hyperparameters.

        Raises
        ------
        ValueError
            For another kind or other hyperparameters, a missing, unknown or non-finite
            entry, or an array of another shape or dtype; the model is then unchanged.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> source = LinearPA(n_features=1)
        >>> _ = source.learn_one([2.0], 1)
        >>> target = LinearPA(n_features=1)
        >>> target.set_state(source.get_state())
        >>> target.score_one([2.0]) == source.score_one([2.0])
        True
        """
        if not isinstance(state, dict):
            raise ValueError(f"a state is a dict, got {type(state).__name__}")
        if state.get("kind") != type(self).__name__:
            raise ValueError(f"state is for {state.get('kind')!r}, not {type(self).__name__}")
        if with_defaults(state.get("params"), type(self)) != params_spec(self):
            raise ValueError("state was made with different hyperparameters")
        arrays, scalars = state.get("arrays"), state.get("scalars")
        if not isinstance(arrays, dict) or not isinstance(scalars, dict):
            raise ValueError("a state holds its arrays and scalars as dicts")
        writes = self._check_state(arrays, scalars)
        for target, name, value in writes:
            if isinstance(value, np.ndarray):
                getattr(target, name)[...] = value
            else:
                setattr(target, name, value)
        for target in {id(target): target for target, _, _ in writes}.values():
            target._state_loaded()

    def _state_loaded(self) -> None:
        """Called after ``set_state`` wrote this model's entries (drop derived caches)."""

    def _check_state(self, arrays: dict, scalars: dict) -> list[tuple[Estimator, str, Any]]:
        expected_arrays = set(self._arrays)
        expected_scalars = set(self._scalars)
        writes: list[tuple[Estimator, str, Any]] = []
        for name in self._arrays:
            if name not in arrays:
                raise ValueError(f"state misses array {name!r}")
            current = getattr(self, name)
            value = state_array(name, arrays[name], current.dtype, current.shape)
            writes.append((self, name, value))
        for name in self._scalars:
            if name not in scalars:
                raise ValueError(f"state misses scalar {name!r}")
            writes.append((self, name, state_scalar(name, scalars[name], getattr(self, name))))
        for prefix, child in self._children():
            cut = len(prefix) + 1
            child_arrays = {k[cut:]: v for k, v in arrays.items() if k.startswith(prefix + ".")}
            child_scalars = {k[cut:]: v for k, v in scalars.items() if k.startswith(prefix + ".")}
            expected_arrays |= {f"{prefix}.{k}" for k in child_arrays}
            expected_scalars |= {f"{prefix}.{k}" for k in child_scalars}
            writes += child._check_state(child_arrays, child_scalars)
        unknown = (set(arrays) - expected_arrays) | (set(scalars) - expected_scalars)
        if unknown:
            raise ValueError(f"state has unknown entries: {sorted(unknown)[:5]}")
        return writes


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# =============================================================================================
# Binary models: scores, labels and the two ways of learning
# =============================================================================================
class BinaryModel(Estimator):
    """Scoring and labels of a model that separates two classes.

    The model learns ``-1`` for ``classes[0]`` and ``+1`` for ``classes[1]``, predicts
    ``classes[1]`` when its score is ``> 0`` and ``classes[0]`` otherwise (a zero model says
    ``classes[0]``). Without ``classes`` the labels are ``-1`` and ``+1`` themselves.
    Subclasses implement :meth:`score_row` and :meth:`score_batch` over validated rows and
    batches: the hooks that wrappers (``core.calibration.Calibrated``, the reductions) call on
    what they validated once.

    Attributes
    ----------
    classes_ : tuple
        The two labels, ``(-1, 1)`` without ``classes``.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> model = DoSClassifier(n_features=2, classes=[False, True])
    >>> model.classes_, model.predict_one([0.0, 0.0]) in (False, True)
    ((False, True), True)
    """

    n_features: int
    classes_: tuple = (-1, 1)
    _label_map: LabelMap | None = None

    def _init_classes(self, classes) -> None:
        """Store the ``classes`` hyperparameter (None: labels -1 / +1) and its label map."""
        self.classes = classes
        if classes is None:
            self._label_map = None
            self.classes_ = (-1, 1)
            self._label_array = np.array([-1, 1], dtype=INDEX)
        else:
            self._label_map = LabelMap(classes)
            if len(self._label_map) != 2:
                raise ValueError(
                    f"a binary model takes 2 classes, got {len(self._label_map)} (use "
                    "core.one_vs_rest.OneVsRest or OneVsOne for more)"
                )
            self.classes_ = self._label_map.classes
            self._label_array = self._label_map.array

    def _row(self, x) -> Row:
        return as_row(x, self.n_features)

    def _batch(self, X) -> CSRBatch:
        return as_batch(X, self.n_features)

    def _binary_label(self, y) -> float:
        """``-1.0`` / ``+1.0`` for a label."""
        if self._label_map is None:
            return check_binary_label(y)
        return 1.0 if self._label_map.index(y) else -1.0

    def _binary_labels(self, y, n_rows: int) -> np.ndarray:
        """``-1.0`` / ``+1.0`` for a batch's labels."""
        if self._label_map is None:
            return check_binary_labels(y, n_rows)
        return np.where(self._label_map.indices(y, n_rows) == 1, 1.0, -1.0)

    def _labels_of(self, scores: np.ndarray) -> np.ndarray:
        """The labels that scores predict."""
        return self._label_array[(scores > 0).astype(INDEX)]

    def score_one(self, x) -> float:
        """The decision value of one example (``> 0`` predicts ``classes_[1]``).

        Parameters
        ----------
        x : array-like, ``(indices, values)`` or mapping
            A dense row of ``n_features`` values, a sparse row or named features (see
            ``core.features.as_row``).

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> _ = model.learn_one([1.0, 0.0], 1)
        >>> model.score_one([1.0, 0.0]), model.score_one(([0], [1.0]))
        (1.0, 1.0)
        """
        indices, values = self._row(x)
        return self.score_row(indices, values)

    def score_many(self, X) -> np.ndarray:
        """Decision values of a batch, shape (n_rows,).

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> _ = model.learn_one([1.0, 0.0], 1)
        >>> model.score_many([[1.0, 0.0], [0.0, 1.0]])
        array([1. , 0.5])
        """
        return self.score_batch(self._batch(X))

    def predict_one(self, x):
        """The predicted label of one example: ``classes_[1]`` if its score is ``> 0``.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1, classes=["no", "yes"])
        >>> _ = model.learn_one([1.0], "yes")
        >>> model.predict_one([1.0]), model.predict_one([-3.0])
        ('yes', 'no')
        """
        return self.classes_[1] if self.score_one(x) > 0 else self.classes_[0]

    def predict_many(self, X) -> np.ndarray:
        """Predicted labels of a batch: int64 for integer labels, object otherwise.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=1)
        >>> _ = model.learn_one([1.0], 1)
        >>> model.predict_many([[1.0], [-3.0]])
        array([ 1, -1])
        """
        return self._labels_of(self.score_many(X))

    def decision_function(self, X) -> np.ndarray:
        """Alias of ``score_many`` (scikit-learn's name)."""
        return self.score_many(X)

    def proba_from_scores(self, scores) -> np.ndarray:
        """``P(y = classes_[1])`` for decision values of this model.

        A margin is not a probability: models without a probabilistic score raise
        ``ValueError`` and are wrapped in :class:`core.calibration.Calibrated` for one.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> from core.calibration import Calibrated
        >>> LinearPA(n_features=1).proba_from_scores([0.0])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: LinearPA scores are margins, not probabilities: wrap the model in ...
        >>> Calibrated(model=LinearPA(n_features=1)).proba_from_scores([0.0])
        array([0.5])
        """
        raise ValueError(
            f"{type(self).__name__} scores are margins, not probabilities: wrap the model in "
            "core.calibration.Calibrated"
        )

    def predict_proba_one(self, x) -> float:
        """``P(y = classes_[1] | x)`` (see :meth:`proba_from_scores`)."""
        return float(self.proba_from_scores(np.array([self.score_one(x)]))[0])

    def predict_proba_many(self, X) -> np.ndarray:
        """``P(y = classes_[1] | x)`` for every row, shape (n_rows,)."""
        return np.asarray(self.proba_from_scores(self.score_many(X)))

    # implemented by subclasses
    def score_row(self, indices: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover
        """The decision value of one row already validated for this model.

        Parameters
        ----------
        indices : ndarray of int64
            The row's sorted, distinct feature indices, each in ``[0, n_features)``.
        values : ndarray of float64
            Its finite values (``core.features.as_row`` with the model's ``n_features``
            returns both).

        Returns
        -------
        float
            What ``score_one`` returns for that row (no validation: a caller that validated
            once scores without a second pass).
        """
        raise NotImplementedError

    def score_batch(self, batch: CSRBatch) -> np.ndarray:  # pragma: no cover
        """The decision values of a batch already validated for this model.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).

        Returns
        -------
        ndarray of shape (n_rows,)
            What ``score_many`` returns for those rows (no validation: a server that
            validated once scores without a second pass).
        """
        raise NotImplementedError


class BinaryClassifier(BinaryModel):
    """Base of the online binary classifiers: ``learn_one`` / ``learn_many``.

    Inputs are validated first, so a bad example raises ``ValueError`` before any learned
    array is touched. Subclasses implement :meth:`learn_row` and :meth:`learn_rows` over
    validated rows and batches with numeric targets (``-1.0`` / ``+1.0``): the hooks that
    wrappers (``core.calibration.Calibrated``, the reductions) call on what they validated
    once.

    Examples
    --------
    >>> from core.separation import Perceptron
    >>> model = Perceptron(n_features=2, classes=["ham", "spam"])
    >>> for x, y in [([1.0, 0.0], "spam"), ([0.0, 1.0], "ham")] * 2:
    ...     _ = model.learn_one(x, y)
    >>> model.predict_many([[1.0, 0.0], [0.0, 1.0]])
    array(['spam', 'ham'], dtype=object)
    """

    def learn_one(self, x, y) -> Step:
        """Learn one example.

        Parameters
        ----------
        x : array-like, ``(indices, values)`` or mapping
            A dense row, a sparse row or named features (see ``core.features.as_row``).
        y : label
            One of ``classes_``.

        Returns
        -------
        Step
            The score, loss and prediction before the update, and whether it changed the
            model.

        Examples
        --------
        >>> from core.dos import DoSClassifier
        >>> model = DoSClassifier(n_features=2, rank=1, seed=0)
        >>> step = model.learn_one([1.0, -1.0], 1)
        >>> step.aggressive, round(model.score_one([1.0, -1.0]), 12)
        (True, 1.0)
        """
        label = self._binary_label(y)
        indices, values = self._row(x)
        return self.learn_row(indices, values, label)

    def learn_many(self, X, y) -> Steps:
        """Learn a batch in order: the same model as ``learn_one`` on each row.

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows
        y : sequence of labels, one per row

        Returns
        -------
        Steps
            Per example: the score, loss and prediction before its update, and whether it
            changed the model.

        Examples
        --------
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2)
        >>> steps = model.learn_many([[1.0, 0.0], [0.0, 1.0]], [1, -1])
        >>> steps.losses, steps.n_aggressive
        (array([1. , 1.5]), 2)
        """
        batch = self._batch(X)
        labels = self._binary_labels(y, batch.n_rows)
        steps = self.learn_rows(batch, labels)
        return Steps(
            steps.scores, steps.losses, steps.aggressive, None, self._labels_of(steps.scores)
        )

    def learn_batch(self, batch: CSRBatch, targets: np.ndarray) -> Steps:
        """Learn a batch already validated for this model, whose labels were converted to class
        indices once: the same model and steps as ``learn_many`` with the labels.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        targets : ndarray of int, shape (n_rows,)
            Each row's class index: 0 for ``classes_[0]``, 1 for ``classes_[1]``
            (``core.labels.LabelMap.indices``); checked.

        Returns
        -------
        Steps
            Per row: the score and loss before its update, whether it changed the model, and
            the class index it predicted then (``predicted``, int64).

        Raises
        ------
        PartialBatchError
            If a row's squared norm or score overflows float64: the rows before it were
            learned (``error.learned``), it and the rest were not.

        Examples
        --------
        >>> from core.features import as_batch
        >>> from core.linear import LinearPA
        >>> model = LinearPA(n_features=2, classes=["ham", "spam"])
        >>> steps = model.learn_batch(as_batch([[1.0, 0.0], [0.0, 1.0]], 2), np.array([1, 0]))
        >>> steps.predicted, steps.losses
        (array([0, 1]), array([1. , 1.5]))
        """
        targets = check_targets(targets, batch.n_rows, 2)
        steps = self.learn_rows(batch, np.where(targets == 1, 1.0, -1.0))
        predicted = (steps.scores > 0).astype(INDEX)
        return Steps(steps.scores, steps.losses, steps.aggressive, None, predicted)

    # implemented by subclasses
    def learn_row(self, indices: np.ndarray, values: np.ndarray, y: float) -> Step:
        """Update the model with one row already validated for it and its numeric target.

        Parameters
        ----------
        indices, values : ndarray
            A row validated with the model's ``n_features`` (see :meth:`score_row`).
        y : float
            ``-1.0`` for ``classes_[0]``, ``+1.0`` for ``classes_[1]`` (a regression model:
            the target value, finite).

        Returns
        -------
        Step
            The score, loss and prediction before the update, and whether it changed the
            model.

        Raises
        ------
        ValueError
            If the row's squared norm or score overflows float64; nothing is learned.
        """
        raise NotImplementedError  # pragma: no cover

    def learn_rows(self, batch: CSRBatch, y: np.ndarray) -> Steps:
        """Update the model with the rows of a batch already validated for it, in order, and
        their numeric targets: the model of :meth:`learn_row` on each row.

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        y : ndarray of float64, shape (n_rows,)
            One target per row, as :meth:`learn_row` takes it.

        Returns
        -------
        Steps
            Per row: the score and loss before its update and whether it changed the model
            (``predicted`` is None).

        Raises
        ------
        PartialBatchError
            If a row's squared norm or score overflows float64: the rows before it were
            learned (``error.learned``), it and the rest were not.
        """
        raise NotImplementedError  # pragma: no cover


class BatchClassifier(BinaryModel):
    """Base of binary models that learn only in batch: ``fit(X, y)`` replaces what was
    learned; there is no ``learn_one``.

    Subclasses implement ``_fit_batch(batch, labels)`` over a validated batch with labels
    ``-1.0`` / ``+1.0``; ``fit`` validates everything first, so a bad batch leaves the last
    fit in place.

    Examples
    --------
    >>> from core.separation import EllipsoidalClassifier
    >>> X = [[0.0, 0.0], [0.1, 0.0], [3.0, 0.0], [0.0, -3.0], [-3.0, 0.5], [0.2, 3.0]]
    >>> model = EllipsoidalClassifier(n_features=2, classes=["out", "in"])
    >>> model.fit(X, ["in", "in", "out", "out", "out", "out"]).predict_one([0.05, 0.0])
    'in'
    """

    def fit(self, X, y) -> BatchClassifier:
        """Learn from a batch, replacing the previous fit.

        Parameters
        ----------
        X : 2-D array, scipy sparse matrix or sequence of rows
        y : sequence of labels, one per row

        Returns
        -------
        self
        """
        batch = self._batch(X)
        self._fit_batch(batch, self._binary_labels(y, batch.n_rows))
        return self

    def _fit_batch(self, batch: CSRBatch, y: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError


def steps_from(scores: np.ndarray, labels: np.ndarray, steps: np.ndarray) -> Steps:
    """Steps of a batch from the PA kernels' outputs (scores before updates, step sizes):
    hinge losses ``max(0, 1 - y score)``, aggressive where the step is positive."""
    return Steps(scores, np.maximum(0.0, 1.0 - labels * scores), steps > 0.0)
