"""The serialization registry: model kinds by name, and models to and from specs and states.

A state (``Estimator.get_state()``) names its model's class (``kind``) and holds its
hyperparameters (``params``, JSON), learned arrays and scalars; a spec is its ``kind`` and
``params`` only. Every model class registers itself here when it is defined
(``core.base.Estimator.__init_subclass__`` calls :func:`register`), so that :func:`from_spec`
and :func:`from_state` rebuild a model from the name of its kind; a kind that is not
registered yet is looked for in the modules of :data:`MODEL_MODULES` first. This module
imports no model: the protocol (``core.base``) imports it.

>>> from core.linear import LinearPA
>>> model = LinearPA(n_features=2, classes=["ham", "spam"])
>>> _ = model.learn_one([1.0, 0.0], "spam")
>>> copy = from_state(model.get_state())
>>> copy.predict_one([1.0, 0.0]), state_digest(copy.get_state()) == state_digest(model.get_state())
('spam', True)
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from typing import Any

import numpy as np

from core.labels import check_state_labels

__all__ = [
    "MODEL_KINDS",
    "MODEL_MODULES",
    "from_spec",
    "from_state",
    "is_model",
    "params_spec",
    "plain_value",
    "register",
    "state_digest",
    "with_defaults",
]

#: kind name -> class, filled by :func:`register` (every subclass of
#: ``core.base.Estimator``) so that a state can name the class that reads it back
MODEL_KINDS: dict[str, type] = {}
#: Modules defining model kinds, imported by ``from_spec`` when it meets an unknown kind (so
#: that loading a snapshot does not depend on what the caller happened to import).
MODEL_MODULES = (
    "core.linear",
    "core.dos",
    "core.pqr",
    "core.mofm",
    "core.one_vs_one",
    "core.one_vs_rest",
    "core.ordinal",
    "core.averaging",
    "core.separation",
)
#: every registered class (a kind's name may be taken over by a later class of the same
#: name; its earlier instances are still models)
_CLASSES: set[type] = set()


def register(cls: type) -> None:
    """Register a model class under its name (``MODEL_KINDS``)."""
    MODEL_KINDS[cls.__name__] = cls
    _CLASSES.add(cls)


def is_model(value) -> bool:
    """Whether ``value`` is an instance of a registered model class."""
    return type(value) in _CLASSES


def params_spec(model) -> dict[str, Any]:
    """JSON-serialisable hyperparameters; sub-models become ``{"kind", "params"}``.

    Raises ``ValueError`` for a hyperparameter that JSON cannot hold (e.g. a tuple label).

    >>> from core.linear import LinearPA
    >>> params_spec(LinearPA(n_features=3))
    {'n_features': 3, 'mode': 'pa', 'C': 1.0, 'fit_intercept': True, 'classes': None}
    """
    spec = {}
    for name, value in model.get_params().items():
        if is_model(value):
            value = {"kind": type(value).__name__, "params": params_spec(value)}
        if name == "classes" and value is not None:
            check_state_labels(value)  # a tuple label would come back as an unhashable list
        value = plain_value(value)
        if not _is_json(value):
            raise ValueError(
                f"hyperparameter {name}={value!r} of {type(model).__name__} cannot be written "
                "into a state (JSON holds strings, numbers, booleans, None, lists and dicts)"
            )
        spec[name] = value
    return spec


def _is_json(value) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def with_defaults(params, cls: type) -> Any:
    """``params`` of a state for ``cls`` with the hyperparameters it lacks at their defaults
    (recursively for sub-model specs): a state written before a hyperparameter existed.

    >>> from core.linear import LinearPA
    >>> with_defaults({"n_features": 2}, LinearPA)["mode"]
    'pa'
    """
    if not isinstance(params, dict):
        return params
    out = dict(params)
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.kind is p.KEYWORD_ONLY and p.name not in out and p.default is not p.empty:
            out[p.name] = plain_value(p.default)
    for name, value in out.items():
        if isinstance(value, dict) and value.get("kind") in MODEL_KINDS and "params" in value:
            child = MODEL_KINDS[value["kind"]]
            out[name] = {**value, "params": with_defaults(value["params"], child)}
    return out


def from_spec(spec: dict[str, Any]):
    """Build an unfitted model from ``{"kind", "params"}`` (as written by ``get_state``).

    >>> from_spec({"kind": "LinearPA", "params": {"n_features": 2, "mode": "pa1"}})
    LinearPA(n_features=2, mode='pa1', C=1.0, fit_intercept=True, classes=None)
    """
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


def from_state(state: dict[str, Any]):
    """Rebuild a model, hyperparameters and learned state, from ``get_state()``'s output.

    >>> from core.linear import LinearPA
    >>> model = LinearPA(n_features=1)
    >>> _ = model.learn_one([1.0], 1)
    >>> from_state(model.get_state()).w_
    array([0.5, 0.5])
    """
    model = from_spec(state)
    model.set_state(state)
    return model


def state_digest(state: dict[str, Any]) -> str:
    """SHA-256 of a state (arrays bit for bit, scalars, params): equal iff states are equal.

    >>> from core.linear import LinearPA
    >>> a, b = LinearPA(n_features=2), LinearPA(n_features=2)
    >>> state_digest(a.get_state()) == state_digest(b.get_state())
    True
    """
    digest = hashlib.sha256()
    digest.update(
        json.dumps([state["kind"], state["params"], state["scalars"]], sort_keys=True).encode()
    )
    for name in sorted(state["arrays"]):
        array = state["arrays"][name]
        digest.update(f"{name}{array.shape}{array.dtype}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def plain_value(value):
    """A hyperparameter or scalar as JSON holds it: numpy scalars as Python values, arrays
    and tuples as lists (recursively).

    >>> plain_value((np.int64(3), np.float64(0.5), np.bool_(True)))
    [3, 0.5, True]
    """
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [plain_value(v) for v in value]
    return value
