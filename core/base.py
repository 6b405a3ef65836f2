"""The one model protocol, and the parameter / state plumbing every model shares.

Every online model implements

- ``learn_one(x, y)`` / ``learn_many(X, y)``: learn from one example or a batch, in order,
  returning a :class:`Step` / :class:`Steps` (what the model predicted before each update);
- ``predict_one(x)`` / ``predict_many(X)``: labels; ``score_one`` / ``score_many``: the raw
  decision values;
- ``get_state()`` / ``set_state(state)``: plain contiguous numpy arrays plus scalars (no
  pickles, no numba types), checked for shapes and dtypes on the way back in;
- ``clone()``: a fresh, unfitted model with the same hyperparameters.

Batch models (``core.binary.BatchClassifier``) replace ``learn_one`` / ``learn_many`` by
``fit``. The binary bases (scores, labels, the hooks wrappers call) are in ``core.binary``.

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
from core.registry import from_state, params_spec, plain_value, register, with_defaults
from core.state import state_array, state_scalar

__all__ = ["Estimator", "PartialBatchError", "Step", "Steps"]


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


#: the keyword-only constructor arguments of each class (``Estimator._param_names``)
_PARAM_NAMES: dict[type, tuple[str, ...]] = {}


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
        # read once per class: ``inspect.signature`` costs ~40 us, and building a service
        # model (its estimator, wrappers and clones) asks a dozen times
        names = _PARAM_NAMES.get(cls)
        if names is None:
            signature = inspect.signature(cls.__init__)
            names = _PARAM_NAMES[cls] = tuple(
                p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY
            )
        return list(names)

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
