"""Loaders for the data in ``../shared/data`` and the INFIMNIST-style deformation stream.

- :func:`load_svmlight` reads the LIBSVM files (``label index:value ...``, 1-based indices)
  into a ``scipy.sparse.csr_matrix`` with one vectorised parse (no Python object per feature).
- :func:`load_mnist_test` reads the 10,000 MNIST test digits from the gzip IDX files;
  :func:`mnist_split` cuts them into 8,000 source digits for the deformation stream and
  2,000 clean test digits.
- :class:`DeformationStream` draws an endless sequence of elastically distorted digits
  (Simard et al. 2003), the stand-in here for INFIMNIST (Loosli, Canu & Bottou 2007), the
  data set of section 4 of the DoS paper (whose generator needs the 60,000 MNIST training
  images, which are not available here).

``data_dir()`` is ``../shared/data`` relative to the repository root, or the directory named by
the environment variable ``LORENTZTRON_DATA_DIR``.

>>> import numpy as np
>>> images = np.zeros((1, 28, 28), dtype=np.uint8)
>>> images[0, 10:18, 12:16] = 255
>>> stream = DeformationStream(images, np.array([7]), seed=0)
>>> X, y = stream.take(3)
>>> X.shape, X.dtype, y.tolist()
((3, 784), dtype('float64'), [7, 7, 7])
"""

from __future__ import annotations

import gzip
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from core.config import FLOAT, INDEX
from core.features import CSRBatch, as_batch
from core.kernels.datasets import (
    PAD,
    SVMLIGHT_OK,
    _datasets_deform_batch,
    _datasets_parse_svmlight,
    _datasets_svmlight_bounds,
)

__all__ = [
    "DATA_DIR_ENV",
    "MNIST_N_SOURCE",
    "DeformationStream",
    "data_dir",
    "load_idx",
    "load_mnist_test",
    "load_svmlight",
    "mnist_split",
    "parse_svmlight",
    "SvmlightIndexError",
    "smoothing_basis",
    "svmlight_batch",
]

#: Environment variable that overrides :func:`data_dir`.
DATA_DIR_ENV = "LORENTZTRON_DATA_DIR"

#: MNIST test digits used as sources of the deformation stream; the rest is the test set.
MNIST_N_SOURCE = 8000

_INT64_MAX = np.iinfo(np.int64).max


