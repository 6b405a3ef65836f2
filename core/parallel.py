"""Data-parallel online learning of one model, merged by aligned averaging (section 3.4).

k workers hold copies of one model. Examples are dealt round-robin (the i-th example seen
goes to worker ``i mod k``); every ``interval`` examples (counted over all workers) the k
states are merged into one and every worker goes on from the merged state. The merge is
the aligned average of section 3.4 of Saul 2021 (:func:`merge`): each DoS pair is brought
to its minimum-norm form and rotated onto the running average of the others (Lorentz boost
and Procrustes, eqs 15-16 and 26-27) before the equal-weight average (eq 28); every other
float array is averaged as is. A DoS model is defined only up to those symmetries: copies
that learned apart hold their hidden units in unrelated bases, and averaging them without
alignment averages unrelated units.

:class:`DataParallel` runs the rounds in this process, one worker after the other (the
reference, deterministic); ``benchmarks/data_parallel.py`` runs the same rounds on k
processes, with the same result bit for bit, and measures throughput and test error.

**Two merges.** ``merge="serial"`` (:func:`merge`) folds the k states one after the other
at the coordinator, each aligned to the running average of the ones before: its cost grows
with k and none of it can run in the workers. ``merge="parallel"``
(:func:`merge_to_reference`) aligns every state to one *reference* known to every worker
before the merge, the previous merged state (the common start of the round), so that the
alignment runs in the workers (:func:`align_to`), and the aligned states are summed in a
binary tree of pairwise sums (:func:`tree_sum`) that the workers run too: the coordinator
receives the mean.

Why the reference is sound: every worker started the round from the reference ``R`` and
learned only its share of one interval, so its copy is ``R + delta_i`` in the same hidden
basis. Its min-norm boost (eqs 15-16) is a canonical form of its boost orbit, and the
Procrustes rotations onto ``R``'s min-norm form (eqs 26-27) are ``I + O(delta_i)``; the
serial fold's references (the running averages) are ``R + O(delta)`` as well, so the two
merges agree to first order in the drift and differ by second-order terms (measured:
``docs/data_parallel.md``). What the reference is not needed for is the boost: each state's
min-norm form does not depend on it. A reference pair that is the zero classifier (a zero
start, or ``U = +-V``: its min-norm form is zero, the limit of eq 16) or whose min-norm form is
orthogonal to the worker's fixes no rotation: the rotation is then the identity (the
common start's basis), defined here rather than left to the SVD of a zero matrix.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from core.align import (
    ALIGNMENTS,
    _dos_pairs,
    _fold_pair,
    _light_cone_scales,
    _min_norm,
    running_average,
)
from core.base import Estimator
from core.features import sliceable
from core.kernels.align import _align_rotate, _fold_cross

__all__ = [
    "MERGES",
    "DataParallel",
    "align_to",
    "deal",
    "float_layout",
    "merge",
    "merge_to_reference",
    "tree_children",
    "tree_sum",
    "unflatten",
]

#: ``DataParallel(merge=)``: the serial fold at the coordinator, or the parallel merge
MERGES = ("serial", "parallel")


def merge(states: list[dict], method: str = "paper") -> dict:
    """The aligned equal-weight average of k model states (eq 28 folded over k models).

    >>> from core.dos import DoSClassifier
    >>> from core.align import boost
    >>> model = DoSClassifier(n_features=2, rank=2, seed=0)
    >>> _ = model.learn_one([1.0, -1.0], 1)
    >>> twin = model.get_state()
    >>> twin["arrays"]["U_"], twin["arrays"]["V_"] = boost(model.U_, model.V_, 0.7)
    >>> merged = model.clone()
    >>> merged.set_state(merge([model.get_state(), twin]))
    >>> bool(np.isclose(merged.score_one([0.3, 2.0]), model.score_one([0.3, 2.0])))
    True
    """
    if not states:
        raise ValueError("merge needs at least one state")
    average = None
    for m, state in enumerate(states, start=1):
        average = running_average(average, state, m, method)
    return average


def float_layout(state: dict) -> list[tuple[str, slice, tuple[int, ...]]]:
    """``(name, slice, shape)`` of each floating-point array of ``state`` in one flat float64
    vector, in the state's order: what :func:`align_to` writes and the tree sums."""
    layout, start = [], 0
    for name, array in state["arrays"].items():
        if array.dtype.kind == "f":
            layout.append((name, slice(start, start + array.size), array.shape))
            start += array.size
    return layout


