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
and state dicts out; nothing is modified in place, except the arrays a caller hands to
``aligned_average(..., out=)`` or ``running_average(..., into=)`` to be written (an in-place
fold of a running average).

>>> rng = np.random.default_rng(0)
>>> U, V = rng.standard_normal((2, 2, 5))
>>> aligned, reference = align((U, V), (-U, -V))
>>> bool(np.allclose(aligned[0], reference[0]) and np.allclose(aligned[1], reference[1]))
True
"""

from __future__ import annotations

import functools
import math
from numbers import Integral, Real
from typing import Any

import numpy as np

from core.kernels.align import (
    _align_light_cone,
    _align_unboost,
    _fold_cross,
    _fold_min_norm,
    _fold_norms,
    _fold_write,
)

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
    return _rotation(B @ A.T)


def _rotation(C: np.ndarray) -> np.ndarray:
    """``W Z^T`` for the SVD ``C = W S Z^T``: the orthogonal Q maximising ``tr(Q^T C)``."""
    W, _, Zt = np.linalg.svd(C)
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


def aligned_average(average, new, m: int, method: str = "paper", out=None) -> Pair:
    """Fold the m-th DoS model into a running average with alignment (eq 28, section 3.4).

    ``Theta_hat_m = (1 - 1/m) Theta_hat'_{m-1} + (1/m) Theta''_m``, where ``Theta_hat'`` is
    the minimum-norm boost of the running average ``average`` and ``Theta''_m`` is ``new``
    aligned to it (:func:`align`). Written ``A + (B - A) / m`` so that averaging a model with
    itself returns it up to the min-norm boost and rounding. For m = 1 the result is the
    min-norm boost of ``new`` (``average`` is ignored and may be None).

    With ``method="paper"`` the fold streams over the columns (features) three times (the
    light-cone norms of eq 16, the cross-covariances of eqs 26-27, the averaged columns)
    and materialises nothing of the arrays' size: it writes into ``out``, which may be the
    average's own arrays (an in-place fold). Its values are :func:`align`'s followed by the
    running mean up to rounding (its sums run column by column), and they do not depend on
    the arrays' memory layout. Float32 pairs are aligned in float64.

    Parameters
    ----------
    average : pair (U, V) or None
        The running average of the first m - 1 models.
    new : pair (U, V)
        The m-th model.
    m : int >= 1
    method : {"paper", "spectral"}
    out : pair of arrays of shape (d, n), optional
        Where to write the result (float64 or float32; may be ``average`` itself).

    Returns
    -------
    U, V : ndarray of shape (d, n)
        ``out`` when given, else new float64 arrays.

    Raises
    ------
    ValueError
        For non-finite entries, or entries so large (beyond ~1e154) that the squared norms
        of eq 16 overflow.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> U, V = rng.standard_normal((2, 2, 4))
    >>> Ua, Va = aligned_average((U, V), (-U, -V), 2)
    >>> bool(np.allclose(Ua.T @ Ua - Va.T @ Va, U.T @ U - V.T @ V))
    True
    >>> _ = aligned_average((U, V), (-U, -V), 2, out=(U, V))  # in place
    >>> bool(np.allclose(U, Ua) and np.allclose(V, Va))
    True
    """
    m = _check_m(m)
    if method not in ALIGNMENTS:
        raise ValueError(f"method must be one of {ALIGNMENTS}, got {method!r}")
    if m > 1 and average is None:
        raise ValueError("average is required when m > 1")
    if method == "paper":
        return _fold(average, new, m, out)()
    if m == 1:
        U, V = _min_norm(new, method)
    else:
        (U2, V2), (U1, V1) = align(average, new, method)
        U, V = U1 + (U2 - U1) / m, V1 + (V2 - V1) / m
    return (U, V) if out is None else _assign(out, (U, V))


def _fold(average, new, m: int, out):
    """``aligned_average`` with the paper's alignment, streamed (its docstring), in two
    steps: everything is checked and measured now (the norms, the rotations), and the
    returned function writes ``out``, so that a caller folding several pairs into place
    (``running_average``) refuses before it has written any."""
    U2, V2 = _fold_pair(new, "new")
    if out is None:
        out = (np.empty(U2.shape), np.empty(U2.shape))
    out_u, out_v = out
    if not all(
        isinstance(a, np.ndarray) and a.shape == U2.shape and a.dtype in _FOLD_DTYPES
        for a in (out_u, out_v)
    ):
        raise ValueError(f"out must be two float64 or float32 arrays of shape {U2.shape}")
    a2, b2 = _light_cone_scales(U2, V2, "new")
    if m == 1:

        def write() -> Pair:
            if a2 == 0.0:  # the zero classifier: the limit of eqs 15-16 (min_norm_boost)
                out_u[...], out_v[...] = 0.0, 0.0
            else:
                _fold_min_norm(U2, V2, a2, b2, out_u, out_v)
            return out_u, out_v

        return write
    U1, V1 = _fold_pair(average, "average")
    if U1.shape != U2.shape:
        raise ValueError(f"models of shapes {U1.shape} and {U2.shape} cannot be aligned")
    a1, b1 = _light_cone_scales(U1, V1, "average")
    d = U1.shape[0]
    CU, CV = np.empty((d, d)), np.empty((d, d))
    _fold_cross(U1, V1, a1, b1, U2, V2, a2, b2, CU, CV)
    omega_t, lam_t = (np.ascontiguousarray(_rotation(C).T) for C in (CU, CV))

    def write() -> Pair:
        _fold_write(U1, V1, a1, b1, U2, V2, a2, b2, omega_t, lam_t, float(m), out_u, out_v)
        return out_u, out_v

    return write


_FOLD_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _fold_pair(pair, what: str) -> Pair:
    """A pair of 2-D arrays of one shape, float64 or float32 as they are (no copy)."""
    U, V = (np.asarray(a) for a in pair)
    if U.dtype not in _FOLD_DTYPES or V.dtype != U.dtype:
        U, V = _check_pair(U, V, f"{what} U and V")
    if U.ndim != 2 or U.shape != V.shape:
        raise ValueError(
            f"{what} U and V must be 2-D of the same shape, got {U.shape} and {V.shape}"
        )
    return U, V


def _light_cone_scales(U, V, what: str) -> tuple[float, float]:
    """(a, b) = (e^-phi*, e^phi*) of the min-norm boost (eq 16: phi* = 1/2 ln(|S| / |D|), as
    ratios of square roots); (0, 0) for the zero classifier (``min_norm_boost``'s limit)."""
    squared_s, squared_d = _fold_norms(U, V)
    if not (math.isfinite(squared_s) and math.isfinite(squared_d)):
        if not (np.all(np.isfinite(U)) and np.all(np.isfinite(V))):
            raise ValueError(f"{what} U and V must be finite")
        raise ValueError(f"{what} U and V are too large to align (their squared norm overflows)")
    if squared_s == 0.0 or squared_d == 0.0:
        return 0.0, 0.0
    root_s, root_d = math.sqrt(math.sqrt(squared_s)), math.sqrt(math.sqrt(squared_d))
    return root_d / root_s, root_s / root_d


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


def _assign(targets: Pair, values: Pair) -> Pair:
    targets[0][...], targets[1][...] = values
    return targets


def _check_into(into, arrays: dict[str, np.ndarray]) -> None:
    if not isinstance(into, dict) or set(into) != set(arrays):
        raise ValueError("into must hold an array for each of the state's arrays")
    for name, array in arrays.items():
        target = into[name]
        if not isinstance(target, np.ndarray) or (target.shape, target.dtype) != (
            array.shape,
            array.dtype,
        ):
            raise ValueError(f"into[{name!r}] must have shape {array.shape}, dtype {array.dtype}")


def _check_state(state, what: str) -> None:
    if not isinstance(state, dict) or not {"kind", "params", "arrays", "scalars"} <= set(state):
        raise ValueError(f"{what} must be a state from get_state()")
    for name, array in state["arrays"].items():
        if not isinstance(array, np.ndarray):
            raise ValueError(f"{what} array {name!r} is not a numpy array")


def running_average(
    average_state: dict[str, Any] | None,
    state: dict[str, Any],
    m: int,
    method: str = "paper",
    into: dict[str, np.ndarray] | None = None,
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
    shared with the inputs) to load with ``model.set_state``; or, with ``into`` (arrays of
    the state's names, shapes and dtypes, e.g. the average model's own, which may also be
    ``average_state``'s), the arrays are written there and the state returned holds them
    (an in-place fold: nothing of the model's size is allocated for a DoS pair).

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
    if into is not None:
        _check_into(into, arrays)
    pairs = _dos_pairs(arrays)
    # everything checked and computed before anything is written (``into`` may be the
    # average's own arrays: a refusal leaves them as they were)
    writes = {}
    for u_name, v_name in pairs.items():
        if arrays[u_name].shape != arrays[v_name].shape:
            raise ValueError(
                f"arrays {u_name!r} and {v_name!r} have shapes {arrays[u_name].shape} and "
                f"{arrays[v_name].shape}: a DoS pair needs one shape"
            )
        previous = (
            None if m == 1 else (average_state["arrays"][u_name], average_state["arrays"][v_name])
        )
        names = (u_name, v_name)
        if into is not None:
            targets = tuple(into[name] for name in names)
        else:
            targets = tuple(np.empty(arrays[name].shape, arrays[name].dtype) for name in names)
        pair = (arrays[u_name], arrays[v_name])
        if method == "paper":
            writes[names] = _fold(previous, pair, m, targets)
        else:
            writes[names] = functools.partial(
                _assign, targets, aligned_average(previous, pair, m, method)
            )
    values = {}
    for name, array in arrays.items():
        if name in pairs or name in pairs.values():
            continue
        if m > 1 and array.dtype.kind == "f":
            previous = average_state["arrays"][name]
            with np.errstate(over="ignore", invalid="ignore"):  # (refused just below)
                values[name] = previous + (array - previous) / m
            if not np.all(np.isfinite(values[name])):
                raise ValueError(f"the average of array {name!r} overflows")
        else:
            values[name] = array
    out: dict[str, np.ndarray] = {}
    for names, write in writes.items():
        out[names[0]], out[names[1]] = write()
    for name, value in values.items():
        if into is not None:
            into[name][...] = value
            out[name] = into[name]
        else:
            out[name] = np.array(value, order="C", dtype=arrays[name].dtype, copy=True)
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
