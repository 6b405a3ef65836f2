"""The one model protocol, and the parameter / state plumbing every model shares.

Every model implements

- ``learn_one(x, y)`` / ``learn_many(X, y)``: learn from one example or a batch, in order;
- ``predict_one(x)`` / ``predict_many(X)``: labels; ``score_one`` / ``score_many``: the raw
  decision values;
- ``get_state()`` / ``set_state(state)``: plain contiguous numpy arrays plus scalars (no
  pickles, no numba types), checked for shapes and dtypes on the way back in;
- ``clone()``: a fresh, unfitted model with the same hyperparameters.

Hyperparameters are keyword-only constructor arguments stored unchanged under their own
names; learned arrays end in ``_`` and are listed in the class attribute ``_arrays``
(learned scalars in ``_scalars``). Composite models (one-vs-one, averaging) list their
sub-models through ``_children()``; their arrays are flattened with dotted prefixes.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import inspect
import json
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from core.features import CSRBatch, Row, as_batch, as_row

#: kind name -> class, filled by ``Estimator.__init_subclass__`` so that a state can name
#: the class that reads it back (``from_state``).
MODEL_KINDS: dict[str, type[Estimator]] = {}
#: Modules defining model kinds, imported by ``from_spec`` when it meets an unknown kind (so
#: that loading a snapshot does not depend on what the caller happened to import).
MODEL_MODULES = (
    "core.linear",
    "core.dos",
    "core.pqr",
    "core.mofm",
    "core.multiclass",
    "core.averaging",
    "core.separation",
)


class Step(NamedTuple):
    """What one ``learn_one`` did: the score before the update (progressive validation), the
    model's loss before the update (the hinge loss ``max(0, 1 - y * score)`` for the
    passive-aggressive models, the log or squared loss for PQR), and whether it changed the
    model ("aggressive")."""

    score: float
    loss: float
    aggressive: bool


@dataclass(frozen=True)
class Steps:
    """What one ``learn_many`` did, per example (same meaning as :class:`Step`)."""

    scores: np.ndarray
    losses: np.ndarray
    aggressive: np.ndarray

    @property
    def n_aggressive(self) -> int:
        return int(np.count_nonzero(self.aggressive))


class Estimator:
    """Base class: parameters, cloning and state plumbing (see the module docstring)."""

    _arrays: ClassVar[tuple[str, ...]] = ()
    _scalars: ClassVar[tuple[str, ...]] = ()
    #: Whether the element-wise (aligned) running average of two states is a meaningful model
    #: (``core.averaging.Averaged`` refuses models that say no, e.g. FTRL's z and n).
    averageable: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        MODEL_KINDS[cls.__name__] = cls

    # -- hyperparameters ---------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY]

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, as stored."""
        return {name: getattr(self, name) for name in self._param_names()}

    def clone(self) -> Estimator:
        """A fresh, unfitted model with the same hyperparameters (sub-models cloned too, other
        parameters deep-copied so that clones share nothing mutable)."""
        params = {
            k: v.clone() if isinstance(v, Estimator) else copy.deepcopy(v)
            for k, v in self.get_params().items()
        }
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- state ---------------------------------------------------------------------------
    def _children(self) -> list[tuple[str, Estimator]]:
        return []

    def get_state(self, order: str = "C") -> dict[str, Any]:
        """The learned state: ``{"kind", "params", "arrays", "scalars"}``.

        ``params`` is JSON-serialisable (sub-models are written as ``{"kind", "params"}``),
        ``arrays`` maps names to C-contiguous copies, ``scalars`` maps names to ints/floats.
        ``order="K"`` copies each array in its own memory layout instead (a plain memory copy,
        several times faster for the transposed views of DoS models): the same values, for a
        capture taken under a lock and made contiguous after it.
        """
        if order not in ("C", "K"):
            raise ValueError(f"order must be 'C' or 'K', got {order!r}")
        arrays = {name: np.array(array, order=order, copy=True) for name, array in self.arrays()}
        return {**self.get_state_meta(), "arrays": arrays}

    def get_state_meta(self) -> dict[str, Any]:
        """``get_state()`` without the arrays: ``kind``, ``params`` and every scalar (sub-models'
        with their dotted prefixes); copies nothing."""
        return {
            "kind": type(self).__name__,
            "params": params_spec(self),
            "scalars": self._all_scalars(),
        }

    def _all_scalars(self) -> dict[str, Any]:
        scalars = {name: _plain(getattr(self, name)) for name in self._scalars}
        for prefix, child in self._children():
            scalars.update({f"{prefix}.{k}": v for k, v in child._all_scalars().items()})
        return scalars

    def arrays(self):
        """Yield ``(name, array)`` for every learned array, sub-models' with their dotted
        prefixes, without copying (read them under the model's lock)."""
        for name in self._arrays:
            yield name, getattr(self, name)
        for prefix, child in self._children():
            for name, array in child.arrays():
                yield f"{prefix}.{name}", array

    def set_state(self, state: dict[str, Any]) -> None:
        """Load a state from ``get_state``; everything is checked before anything is written."""
        if state.get("kind") != type(self).__name__:
            raise ValueError(f"state is for {state.get('kind')!r}, not {type(self).__name__}")
        if state.get("params") != params_spec(self):
            raise ValueError("state was made with different hyperparameters")
        writes = self._check_state(state["arrays"], state["scalars"])
        for target, name, value in writes:
            if isinstance(value, np.ndarray):
                getattr(target, name)[...] = value
            else:
                setattr(target, name, value)

    def _check_state(self, arrays: dict, scalars: dict) -> list[tuple[Estimator, str, Any]]:
        expected_arrays = set(self._arrays)
        expected_scalars = set(self._scalars)
        writes: list[tuple[Estimator, str, Any]] = []
        for name in self._arrays:
            if name not in arrays:
                raise ValueError(f"state misses array {name!r}")
            value, current = arrays[name], getattr(self, name)
            if not isinstance(value, np.ndarray):
                raise ValueError(f"state array {name!r} is not a numpy array")
            if value.shape != current.shape or value.dtype != current.dtype:
                raise ValueError(
                    f"state array {name!r} has shape {value.shape} and dtype {value.dtype}, "
                    f"expected {current.shape} and {current.dtype}"
                )
            if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                raise ValueError(f"state array {name!r} holds non-finite values")
            writes.append((self, name, value))
        for name in self._scalars:
            if name not in scalars:
                raise ValueError(f"state misses scalar {name!r}")
            current = getattr(self, name)
            value = scalars[name]
            if not isinstance(value, int | float | np.number) or isinstance(value, bool):
                raise ValueError(f"state scalar {name!r} must be a number, got {value!r}")
            if isinstance(current, int):
                if not float(value).is_integer() or value < 0:
                    raise ValueError(f"state scalar {name!r} must be a count, got {value!r}")
                value = int(value)
            elif not np.isfinite(value):
                raise ValueError(f"state scalar {name!r} is not finite")
            writes.append((self, name, type(current)(value)))
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


