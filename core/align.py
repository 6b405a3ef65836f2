"""Symmetries, alignment and time-averaging of models: pure functions over arrays and states.

A DoS classifier (eq 10 of Saul 2021, ``../shared/papers/dos-passive-aggressive.txt``) only
depends on its parameters through ``U^T U - V^T V``, so many parameters describe the same
classifier (section 3.2):

- rotations ``U -> Omega U``, ``V -> Lambda V`` with orthogonal d x d matrices (eqs 11-12);
- Lorentz boosts ``U -> U cosh phi - V sinh phi``, ``V -> V cosh phi - U sinh phi`` (eqs 13-14).

Averaging the raw parameters of two equivalent models can give nonsense: ``(U, V)`` and
``(-U, -V)`` average to the zero model. Section 3.4 therefore *aligns* before averaging: boost
both models to their minimum-norm form (eqs 15-16), rotate the newer one onto the reference by
orthogonal Procrustes (eqs 26-27), then take the running mean (eq 28).

Every function here is pure: arrays and state dicts (``Estimator.get_state()``) in, new arrays
and state dicts out; nothing is modified in place.

>>> rng = np.random.default_rng(0)
>>> U, V = rng.standard_normal((2, 2, 5))
>>> aligned, reference = align((U, V), (-U, -V))
>>> bool(np.allclose(aligned[0], reference[0]) and np.allclose(aligned[1], reference[1]))
True
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np

from core.kernels.align import _align_light_cone, _align_running_mean, _align_unboost

__all__ = [
    "ALIGNMENTS",
    "align",
    "aligned_average",
    "boost",
    "canonical",
    "min_norm_boost",
    "procrustes",
    "running_average",
]

Pair = tuple[np.ndarray, np.ndarray]


# -- validation ----------------------------------------------------------------------------
def _check_pair(U, V, what: str = "U and V") -> Pair:
    """Two finite float64 matrices of the same shape (d, n); copies only when needed."""
    try:
        U = np.asarray(U, dtype=np.float64)
        V = np.asarray(V, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be numeric matrices: {error}") from None
    if U.ndim != 2 or U.shape != V.shape:
        raise ValueError(f"{what} must be 2-D of the same shape, got {U.shape} and {V.shape}")
    if not (np.all(np.isfinite(U)) and np.all(np.isfinite(V))):
        raise ValueError(f"{what} must be finite")
    return U, V


def _check_m(m) -> int:
    if isinstance(m, bool) or not isinstance(m, Integral) or m < 1:
        raise ValueError(f"m (the number of averaged models) must be an integer >= 1, got {m!r}")
    return int(m)


# -- symmetries (section 3.2) ----------------------------------------------------------------
def boost(U, V, phi: float) -> Pair:
    """Lorentz boost of a DoS model by rapidity ``phi`` (eqs 13-14 of Saul 2021).

    ``U' = U cosh(phi) - V sinh(phi)`` and ``V' = V cosh(phi) - U sinh(phi)``. The
    classifier ``U^T U - V^T V`` (hence every score) is unchanged; the Frobenius norms are
    not. Boosts compose additively: ``boost(*boost(U, V, a), b) == boost(U, V, a + b)``.

    Parameters
    ----------
    U, V : array_like of shape (d, n)
    phi : float
        Finite rapidity. (cosh overflows beyond |phi| ~ 710.)

    Returns
    -------
    U', V' : ndarray of shape (d, n)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((2, 2, 3))
    >>> U2, V2 = boost(U, V, 0.3)
    >>> bool(np.allclose(U2.T @ U2 - V2.T @ V2, U.T @ U - V.T @ V))
    True
    """
    U, V = _check_pair(U, V)
    if isinstance(phi, bool) or not isinstance(phi, Real) or not math.isfinite(phi):
        raise ValueError(f"phi must be a finite number, got {phi!r}")
    c, s = math.cosh(phi), math.sinh(phi)
    return U * c - V * s, V * c - U * s


def min_norm_boost(U, V) -> tuple[np.ndarray, np.ndarray, float]:
    r"""The boost of minimum norm ``|U'|_F^2 + |V'|_F^2`` (eqs 15-16 of Saul 2021).

    Eq (16): ``phi* = 1/2 artanh(2 <U, V> / (|U|_F^2 + |V|_F^2))``.

    We evaluate it in light-cone coordinates ``S = U + V``, ``D = U - V``, in which the boost
    of eqs (13-14) is a pair of scalings ``S -> e^-phi S``, ``D -> e^phi D`` and the norm is
    ``(e^-2phi |S|^2 + e^2phi |D|^2) / 2``. Its minimiser ``phi* = 1/2 ln(|S| / |D|)`` is
    eq (16) exactly (``tanh 2phi* = (|S|^2 - |D|^2) / (|S|^2 + |D|^2) = 2<U,V> /
    (|U|^2 + |V|^2)``), the minimum is ``|S| |D|`` and the boosted model has
    ``|S'| = |D'| = sqrt(|S| |D|)``. This form needs no clipping of the artanh argument and
    stays accurate when that argument rounds to +-1, where ``cosh phi*`` is huge and eqs
    (13-14) would cancel catastrophically.

    **Degenerate cases.** If ``U = V`` (``D = 0``) or ``U = -V`` (``S = 0``) the classifier
    ``U^T U - V^T V = (S^T D + D^T S) / 2`` is zero, the artanh argument is +-1 and no finite
    boost attains the infimum 0: it is approached as phi -> +inf (``U = V``) or -inf
    (``U = -V``). We return that limit: zero matrices and ``phi = +inf`` / ``-inf``. For
    ``U = V = 0`` the model is already minimal: zeros and ``phi = 0``. The arrays are always
    finite (never NaN); only ``phi`` can be infinite.

    Parameters
    ----------
    U, V : array_like of shape (d, n)

    Returns
    -------
    U', V' : ndarray of shape (d, n)
        The minimum-norm equivalent model; ``<U', V'> = 0`` up to rounding.
    phi : float
        The boost ``phi*`` with ``(U', V') = boost(U, V, phi*)`` (+-inf in the degenerate
        cases above).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((2, 2, 3))
    >>> U1, V1, phi = min_norm_boost(*boost(U, V, 0.7))
    >>> round(float(np.sum(U1 * V1)), 12) + 0.0
    0.0
    >>> bool(np.allclose(U1, min_norm_boost(U, V)[0]))
    True
    >>> min_norm_boost(U, U)[2]
    inf
    """
    U, V = _check_pair(U, V)
    # one pass each for C-contiguous pairs (states), numpy's expressions otherwise (views
    # keep the memory layout that numpy gives their temporaries, and so the norms' sums)
    fused = U.flags.c_contiguous and V.flags.c_contiguous
    if fused:
        S, D = np.empty(U.shape), np.empty(U.shape)
        _align_light_cone(U, V, S, D)
    else:
        S, D = U + V, U - V
    norm_s, norm_d = float(np.linalg.norm(S)), float(np.linalg.norm(D))
    if norm_s == 0.0 and norm_d == 0.0:
        return np.zeros_like(U), np.zeros_like(V), 0.0
    if norm_s == 0.0 or norm_d == 0.0:
        return np.zeros_like(U), np.zeros_like(V), math.inf if norm_d == 0.0 else -math.inf
    # ratios of square roots, not the square root of a ratio: |S| / |D| may overflow
    root_s, root_d = math.sqrt(norm_s), math.sqrt(norm_d)
    phi = math.log(root_s) - math.log(root_d)
    if fused:
        _align_unboost(S, D, root_d / root_s, root_s / root_d)
        return S, D, phi
    S = S * (root_d / root_s)
    D = D * (root_s / root_d)
    return 0.5 * (S + D), 0.5 * (S - D), phi


def procrustes(A, B) -> np.ndarray:
    """Orthogonal Q minimising ``|Q A - B|_F`` (eqs 26-27 of Saul 2021, orthogonal Procrustes).

    ``|Q A - B|^2 = |A|^2 + |B|^2 - 2 tr(Q^T B A^T)``, maximised over orthogonal Q by
    ``Q = W Z^T`` where ``B A^T = W S Z^T`` is an SVD. A and B are short and wide (d x n,
    d = rank), so the SVD is of a small d x d matrix. When ``B A^T`` is singular the optimum
    is not unique and any one minimiser is returned.

    Parameters
    ----------
    A, B : array_like of shape (d, n)

    Returns
    -------
    Q : ndarray of shape (d, d), orthogonal.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((2, 4))
    >>> R = np.array([[0.0, -1.0], [1.0, 0.0]])
    >>> bool(np.allclose(procrustes(R @ A, A), R.T))
    True
    """
    A, B = _check_pair(A, B, "A and B")
    W, _, Zt = np.linalg.svd(B @ A.T)
    return W @ Zt


# -- alignment and averaging (section 3.4) -------------------------------------------------
def canonical(U, V) -> Pair:
    """The minimum-norm factorisation of the model's quadratic form (exact symmetry breaking).

    The classifier depends on (U, V) only through ``M = U^T U - V^T V`` (eq 10), so every
    transformation that keeps M is a symmetry: the rotations of eqs (11)-(12) (independent for
    U and V), the boosts of eqs (13)-(14), and their mixtures (the group O(d, d) acting on the
    stacked ``[U; V]``). Over all factorisations ``M = U'^T U' - V'^T V'`` with d rows each,
    ``|U'|_F^2 + |V'|_F^2 >= ||M||_*`` (the nuclear norm), with equality for the spectral one:
    the rows of ``U'`` are ``sqrt(lambda_i) e_i`` over the positive eigenpairs of M (at most d of
    them, by Sylvester's law of inertia) and those of ``V'`` ``sqrt(-lambda_j) e_j`` over the
    negative ones, largest first, zero rows last, each row's largest entry made positive.

    So ``canonical`` returns the same arrays for every member of a symmetry orbit (when the
    eigenvalues are distinct; within a repeated eigenvalue only a rotation remains, which
    Procrustes removes), where the paper's min-norm boost (eqs 15-16) only minimises over one
    boost angle and depends on the rotations through ``<U, V>``. Cost: one QR of the
    (n, 2d) matrix ``[U; V]^T`` and one eigendecomposition of a 2d x 2d matrix, O(n d^2).

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> U, V = rng.standard_normal((2, 2, 5))
    >>> Q1, Q2 = (np.linalg.qr(rng.standard_normal((2, 2)))[0] for _ in range(2))
    >>> A, B = canonical(U, V)
    >>> A2, B2 = canonical(*boost(Q1 @ U, Q2 @ V, 0.7))
    >>> bool(np.allclose(A, A2) and np.allclose(B, B2))
    True
    >>> bool(np.allclose(A.T @ A - B.T @ B, U.T @ U - V.T @ V))
    True
    """
    U, V = _check_pair(U, V)
    d, n = U.shape
    Q, R = np.linalg.qr(np.vstack([U, V]).T)  # [U; V]^T = Q R, Q of shape (n, r)
    K = R[:, :d] @ R[:, :d].T - R[:, d:] @ R[:, d:].T  # M = Q K Q^T
    eigenvalues, vectors = np.linalg.eigh(K)
    directions = (Q @ vectors).T  # rows: eigenvectors of M
    # eigenvalues below the rounding error of K (relative to |U|^2 + |V|^2) are zeros
    tolerance = float(np.sum(R * R)) * max(K.shape[0], 1) * np.finfo(float).eps
    out = []
    for sign in (1.0, -1.0):
        order = np.argsort(-sign * eigenvalues)[:d]
        keep = order[sign * eigenvalues[order] > tolerance]
        rows = np.sqrt(sign * eigenvalues[keep])[:, None] * directions[keep]
        if rows.shape[0]:
            flip = np.sign(rows[np.arange(rows.shape[0]), np.argmax(np.abs(rows), axis=1)])
            rows = rows * flip[:, None]
        full = np.zeros((d, n), dtype=np.result_type(U.dtype, float))
        full[: rows.shape[0]] = rows
        out.append(full)
    return out[0], out[1]


ALIGNMENTS = ("paper", "spectral")


def align(reference, other, method: str = "paper") -> tuple[Pair, Pair]:
    """Align the DoS model ``other = (U2, V2)`` to ``reference = (U1, V1)`` (section 3.4).

    Step 1: boost both to their minimum-norm forms ``(U1', V1')``, ``(U2', V2')`` (eqs 15-16).
    Step 2: rotate ``U2'`` onto ``U1'`` and ``V2'`` onto ``V1'`` by orthogonal Procrustes,
    ``Omega = procrustes(U2', U1')`` and ``Lambda = procrustes(V2', V1')`` (eqs 26-27).
    ``(Omega U2', Lambda V2')`` is the same classifier as ``other``.

    The alignment recovers ``reference`` exactly from any copy ``boost(Omega U1, Omega V1,
    phi)`` (one rotation for both matrices, any boost), and from ``boost(Omega U1, Lambda V1,
    phi)`` when ``U1 V1^T = 0``. For a general reference and independent rotations it is a
    heuristic: ``<Omega U, Lambda V>`` differs from ``<U, V>``, so the min-norm boost differs.

    ``method="spectral"`` replaces step 1 by :func:`canonical`, the minimum-norm form over
    every symmetry, which makes the alignment exact for independent rotations too.

    Parameters
    ----------
    reference, other : pairs (U, V) of arrays of one shape (d, n)
    method : {"paper", "spectral"}

    Returns
    -------
    aligned : (U2'', V2'')
        ``other`` boosted and rotated onto the reference.
    reference_min_norm : (U1', V1')
        The minimum-norm form of ``reference``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> U, V = rng.standard_normal((2, 3, 6))
    >>> Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    >>> (U2, V2), (U1, V1) = align((U, V), boost(Q @ U, Q @ V, -0.4))
    >>> bool(np.allclose(U2, U1) and np.allclose(V2, V1))
    True
    """
    U1, V1 = _min_norm(reference, method)
    U2, V2 = _min_norm(other, method)
    if U1.shape != U2.shape:
        raise ValueError(f"models of shapes {U1.shape} and {U2.shape} cannot be aligned")
    omega = procrustes(U2, U1)
    lam = procrustes(V2, V1)
    return (omega @ U2, lam @ V2), (U1, V1)


def _min_norm(pair, method: str) -> Pair:
    if method == "paper":
        U, V, _ = min_norm_boost(*pair)
        return U, V
    if method == "spectral":
        return canonical(*pair)
    raise ValueError(f"method must be one of {ALIGNMENTS}, got {method!r}")


def aligned_average(average, new, m: int, method: str = "paper") -> Pair:
    """Fold the m-th DoS model into a running average with alignment (eq 28, section 3.4).

    ``Theta_hat_m = (1 - 1/m) Theta_hat'_{m-1} + (1/m) Theta''_m``, where ``Theta_hat'`` is
    the minimum-norm boost of the running average ``average`` and ``Theta''_m`` is ``new``
    aligned to it (:func:`align`). Written ``A + (B - A) / m`` so that averaging a model with
    itself returns it up to the min-norm boost and rounding. For m = 1 the result is the
    min-norm boost of ``new`` (``average`` is ignored and may be None).

    Parameters
    ----------
    average : pair (U, V) or None
        The running average of the first m - 1 models.
    new : pair (U, V)
        The m-th model.
    m : int >= 1

    Returns
    -------
    U, V : ndarray of shape (d, n)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((2, 2, 4))
    >>> Ua, Va = aligned_average((U, V), (-U, -V), 2)
    >>> bool(np.allclose(Ua.T @ Ua - Va.T @ Va, U.T @ U - V.T @ V))
    True
    """
    m = _check_m(m)
    if m == 1:
        return _min_norm(new, method)
    if average is None:
        raise ValueError("average is required when m > 1")
    (U2, V2), (U1, V1) = align(average, new, method)
    if not all(a.flags.c_contiguous for a in (U1, V1, U2, V2)):
        return U1 + (U2 - U1) / m, V1 + (V2 - V1) / m
    U, V = np.empty(U1.shape), np.empty(V1.shape)
    _align_running_mean(U1, U2, m, U)  # U1 + (U2 - U1) / m, in one pass
    _align_running_mean(V1, V2, m, V)
    return U, V


def _dos_pairs(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """``<prefix>U_`` name -> ``<prefix>V_`` name, for each DoS pair in a state's arrays."""
    pairs = {}
    for name in arrays:
        prefix, _, last = name.rpartition(".")
        if last != "U_":
            continue
        partner = f"{prefix}.V_" if prefix else "V_"
        if partner in arrays:
            pairs[name] = partner
    return pairs