def _rotation(C: np.ndarray) -> np.ndarray:
    """Orthogonal Q minimising ``|Q A - B|_F`` given ``C = B A^T`` (eqs 26-27), and the
    identity when ``C = 0`` (a zero reference, or rows orthogonal to it: every Q is a
    minimiser)."""
    if not np.any(C):
        return np.eye(C.shape[0])
    W, _, Zt = np.linalg.svd(C)
    return W @ Zt


def _align_pair(reference, pair, method: str, out_u: np.ndarray, out_v: np.ndarray) -> None:
    """``pair`` at its min-norm form rotated onto ``reference``'s, written to the outputs;
    the paper's alignment streamed over the columns (``core.kernels.align``)."""
    if method != "paper":
        U1, V1 = _min_norm(reference, method)
        U2, V2 = _min_norm(pair, method)
        out_u[...] = _rotation(U1 @ U2.T) @ U2
        out_v[...] = _rotation(V1 @ V2.T) @ V2
        return
    U1, V1 = _fold_pair(reference, "reference")
    U2, V2 = _fold_pair(pair, "state")
    a1, b1 = _light_cone_scales(U1, V1, "reference")
    a2, b2 = _light_cone_scales(U2, V2, "state")
    d = U2.shape[0]
    CU, CV = np.empty((d, d)), np.empty((d, d))
    _fold_cross(U1, V1, a1, b1, U2, V2, a2, b2, CU, CV)
    omega_t, lam_t = (np.ascontiguousarray(_rotation(C).T) for C in (CU, CV))
    _align_rotate(U2, V2, a2, b2, omega_t, lam_t, out_u, out_v)


def align_to(
    reference: dict, state: dict, method: str = "paper", out: np.ndarray | None = None
) -> np.ndarray:
    """The per-worker part of the parallel merge: ``state`` aligned to ``reference`` (section
    3.4), as one flat float64 vector (:func:`float_layout`).

    Each DoS pair ``(U2, V2)`` is boosted to its minimum-norm form (eqs 15-16; ``method=
    "spectral"``: :func:`core.align.canonical`) and rotated onto the minimum-norm form
    ``(U1', V1')`` of the reference's pair, ``Omega = argmin |Q U2' - U1'|`` and ``Lambda =
    argmin |Q V2' - V1'|`` (eqs 26-27), the identity when the reference fixes no rotation
    (module docstring); every other float array is copied as it is. The result is ``state``'s
    classifier: the mean of such vectors over the workers is eq (28) with every term aligned
    to one reference.

    Parameters
    ----------
    reference, state : dict
        ``get_state()`` of one model kind and hyperparameters: the state every worker
        started from (the last merged state) and a worker's.
    method : {"paper", "spectral"}
    out : ndarray of shape (n,), float64, optional
        Where to write (e.g. the worker's row of a shared buffer).

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> from core.align import boost
    >>> model = DoSClassifier(n_features=2, rank=2, seed=0)
    >>> start = model.get_state()
    >>> _ = model.learn_one([1.0, -1.0], 1)
    >>> twin = model.get_state()
    >>> twin["arrays"]["U_"], twin["arrays"]["V_"] = boost(-model.U_, -model.V_, 0.7)
    >>> bool(np.allclose(align_to(start, twin), align_to(start, model.get_state())))
    True
    """
    if method not in ALIGNMENTS:
        raise ValueError(f"method must be one of {ALIGNMENTS}, got {method!r}")
    for what, value in (("reference", reference), ("state", state)):
        if not isinstance(value, dict) or not {"kind", "params", "arrays", "scalars"} <= set(value):
            raise ValueError(f"{what} must be a state from get_state()")
    if reference["kind"] != state["kind"] or reference["params"] != state["params"]:
        raise ValueError("reference and state are for different models")
    arrays, anchors = state["arrays"], reference["arrays"]
    if set(arrays) != set(anchors):
        raise ValueError("reference and state hold different arrays")
    for name, array in arrays.items():
        if np.shape(anchors[name]) != np.shape(array):
            raise ValueError(f"array {name!r} has another shape in the reference")
    layout = float_layout(state)
    size = layout[-1][1].stop if layout else 0
    if out is None:
        out = np.empty(size)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (size,)):
        raise ValueError(f"out must be a float64 array of shape ({size},)")
    pairs = _dos_pairs(arrays)
    partners = {v: u for u, v in pairs.items()}
    where = {name: part for name, part, _ in layout}
    for name, part, shape in layout:
        if name in partners:
            continue  # (written with its U)
        if name not in pairs:
            out[part] = np.ravel(arrays[name])
            continue
        v_name = pairs[name]
        _align_pair(
            (anchors[name], anchors[v_name]),
            (arrays[name], arrays[v_name]),
            method,
            out[part].reshape(shape),
            out[where[v_name]].reshape(shape),
        )
    return out


