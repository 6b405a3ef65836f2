"""Class labels: any hashable values, mapped to class indices by one rule.

Every classifier of ``core`` takes its labels as given (``classes=["ham", "spam"]``,
``[False, True]``, ``[3, 5, 7]``) and maps them here to indices ``0 .. n_classes - 1``; binary
models then learn with ``-1`` for ``classes[0]`` and ``+1`` for ``classes[1]``. The service maps
the labels of its requests with the same :class:`LabelMap`. **The rule**: a label is the class
it equals, within its kind of value (numpy scalars count as the Python values they hold):

- a number (an integer or a float) equal to a numeric class is that class: ``1.0`` is the
  class ``1`` (JSON and JavaScript clients send integers as floats), ``2.5`` matches no
  integer class, NaN matches nothing;
- a boolean matches a boolean class only: ``True`` is never the class ``1``, and ``1`` never
  the class ``True`` (Python holds them equal; a label of the wrong kind is refused instead of
  being read as another class);
- a string matches an equal string class only: ``"1"`` is never the class ``1``;
- any other hashable label matches a class of its own type that it equals.

Classes that Python holds equal (``1`` and ``1.0``, ``1`` and ``True``) cannot be classes of
one model. Labels written into a model's state (its ``classes`` parameter) must be strings,
integers, floats, booleans or None: JSON holds no other kind.

>>> labels = LabelMap(["ham", "spam"])
>>> labels.index("spam"), labels.indices(["spam", "ham", "spam"], 3).tolist()
(1, [1, 0, 1])
>>> LabelMap([-1, 1]).index(1.0), LabelMap([False, True]).index(True)
(1, 1)
>>> try:
...     LabelMap([False, True]).index(1)
... except ValueError as error:
...     print(error)
unknown label 1: the known classes are [False, True] (a number is never a boolean class)
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from core.config import INDEX

__all__ = [
    "LabelMap",
    "UnknownLabelError",
    "check_binary_label",
    "check_binary_labels",
    "check_classes",
    "check_targets",
]

#: the kinds of label a state can hold (JSON scalars)
STATE_LABEL_TYPES = (str, int, float, bool, type(None))


def _plain(label):
    return label.item() if isinstance(label, np.generic) else label


def _key(label):
    """``(kind, value)``: equal for labels that are the same class under the module's rule
    (``("number", 1) == ("number", 1.0)``, and NaN equals nothing)."""
    label = _plain(label)
    if isinstance(label, bool):
        return ("bool", label)
    if isinstance(label, int | float):
        return ("number", label)
    if isinstance(label, str):
        return ("str", label)
    return (type(label), label)


def _kind(label) -> str:
    """The kind of a label under the rule, in words."""
    kind = _key(label)[0]
    return {"bool": "boolean", "number": "number", "str": "string"}.get(kind, "other label")


class UnknownLabelError(ValueError):
    """A label that is none of the classes.

    Attributes
    ----------
    label : object
        The label.
    row : int or None
        Its row in a batch (None for a single label).
    reason : str
        Why, when the label is of a kind that no class is (e.g. "a number is never a boolean
        class"), else "".
    """

    def __init__(self, label, classes: tuple, row: int | None = None):
        self.label, self.row = label, row
        kinds = {_kind(c) for c in classes}
        kind = _kind(label)
        self.reason = ""
        if kind != "other label" and kind not in kinds and len(kinds) == 1:
            (other,) = kinds
            self.reason = f"a {kind} is never a{'n' if other[0] in 'aeiou' else ''} {other} class"
        where = "" if row is None else f"label at row {row}: "
        why = f" ({self.reason})" if self.reason else ""
        super().__init__(
            f"{where}unknown label {label!r}: the known classes are {list(classes)}{why}"
        )


def check_classes(classes) -> tuple:
    """Class labels as a tuple: a list or tuple of at least 2 distinct hashable labels
    (numpy scalars become Python values); ValueError naming the problem otherwise."""
    if not isinstance(classes, list | tuple):
        raise ValueError(
            f"classes must be a list or tuple of labels (e.g. np.unique(y).tolist()), "
            f"got {type(classes).__name__}"
        )
    if len(classes) < 2:
        raise ValueError(f"classes must hold at least 2 labels, got {list(classes)!r}")
    plain = tuple(_plain(c) for c in classes)
    for label in plain:
        if not isinstance(label, Hashable):
            raise ValueError(f"class labels must be hashable, got {label!r}")
        if isinstance(label, float) and label != label:
            raise ValueError("a class label cannot be NaN")
    if len(set(plain)) != len(plain):  # Python equality: 1, 1.0 and True are one label
        raise ValueError(
            f"classes must be distinct, got {list(plain)!r} (1 and 1.0 are one class; 1 and "
            "True, which Python holds equal, cannot both be classes)"
        )
    return plain


def check_state_labels(classes) -> None:
    """Refuse labels that a state (JSON) cannot hold."""
    if classes is None:
        return
    for label in classes:
        if not isinstance(_plain(label), STATE_LABEL_TYPES):
            raise ValueError(
                f"class label {label!r} cannot be written into a state: use strings, "
                "integers, floats, booleans or None"
            )


class LabelMap:
    """Labels ``classes`` (see :func:`check_classes`) and their indices.

    Parameters
    ----------
    classes : list or tuple
        At least two distinct hashable labels, in the order that numbers the classes.

    Attributes
    ----------
    classes : tuple
        The labels, numpy scalars converted to Python values.
    array : ndarray of shape (n_classes,)
        The labels as an array: ``int64`` when they are all integers, ``object`` otherwise
        (what ``predict_many`` returns).

    Examples
    --------
    >>> labels = LabelMap([3, 5, 7])
    >>> labels.indices(np.array([7, 3]), 2), labels.array[[2, 0]]
    (array([2, 0]), array([7, 3]))
    """

    def __init__(self, classes):
        self.classes = check_classes(classes)
        self._map = {_key(c): k for k, c in enumerate(self.classes)}
        integers = all(
            isinstance(c, int) and not isinstance(c, bool) and -(2**63) <= c < 2**63
            for c in self.classes
        )
        self.array = np.array(self.classes, dtype=INDEX if integers else object)
        if integers:
            self._kind = "i"
        elif all(isinstance(c, str) for c in self.classes):
            self._kind = "U"
        elif all(isinstance(c, bool) for c in self.classes):
            self._kind = "b"
        else:
            self._kind = ""
        if self._kind:
            # vectorised look-ups of int64 / unicode / bool arrays: classes sorted, their
            # positions
            keys = self.array if self._kind == "i" else self.array.astype(self._kind)
            self._sort = np.argsort(keys, kind="stable")
            self._sorted = keys[self._sort]

    def __len__(self) -> int:
        return len(self.classes)

    def index(self, y) -> int:
        """The class index of one label (the module's rule); :class:`UnknownLabelError` (a
        ``ValueError``) if it is none of the classes."""
        try:
            k = self._map.get(_key(y))
        except TypeError:  # unhashable
            k = None
        if k is None:
            raise UnknownLabelError(y, self.classes)
        return k

    def indices(self, y, n_rows: int) -> np.ndarray:
        """Class indices (int64) of a batch's labels: one known label per row."""
        if isinstance(y, np.ndarray):
            if y.ndim != 1:
                raise ValueError(f"labels of a batch must be 1-D, got shape {y.shape}")
        elif isinstance(y, str | bytes | dict):
            raise ValueError("labels of a batch must be a sequence, one label per row")
        else:
            try:
                y = list(y)
            except TypeError:
                raise ValueError(
                    "labels of a batch must be a sequence, one label per row"
                ) from None
        if len(y) != n_rows:
            raise ValueError(f"got {len(y)} labels for {n_rows} rows")
        if isinstance(y, np.ndarray) and n_rows:
            if self._kind and y.dtype.kind == self._kind:
                return self._sorted_indices(y, y, np.ones(n_rows, dtype=bool))
            if self._kind == "i" and y.dtype.kind == "f":
                # floats equal to integer classes (JSON numbers, svmlight labels)
                exact = np.isfinite(y) & (np.floor(y) == y) & (y >= -(2.0**63)) & (y < 2.0**63)
                return self._sorted_indices(y, np.where(exact, y, 0.0).astype(INDEX), exact)
        out = np.empty(n_rows, dtype=INDEX)
        for i, label in enumerate(y):
            try:
                out[i] = self.index(label)
            except UnknownLabelError:
                raise UnknownLabelError(label, self.classes, i) from None
        return out

    def _sorted_indices(self, y: np.ndarray, keys: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Indices of the labels ``y`` looked up by ``keys`` (of the classes' dtype) among the
        sorted classes; the first row that is not ``valid`` or not found is refused."""
        position = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        unknown = np.flatnonzero(~valid | (self._sorted[position] != keys))
        if unknown.size == 0:
            return self._sort[position].astype(INDEX)
        first = int(unknown[0])
        raise UnknownLabelError(y[first].item(), self.classes, first)


def check_binary_label(y) -> float:
    """A label of a model without ``classes``: -1 or +1 (ints or floats; booleans refused)."""
    if type(y) is int and (y == 1 or y == -1):  # the common case, cheaply
        return float(y)
    if isinstance(y, bool | np.bool_) or not isinstance(y, int | float | np.number):
        raise ValueError(f"binary label must be -1 or +1, got {y!r}")
    if y != 1 and y != -1:
        raise ValueError(f"binary label must be -1 or +1, got {y!r}")
    return float(y)


def check_binary_labels(y, n_rows: int) -> np.ndarray:
    """Labels of a batch for a model without ``classes``: a 1-D array of -1 / +1 with one
    label per row, as float64."""
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


def check_targets(targets, n_rows: int, n_classes: int) -> np.ndarray:
    """Class indices of a batch's labels, converted once (``LabelMap.indices``), checked: a 1-D
    integer array (booleans refused) of ``n_rows`` entries in ``[0, n_classes)``; ValueError
    otherwise. Returns them as an array (no copy).

    >>> check_targets(np.array([1, 0, 1]), 3, 2)
    array([1, 0, 1])
    >>> check_targets([0, 2], 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: class index 2 at row 1 is not in [0, 2)
    """
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu" or targets.ndim != 1:
        raise ValueError(
            f"targets must be a 1-D array of class indices (integers), got dtype "
            f"{targets.dtype} and shape {targets.shape}"
        )
    if targets.shape[0] != n_rows:
        raise ValueError(f"got {targets.shape[0]} targets for {n_rows} rows")
    if n_rows and (targets.min() < 0 or targets.max() >= n_classes):
        row = int(np.flatnonzero((targets < 0) | (targets >= n_classes))[0])
        raise ValueError(f"class index {targets[row]} at row {row} is not in [0, {n_classes})")
    return targets