def _check_state(state, what: str) -> None:
    if not isinstance(state, dict) or not {"kind", "params", "arrays", "scalars"} <= set(state):
        raise ValueError(f"{what} must be a state from get_state()")
    for name, array in state["arrays"].items():
        if not isinstance(array, np.ndarray):
            raise ValueError(f"{what} array {name!r} is not a numpy array")


def running_average(
    average_state: dict[str, Any] | None, state: dict[str, Any], m: int, method: str = "paper"
) -> dict[str, Any]:
    """Fold the m-th model state into the running average of states (eq 28, section 3.4).

    Works for any model whose state follows ``core.base`` (``{"kind", "params", "arrays",
    "scalars"}``, composite models with dotted prefixes):

    - each pair of arrays ``<prefix>U_``, ``<prefix>V_`` (a DoS model, possibly inside a
      composite one) gets the aligned average :func:`aligned_average`;
    - every other floating-point array (e.g. ``w_`` of ``LinearPA``, or ``3.w_``) gets the
      plain running mean ``A + (B - A) / m`` (eq 28);
    - non-float arrays and scalars (counters) are taken from the newest ``state``.

    ``method`` chooses the alignment of DoS pairs (:func:`align`: ``"paper"`` or
    ``"spectral"``).

    With m = 1 (``average_state`` may be None) the result is a copy of ``state`` with its DoS
    pairs boosted to their minimum-norm forms. The result is a new state dict (nothing is
    shared with the inputs) to load with ``model.set_state``.

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> model = LinearPA(n_features=1)
    >>> _ = model.learn_one([1.0], 1)
    >>> first = model.get_state()
    >>> _ = model.learn_one([1.0], -1)
    >>> average = running_average(running_average(None, first, 1), model.get_state(), 2)
    >>> average["arrays"]["w_"], first["arrays"]["w_"], model.w_
    (array([0., 0.]), array([0.5, 0.5]), array([-0.5, -0.5]))
    """
    m = _check_m(m)
    _check_state(state, "state")
    if m > 1:
        if average_state is None:
            raise ValueError("average_state is required when m > 1")
        _check_state(average_state, "average_state")
        if average_state["kind"] != state["kind"] or average_state["params"] != state["params"]:
            raise ValueError("average_state and state are for different models")
        if set(average_state["arrays"]) != set(state["arrays"]):
            raise ValueError("average_state and state hold different arrays")
        for name, array in state["arrays"].items():
            previous = average_state["arrays"][name]
            if previous.shape != array.shape or previous.dtype != array.dtype:
                raise ValueError(
                    f"array {name!r}: average has shape {previous.shape} and dtype "
                    f"{previous.dtype}, state has {array.shape} and {array.dtype}"
                )
    arrays = state["arrays"]
    pairs = _dos_pairs(arrays)
    out: dict[str, np.ndarray] = {}
    for u_name, v_name in pairs.items():
        if arrays[u_name].shape != arrays[v_name].shape:
            raise ValueError(
                f"arrays {u_name!r} and {v_name!r} have shapes {arrays[u_name].shape} and "
                f"{arrays[v_name].shape}: a DoS pair needs one shape"
            )
        previous = (
            None if m == 1 else (average_state["arrays"][u_name], average_state["arrays"][v_name])
        )
        U, V = aligned_average(previous, (arrays[u_name], arrays[v_name]), m, method)
        out[u_name] = np.ascontiguousarray(U, dtype=arrays[u_name].dtype)
        out[v_name] = np.ascontiguousarray(V, dtype=arrays[v_name].dtype)
    for name, array in arrays.items():
        if name in out:
            continue
        if m > 1 and array.dtype.kind == "f":
            previous = average_state["arrays"][name]
            mean = previous + (array - previous) / m
            out[name] = np.ascontiguousarray(mean, dtype=array.dtype)
        else:
            out[name] = np.array(array, order="C", copy=True)
    return {
        "kind": state["kind"],
        "params": _copy_params(state["params"]),
        "arrays": {name: out[name] for name in arrays},
        "scalars": dict(state["scalars"]),
    }


def _copy_params(value):
    if isinstance(value, dict):
        return {k: _copy_params(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_params(v) for v in value]
    return value