def tree_children(worker: int, n_workers: int) -> list[int]:
    """The workers whose (partial) sums ``worker`` adds to its own in :func:`tree_sum`, in
    order: ``worker + 1, worker + 2, worker + 4, ...`` while ``worker`` is a multiple of twice
    the stride. Worker 0 ends with the sum of all; every other one's sum goes to one parent.

    >>> [tree_children(w, 6) for w in range(6)]
    [[1, 2, 4], [], [3], [], [5], []]
    """
    children, stride = [], 1
    while worker % (2 * stride) == 0 and stride < n_workers:
        if worker + stride < n_workers:
            children.append(worker + stride)
        stride *= 2
    return children


def tree_sum(rows: np.ndarray) -> np.ndarray:
    """Sum the k rows pairwise in a binary tree, in place: ``rows[i] += rows[c]`` for each
    ``c`` in ``tree_children(i, k)``, a child's row complete before it is added (the order
    k processes sharing ``rows`` follow, so both give the same sum bit for bit). Returns
    ``rows[0]``, the sum. ``ceil(log2 k)`` levels: no worker adds more than that many rows.

    >>> tree_sum(np.array([[1.0], [2.0], [3.0]])).tolist()
    [6.0]
    """
    n_workers = rows.shape[0]
    stride = 1
    while stride < n_workers:
        for worker in range(0, n_workers - stride, 2 * stride):
            rows[worker] += rows[worker + stride]
        stride *= 2
    return rows[0]


def unflatten(flat: np.ndarray, state: dict) -> dict:
    """``state`` with its float arrays taken from the flat vector ``flat`` (new arrays, of
    ``state``'s dtypes; :func:`float_layout`): its kind, params, scalars and other arrays are
    kept (for a merge: the last worker's, as the serial fold keeps them)."""
    arrays = dict(state["arrays"])
    for name, part, shape in float_layout(state):
        arrays[name] = flat[part].reshape(shape).astype(state["arrays"][name].dtype, copy=True)
    return {**state, "arrays": arrays, "scalars": dict(state["scalars"])}


def merge_to_reference(states: list[dict], reference: dict, method: str = "paper") -> dict:
    """The parallel merge: the mean of the k states each aligned to ``reference`` (eq 28
    with every term aligned by :func:`align_to`, eqs 15-16 and 26-27), summed by
    :func:`tree_sum` and divided by k; scalars and non-float arrays from the last state.
    Each :func:`align_to` can run in its worker and the sums in the workers too (the
    module docstring); this is the in-process reference of that computation.

    >>> from core.dos import DoSClassifier
    >>> from core.align import boost
    >>> model = DoSClassifier(n_features=2, rank=2, seed=0)
    >>> start = model.get_state()
    >>> _ = model.learn_one([1.0, -1.0], 1)
    >>> twin = model.get_state()
    >>> twin["arrays"]["U_"], twin["arrays"]["V_"] = boost(model.U_, model.V_, 0.7)
    >>> merged = model.clone()
    >>> merged.set_state(merge_to_reference([model.get_state(), twin], start))
    >>> bool(np.isclose(merged.score_one([0.3, 2.0]), model.score_one([0.3, 2.0])))
    True
    """
    if not states:
        raise ValueError("merge_to_reference needs at least one state")
    size = sum(part.stop - part.start for _, part, _ in float_layout(states[-1]))
    rows = np.empty((len(states), size))
    for row, state in zip(rows, states, strict=True):
        align_to(reference, state, method, out=row)
    return unflatten(tree_sum(rows) / len(states), states[-1])