def data_dir() -> Path:
    """The shared data directory: ``$LORENTZTRON_DATA_DIR`` or ``<repo>/../shared/data``."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


# -- svmlight / LIBSVM ------------------------------------------------------------------------


def load_svmlight(path: str | os.PathLike, n_features: int | None = None):
    """Read a svmlight / LIBSVM file into ``(X, y)``.

    ``X`` is a ``scipy.sparse.csr_matrix`` of float64 with sorted indices (duplicates
    summed, explicit zeros dropped); ``y`` a float64 array of the labels. Indices in the file
    are 1-based; column ``j - 1`` holds feature ``j``. ``n_features`` fixes the number of
    columns (e.g. 123 for ``a9a.t``, whose last feature never occurs); by default it is the
    largest index. Comments (``#`` to the end of a line) and blank lines are skipped.

    Raises ``ValueError`` naming the line of a malformed row (non-numeric or non-finite
    label or value, a token without ``index:value`` form, index 0) or the first line with an
    index above ``n_features`` (``SvmlightIndexError``).
    """
    return parse_svmlight(Path(path).read_bytes(), n_features, source=str(path))


def parse_svmlight(
    data: bytes,
    n_features: int | None = None,
    source: str = "<bytes>",
    *,
    decimal: str = "eisel-lemire",
):
    """``load_svmlight`` over bytes already in memory (an HTTP body, say).

    One numba pass over the raw bytes (``_datasets_parse_svmlight``) splits the lines,
    checks the syntax of every row (``label index:value ...``, numbers
    ``[-+]?(digits[.digits]|.digits)([eE][-+]?digits)?``, indices plain decimal integers)
    and parses the numbers, every value bit-identical to ``float(token)``: by Clinger's
    fast path, then (``decimal="eisel-lemire"``) by Eisel-Lemire's correctly rounded
    conversion (Lemire 2021), and the few numbers neither decides (more than 19 significant
    digits, subnormals, rare near-ties) by Python's ``float``. ``decimal="python"`` gives
    Python every number outside Clinger's path (17-digit ``repr`` output, exponents beyond
    +-22): the behaviour before Eisel-Lemire, kept as a baseline for benchmarks and tests.
    Errors, in this order: the first line that is not a svmlight row (named by its
    number), a non-finite label or value, a 0 index (named by its row), an index beyond
    int64, an index above ``n_features`` (the first one, named by its line:
    ``SvmlightIndexError``).
    """
    labels, indptr, indices, values, n_features, _ = _svmlight_arrays(
        data, n_features, source, decimal
    )
    X = sp.csr_matrix((values, indices, indptr), shape=(labels.shape[0], n_features), dtype=FLOAT)
    # passes over the few non-zeros, even when canonical: scipy's errors stay those of before
    X.sum_duplicates()
    X.eliminate_zeros()
    return X, labels


def svmlight_batch(
    data: bytes, n_features: int, source: str = "<bytes>"
) -> tuple[CSRBatch, np.ndarray]:
    """``parse_svmlight`` straight into a validated ``CSRBatch`` of ``n_features`` columns
    and the labels: the same values, without scipy's matrix in between (no int32 copy of
    the indices, no second validation pass) when every row is written in increasing index
    order, as clients write rows; other bodies go through ``as_batch``."""
    labels, indptr, indices, values, n_features, canonical = _svmlight_arrays(
        data, n_features, source, "eisel-lemire"
    )
    if canonical:
        # the parse checked all that as_batch checks: indices in [0, n_features) and
        # strictly increasing along rows, values finite (and non-zero)
        return CSRBatch(indptr, indices, values), labels
    X = sp.csr_matrix((values, indices, indptr), shape=(labels.shape[0], n_features), dtype=FLOAT)
    X.sum_duplicates()
    X.eliminate_zeros()
    return as_batch(X, n_features), labels


class SvmlightIndexError(ValueError):
    """A feature index above ``n_features``: the first one in the text, with its 1-based
    ``line`` (blank and comment lines counted), as ``details`` for an error answer."""

    def __init__(self, source: str, line: int, index: int, n_features: int):
        self.line, self.index, self.n_features = line, index, n_features
        super().__init__(f"{source}:{line}: feature index {index} exceeds n_features={n_features}")

    @property
    def details(self) -> dict:
        return {"line": self.line, "index": self.index, "n_features": self.n_features}


def _svmlight_arrays(data: bytes, n_features, source: str, decimal: str):
    """The parse behind ``parse_svmlight``: ``(labels, indptr, indices, values, n_features,
    canonical)``, the zeros left out, with every error raised; ``canonical`` when no row
    needs sorting or summing of duplicates."""
    if decimal not in ("eisel-lemire", "python"):
        raise ValueError(f"decimal must be 'eisel-lemire' or 'python', got {decimal!r}")
    path = source
    raw = np.frombuffer(data, dtype=np.uint8)
    max_rows, max_nnz = _datasets_svmlight_bounds(raw)
    labels = np.empty(max_rows, dtype=FLOAT)
    indptr = np.empty(max_rows + 1, dtype=INDEX)
    indices = np.empty(max_nnz, dtype=INDEX)
    values = np.empty(max_nnz, dtype=FLOAT)
    fallback = np.empty((3, max_rows + max_nnz), dtype=INDEX)
    valid = n_features is None or (
        not isinstance(n_features, bool)
        and isinstance(n_features, int | np.integer)
        and n_features >= 0
    )
    # -1: no limit (the kernel takes an int64)
    limit = min(int(n_features), _INT64_MAX) if valid and n_features is not None else -1
    (
        n_rows, nnz, n_fallback, error, line, offset, first_zero_row, largest, overflow_line,
        excess_line, excess_index, canonical, infinite,
    ) = _datasets_parse_svmlight(
        raw, labels, indptr, indices, values, *fallback, decimal == "eisel-lemire", limit
    )  # fmt: skip
    if error != SVMLIGHT_OK:
        stop = data.find(b"\n", offset)
        text = data[offset : stop if stop >= 0 else len(data)]
        shown = text.split(b"#", 1)[0].strip()[:60].decode("ascii", "replace")
        raise ValueError(f"{path}:{line}: not a svmlight row: {shown!r}")
    for start, stop, slot in fallback[:, :n_fallback].T.tolist():
        value = float(data[start:stop])
        if slot >= 0:
            values[slot] = value
            canonical = canonical and value != 0.0  # a zero to eliminate
        else:
            labels[-1 - slot] = value
        infinite = infinite or not math.isfinite(value)
    labels = labels[:n_rows]
    indptr = indptr[: n_rows + 1]
    indices = indices[:nnz]
    values = values[:nnz]
    if infinite:
        raise ValueError(f"{path}: labels and values must be finite")
    if first_zero_row >= 0:
        raise ValueError(
            f"{path}: row {first_zero_row}: feature index 0; svmlight indices are 1-based"
        )
    if overflow_line:
        raise ValueError(f"{path}:{overflow_line}: feature index beyond {_INT64_MAX}")
    if not valid:
        raise ValueError(f"n_features must be a non-negative integer, got {n_features!r}")
    if n_features is None:
        n_features = int(largest)
    elif excess_line:
        raise SvmlightIndexError(path, int(excess_line), int(excess_index), int(n_features))
    return labels, indptr, indices, values, int(n_features), canonical


# -- MNIST ------------------------------------------------------------------------------------

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def load_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not), the format of the MNIST distribution."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        data = stream.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file")
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    offset = 4 + 4 * ndim
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: {len(data)} bytes, expected {expected} for shape {shape}")
    array = np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def load_mnist_test() -> tuple[np.ndarray, np.ndarray]:
    """The 10,000 MNIST test digits: images uint8 (10000, 28, 28) and labels uint8 (10000,)."""
    folder = data_dir() / "mnist"
    images = load_idx(folder / "t10k-images-idx3-ubyte.gz")
    labels = load_idx(folder / "t10k-labels-idx1-ubyte.gz")
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{images.shape[0]} MNIST images but {labels.shape[0]} labels")
    return images, labels


def mnist_split(n_source: int = MNIST_N_SOURCE):
    """``(source_images, source_labels), (test_images, test_labels)`` from the MNIST test set.

    The first ``n_source`` (8,000) digits feed the deformation stream; the remaining 2,000
    are the clean test set, never seen in training, not even deformed.
    """
    images, labels = load_mnist_test()
    return (images[:n_source], labels[:n_source]), (images[n_source:], labels[n_source:])


# -- deformation stream -----------------------------------------------------------------------


def smoothing_basis(size: int, sigma: float, variance: float = 1.0, keep: float = 0.995):
    """Factor ``B`` (size, r) with ``B B^T`` ~ the covariance of 1-D Gaussian-smoothed noise.

    White noise of the given variance on an unbounded grid, filtered by a normalised Gaussian
    of standard deviation ``sigma`` (truncated at 4 sigma like ``scipy.ndimage``), has the
    stationary covariance ``K = variance * G G^T``. ``B`` holds its leading eigenvectors scaled
    by the square roots of the eigenvalues, enough of them (r) for ``B B^T`` to carry a
    fraction ``sqrt(keep)`` of the trace, so the 2-D field ``B Z B^T`` keeps ``keep`` of it.
    """
    radius = int(np.ceil(4.0 * sigma))
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    G = np.zeros((size, size + 2 * radius))
    for i in range(size):
        G[i, i : i + 2 * radius + 1] = taps
    eigenvalues, eigenvectors = np.linalg.eigh(variance * (G @ G.T))
    eigenvalues = np.clip(eigenvalues[::-1], 0.0, None)
    eigenvectors = eigenvectors[:, ::-1]
    fraction = np.cumsum(eigenvalues) / eigenvalues.sum()
    rank = int(np.searchsorted(fraction, np.sqrt(keep))) + 1
    rank = min(rank, size)
    return np.ascontiguousarray(eigenvectors[:, :rank] * np.sqrt(eigenvalues[:rank]))


class DeformationStream:
    """An endless (or ``n``-limited) stream of elastically distorted digits, INFIMNIST-style.

    Each example picks a source digit uniformly at random and resamples it (bilinear) at

        p' = c + A (p - c) + t + alpha * d(p),

    where ``d`` is a random displacement field, white noise of variance 1/3 (that of
    Uniform(-1, 1), Simard et al. 2003) smoothed by a Gaussian of standard deviation
    ``sigma`` pixels, independently for the x and y components; ``A`` combines a rotation of
    up to ``max_rotation`` degrees, a scaling by up to ``max_scale`` (relative), a shear up to
    ``max_shear``, and ``t`` a translation of up to ``max_shift`` pixels (all uniform). The
    defaults are Simard's sigma = 4, alpha = 34 and a small affine jitter; the displacement
    then has a standard deviation of about 1.4 px per component.

    The smoothed fields are drawn exactly in distribution up to a truncation to the leading
    components carrying 99.5 % of their variance (:func:`smoothing_basis`): ``B Z B^T``
    with ``Z`` an r x r standard normal matrix (r = 6 for sigma = 4 on 28 px).

    Randomness comes from three independent generators spawned from ``seed`` (sources,
    fields, affine maps), each consumed example by example: the stream is a deterministic
    function of the seed, whatever the chunk sizes used to read it.

    Parameters
    ----------
    images : uint8 array (n_images, height, width)
        Source images (grey levels 0..255).
    labels : array (n_images,)
        Their labels (returned as int64).
    seed : int
    n : int or None
        Number of examples the stream yields when iterated (None: endless).
    chunk_size : int
        Examples per chunk when iterated.
    sigma, alpha : float
        Smoothing (pixels) and amplitude of the elastic displacement field.
    max_rotation, max_scale, max_shear, max_shift : float
        Bounds of the affine jitter: degrees, relative scale, shear factor, pixels.

    Examples
    --------
    >>> images = np.zeros((2, 28, 28), dtype=np.uint8); images[:, 10:18, 12:16] = 255
    >>> X, y = DeformationStream(images, np.array([3, 7]), seed=0).take(4)
    >>> X.shape, y.dtype, bool(X.max() <= 1.0)
    ((4, 784), dtype('int64'), True)

    Attributes
    ----------
    basis_rows_, basis_cols_ : ndarray of shape (height, r), (width, r)
        Factors of the smoothed field (:func:`smoothing_basis`).
    n_generated_ : int
        Examples generated so far.
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        seed: int = 0,
        *,
        n: int | None = None,
        chunk_size: int = 10_000,
        sigma: float = 5.0,
        alpha: float = 34.0,
        max_rotation: float = 5.0,
        max_scale: float = 0.05,
        max_shear: float = 0.05,
        max_shift: float = 1.0,
    ):
        images = np.asarray(images)
        labels = np.asarray(labels)
        if images.ndim != 3 or images.dtype != np.uint8 or images.shape[0] == 0:
            raise ValueError(
                f"images must be a non-empty uint8 array (n, h, w), got {images.shape}"
            )
        if labels.shape != (images.shape[0],):
            raise ValueError(f"got {labels.shape} labels for {images.shape[0]} images")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"n must be None or a non-negative integer, got {n!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        for name, value in [("sigma", sigma), ("alpha", alpha), ("max_scale", max_scale)]:
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if sigma <= 0 or max_scale >= 1:
            raise ValueError("sigma must be > 0 and max_scale < 1")
        self.images = np.ascontiguousarray(images)
        self._padded = np.pad(self.images, ((0, 0), (PAD, PAD), (PAD, PAD)))
        self.labels = labels.astype(np.int64)
        self.seed = seed
        self.n = n
        self.chunk_size = chunk_size
        self.sigma = float(sigma)
        self.alpha = float(alpha)
        self.max_rotation = float(max_rotation)
        self.max_scale = float(max_scale)
        self.max_shear = float(max_shear)
        self.max_shift = float(max_shift)
        height, width = images.shape[1:]
        # the noise variance 1/3 goes into the row factor only: field = B_r Z B_c^T
        rows = smoothing_basis(height, self.sigma, variance=1.0 / 3.0)
        cols = smoothing_basis(width, self.sigma)
        rank = max(rows.shape[1], cols.shape[1])
        self.basis_rows_ = _pad_columns(rows, rank)
        self.basis_cols_ = _pad_columns(cols, rank)
        source_seq, field_seq, affine_seq = np.random.SeedSequence(seed).spawn(3)
        self._source_rng = np.random.default_rng(source_seq)
        self._field_rng = np.random.default_rng(field_seq)
        self._affine_rng = np.random.default_rng(affine_seq)
        self.n_generated_ = 0

    @property
    def n_pixels(self) -> int:
        return self.images.shape[1] * self.images.shape[2]

    def take(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``size`` examples: X float64 (size, height * width) in [0, 1], y int64."""
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
            raise ValueError(f"size must be a non-negative integer, got {size!r}")
        n_images = self.images.shape[0]
        # floor(u * n) rather than integers(): random() draws are chunk-size invariant
        sources = np.minimum((self._source_rng.random(size) * n_images).astype(INDEX), n_images - 1)
        rank = self.basis_rows_.shape[1]
        noise = self._field_rng.standard_normal((size, 2, rank, rank))
        affine = self._affine_maps(2.0 * self._affine_rng.random((size, 5)) - 1.0)
        X = np.empty((size, self.n_pixels), dtype=FLOAT)
        _datasets_deform_batch(
            self._padded, sources, noise, affine, self.basis_rows_, self.basis_cols_, self.alpha, X
        )
        self.n_generated_ += size
        return X, self.labels[sources]

    def _affine_maps(self, u: np.ndarray) -> np.ndarray:
        """Rows [a11, a12, a21, a22, tx, ty] from uniform(-1, 1) draws (size, 5)."""
        theta = np.deg2rad(self.max_rotation) * u[:, 0]
        scale = 1.0 + self.max_scale * u[:, 1]
        shear = self.max_shear * u[:, 2]
        cos, sin = np.cos(theta) / scale, np.sin(theta) / scale
        # A = R(theta) [[1, shear], [0, 1]] / scale maps output to source coordinates
        affine = np.empty((u.shape[0], 6))
        affine[:, 0] = cos
        affine[:, 1] = cos * shear - sin
        affine[:, 2] = sin
        affine[:, 3] = sin * shear + cos
        affine[:, 4] = self.max_shift * u[:, 3]
        affine[:, 5] = self.max_shift * u[:, 4]
        return affine

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Chunks of ``chunk_size`` examples until ``n`` have been generated (or forever)."""
        while self.n is None or self.n_generated_ < self.n:
            size = self.chunk_size
            if self.n is not None:
                size = min(size, self.n - self.n_generated_)
            yield self.take(size)


def _pad_columns(basis: np.ndarray, rank: int) -> np.ndarray:
    padded = np.zeros((basis.shape[0], rank))
    padded[:, : basis.shape[1]] = basis
    return padded