def params_spec(model: Estimator) -> dict[str, Any]:
    """JSON-serialisable hyperparameters; sub-models become ``{"kind", "params"}``."""
    spec = {}
    for name, value in model.get_params().items():
        if isinstance(value, Estimator):
            value = {"kind": type(value).__name__, "params": params_spec(value)}
        spec[name] = _plain(value)
    return spec


def from_spec(spec: dict[str, Any]) -> Estimator:
    """Build an unfitted model from ``{"kind", "params"}`` (as written by ``get_state``)."""
    kind = spec.get("kind")
    if kind not in MODEL_KINDS:
        for module in MODEL_MODULES:
            importlib.import_module(module)
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}")
    cls = MODEL_KINDS[kind]
    params = {}
    for name, value in spec.get("params", {}).items():
        if isinstance(value, dict) and "kind" in value and "params" in value:
            value = from_spec(value)
        params[name] = value
    return cls(**params)


def from_state(state: dict[str, Any]) -> Estimator:
    """Rebuild a model, hyperparameters and learned state, from ``get_state()``'s output."""
    model = from_spec(state)
    model.set_state(state)
    return model


def state_digest(state: dict[str, Any]) -> str:
    """SHA-256 of a state (arrays bit for bit, scalars, params): equal iff states are equal."""
    digest = hashlib.sha256()
    digest.update(
        json.dumps([state["kind"], state["params"], state["scalars"]], sort_keys=True).encode()
    )
    for name in sorted(state["arrays"]):
        array = state["arrays"][name]
        digest.update(f"{name}{array.shape}{array.dtype}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _plain(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def check_classes(classes) -> tuple:
    """Class labels as a tuple: a list or tuple of at least 2 distinct labels, all ints (that
    fit in int64) or all strings; ValueError naming the problem otherwise."""
    if not isinstance(classes, list | tuple):
        raise ValueError(
            f"classes must be a list or tuple of labels (e.g. np.unique(y).tolist()), "
            f"got {type(classes).__name__}"
        )
    if len(classes) < 2:
        raise ValueError(f"classes must hold at least 2 labels, got {list(classes)!r}")
    is_int = [isinstance(c, int | np.integer) and not isinstance(c, bool) for c in classes]
    is_str = [isinstance(c, str) for c in classes]
    if not (all(is_int) or all(is_str)):
        raise ValueError(f"classes must be all ints or all strings, got {list(classes)!r}")
    if all(is_int) and any(not -(2**63) <= int(c) < 2**63 for c in classes):
        raise ValueError("integer classes must fit in int64")
    if len(set(classes)) != len(classes):
        raise ValueError(f"classes must be distinct, got {list(classes)!r}")
    return tuple(classes)


def check_binary_label(y) -> float:
    """A binary label must be -1 or +1 (ints or floats; booleans are refused)."""
    if type(y) is int and (y == 1 or y == -1):  # the common case, cheaply
        return float(y)
    if isinstance(y, bool | np.bool_) or not isinstance(y, int | float | np.number):
        raise ValueError(f"binary label must be -1 or +1, got {y!r}")
    if y != 1 and y != -1:
        raise ValueError(f"binary label must be -1 or +1, got {y!r}")
    return float(y)


def check_binary_labels(y, n_rows: int) -> np.ndarray:
    """Labels of a batch: a 1-D array of -1/+1 with one label per row."""
    labels = np.asarray(y)
    if labels.dtype == bool or labels.dtype.kind not in "iuf":
        raise ValueError(f"binary labels must be -1 or +1, got dtype {labels.dtype}")
    labels = labels.astype(np.float64)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise ValueError(f"got {labels.shape} labels for {n_rows} rows")
    bad = (labels != 1) & (labels != -1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"binary label at row {i} must be -1 or +1, got {labels[i]!r}")
    return labels


class BinaryClassifier(Estimator):
    """Protocol plumbing for binary classifiers with labels -1 / +1.

    Subclasses implement ``_learn_row``, ``_score_row``, ``_learn_batch`` and
    ``score_batch`` over validated rows / batches; this class validates inputs first, so a
    bad example raises ``ValueError`` before any learned array is touched.
    ``predict`` returns +1 when the score is > 0 and -1 otherwise (a zero model says -1).
    """

    n_features: int
    classes_ = (-1, 1)

    def _row(self, x) -> Row:
        return as_row(x, self.n_features)

    def _batch(self, X) -> CSRBatch:
        return as_batch(X, self.n_features)

    def learn_one(self, x, y) -> Step:
        label = check_binary_label(y)
        indices, values = self._row(x)
        return self._learn_row(indices, values, label)

    def learn_many(self, X, y) -> Steps:
        batch = self._batch(X)
        labels = check_binary_labels(y, batch.n_rows)
        return self._learn_batch(batch, labels)

    def score_one(self, x) -> float:
        indices, values = self._row(x)
        return self._score_row(indices, values)

    def score_many(self, X) -> np.ndarray:
        return self.score_batch(self._batch(X))

    def predict_one(self, x) -> int:
        return 1 if self.score_one(x) > 0 else -1

    def predict_many(self, X) -> np.ndarray:
        return np.where(self.score_many(X) > 0, 1, -1)

    def decision_function(self, X) -> np.ndarray:
        """Alias of ``score_many`` (scikit-learn's name)."""
        return self.score_many(X)

    # implemented by subclasses
    def _learn_row(self, indices, values, y: float) -> Step:  # pragma: no cover
        raise NotImplementedError

    def _score_row(self, indices, values) -> float:  # pragma: no cover
        raise NotImplementedError

    def _learn_batch(self, batch: CSRBatch, y: np.ndarray) -> Steps:  # pragma: no cover
        raise NotImplementedError

    def score_batch(self, batch: CSRBatch) -> np.ndarray:  # pragma: no cover
        """Scores of a batch already validated for this model (``core.features.as_batch``
        with its ``n_features``): no validation, so a server that validated once scores
        without a second pass."""
        raise NotImplementedError


#: Passive-aggressive variants, dispatched to the kernels as small integers.
PA_MODES = {"pa": 0, "pa1": 1, "pa2": 2}


def check_pa_params(mode: str, C: float) -> tuple[int, float]:
    """Validate a PA variant name and its aggressiveness C; return the kernel's mode code."""
    if mode not in PA_MODES:
        raise ValueError(f"mode must be one of {sorted(PA_MODES)}, got {mode!r}")
    if isinstance(C, bool) or not isinstance(C, int | float) or not np.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a positive finite number, got {C!r}")
    return PA_MODES[mode], float(C)


def steps_from(scores: np.ndarray, labels: np.ndarray, steps: np.ndarray) -> Steps:
    """Steps of a batch from the kernels' outputs (scores before updates, step sizes)."""
    return Steps(scores, np.maximum(0.0, 1.0 - labels * scores), steps > 0.0)