def deal(n_seen: int, n_rows: int, n_workers: int) -> list[np.ndarray]:
    """The rows of a batch each worker learns: row i is the ``(n_seen + i)``-th example,
    dealt to worker ``(n_seen + i) mod n_workers``.

    >>> [rows.tolist() for rows in deal(1, 5, 2)]
    [[1, 3], [0, 2, 4]]
    """
    owner = (n_seen + np.arange(n_rows)) % n_workers
    return [np.flatnonzero(owner == worker) for worker in range(n_workers)]


class DataParallel:
    """k copies of ``model`` learning a stream dealt round-robin, merged every ``interval``
    examples (module docstring). Not itself an estimator: ``model_`` is the merged model
    (the one to serve), a clone of ``model`` until the first merge.

    Parameters
    ----------
    model : Estimator
        The model to learn (a template: it is cloned).
    n_workers : int
        k. With k = 1 nothing is merged: one model learns every example (a single learner).
    interval : int
        Examples (over all workers) between two merges.
    alignment : {"paper", "spectral"}
        How DoS pairs are aligned before averaging (``core.align.align``).
    merge : {"serial", "parallel"}
        ``"serial"``: :func:`merge`, each state aligned to the running average of the ones
        before it. ``"parallel"``: :func:`merge_to_reference`, each state aligned to the last
        merged state (the one every worker started from; at the first merge the template's
        state), which k processes compute in parallel (module docstring).

    Attributes
    ----------
    workers_ : list of Estimator
        The k copies.
    model_ : Estimator
        The last merged model.
    n_seen_ : int
        Examples learned. ``n_merges_`` : int, merges done.

    Examples
    --------
    >>> from core.dos import DoSClassifier
    >>> parallel = DataParallel(DoSClassifier(n_features=2, rank=1), n_workers=2, interval=4)
    >>> parallel.learn_many(np.eye(2)[[0, 1, 0, 1, 0]], [1, -1, 1, -1, 1])
    >>> parallel.n_merges_, parallel.n_seen_
    (1, 5)
    """

    def __init__(
        self,
        model: Estimator,
        n_workers: int,
        interval: int,
        alignment: str = "paper",
        merge: str = "serial",
    ):
        for name, value in (("n_workers", n_workers), ("interval", interval)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if alignment not in ALIGNMENTS:
            raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
        if merge not in MERGES:
            raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
        self.n_workers = n_workers
        self.interval = interval
        self.alignment = alignment
        self.merge = merge
        self.workers_ = [model.clone() for _ in range(n_workers)]
        self.model_ = model.clone()
        self.n_seen_ = 0
        self.n_merges_ = 0

    def rounds(self, n_rows: int) -> list[tuple[int, int]]:
        """``(start, stop)`` of the parts of a batch of ``n_rows`` between merges."""
        first = min(n_rows, self.interval - self.n_seen_ % self.interval)
        bounds = [0, *range(first, n_rows, self.interval), n_rows]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    def learn_many(self, X, y) -> None:
        """Learn a batch: each part between merges dealt to the workers, then merged."""
        X, y, n_rows = sliceable(X, y)
        y = np.asarray(y)
        for start, stop in self.rounds(n_rows):
            for worker, rows in zip(
                self.workers_, deal(self.n_seen_, stop - start, self.n_workers), strict=True
            ):
                if rows.size:
                    worker.learn_many(X[start + rows], y[start + rows])
            self.n_seen_ += stop - start
            if self.n_seen_ % self.interval == 0:
                self.merge_now()

    def merge_now(self) -> None:
        """Merge the workers' states and give the merged state back to each of them."""
        if self.n_workers == 1:
            self.model_.set_state(self.workers_[0].get_state())
        else:
            states = [w.get_state() for w in self.workers_]
            if self.merge == "parallel":
                # model_ holds the last merged state: the common start of every worker
                merged = merge_to_reference(states, self.model_.get_state(), self.alignment)
            else:
                merged = merge(states, self.alignment)
            for model in (self.model_, *self.workers_):
                model.set_state(merged)
        self.n_merges_ += 1
