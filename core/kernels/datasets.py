"""Kernels of the INFIMNIST-style deformation stream (``core.datasets.DeformationStream``).

Elastic distortions after Simard, Steinkraus & Platt, "Best practices for convolutional neural
networks applied to visual document analysis" (ICDAR 2003): a random displacement field
``alpha * (G_sigma * noise)`` (white noise smoothed by a Gaussian) plus a small affine map,
resampled with bilinear interpolation. The smoothed field is drawn as ``B_rows Z B_cols^T``
with ``Z`` an r x r standard normal matrix and ``B`` the leading eigenvectors of the 1-D
smoothing covariance scaled by the square roots of their eigenvalues (``core.datasets``
builds them): the same Gaussian distribution as filtering white noise, truncated to the
components that carry >= 99.5 % of its variance, at O(r (H W + r H)) a field instead of
O(H W sigma).
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _datasets_field(basis_rows, basis_cols, Z, scratch, field):
    """field = basis_rows Z basis_cols^T, i.e. sum_ab Z_ab phi_a(i) psi_b(j)."""
    rank = Z.shape[0]
    height = basis_rows.shape[0]
    width = basis_cols.shape[0]
    for a in range(rank):
        for j in range(width):
            total = 0.0
            for b in range(rank):
                total += Z[a, b] * basis_cols[j, b]
            scratch[a, j] = total
    for i in range(height):
        for j in range(width):
            field[i, j] = 0.0
        for a in range(rank):
            c = basis_rows[i, a]
            for j in range(width):
                field[i, j] += c * scratch[a, j]


#: zero border added around the source images so that the bilinear lookups need no branch
PAD = 3


@numba.njit(**NJIT_OPTIONS)
def _datasets_deform_batch(padded, sources, noise, affine, basis_rows, basis_cols, alpha, out):
    """Deform source image ``sources[n]`` into ``out[n]`` (flattened, grey levels / 255).

    padded: uint8 (n_images, H + 2 PAD, W + 2 PAD), the source images inside a zero border of
    PAD pixels; sources: int64 (m,); noise: (m, 2, r, r) standard normal; affine: (m, 6) rows
    ``[a11, a12, a21, a22, tx, ty]`` mapping output to source coordinates about the image
    centre; basis_rows (H, r), basis_cols (W, r); out: float64 (m, H * W).

    Output pixel (i, j) samples the source at ``c + A (p - c) + t + alpha * d(p)`` with
    ``p = (j, i)``, ``d`` the smoothed displacement field; pixels outside the source are 0.
    """
    height = padded.shape[1] - 2 * PAD
    width = padded.shape[2] - 2 * PAD
    rank = noise.shape[2]
    cy = 0.5 * (height - 1)
    cx = 0.5 * (width - 1)
    scratch = np.empty((rank, width))
    dx = np.empty((height, width))
    dy = np.empty((height, width))
    for n in range(sources.shape[0]):
        image = padded[sources[n]]
        _datasets_field(basis_rows, basis_cols, noise[n, 0], scratch, dx)
        _datasets_field(basis_rows, basis_cols, noise[n, 1], scratch, dy)
        a11 = affine[n, 0]
        a12 = affine[n, 1]
        a21 = affine[n, 2]
        a22 = affine[n, 3]
        tx = affine[n, 4]
        ty = affine[n, 5]
        for i in range(height):
            v = i - cy
            for j in range(width):
                u = j - cx
                # source coordinates shifted into the padded frame; clamping to
                # [1, size + PAD + 1] keeps both neighbours in the zero border once outside
                sx = cx + a11 * u + a12 * v + tx + alpha * dx[i, j] + PAD
                sy = cy + a21 * u + a22 * v + ty + alpha * dy[i, j] + PAD
                sx = min(max(sx, 1.0), width + PAD + 1.0)
                sy = min(max(sy, 1.0), height + PAD + 1.0)
                x0 = int(sx)
                y0 = int(sy)
                fx = sx - x0
                fy = sy - y0
                top = (1.0 - fx) * image[y0, x0] + fx * image[y0, x0 + 1]
                bottom = (1.0 - fx) * image[y0 + 1, x0] + fx * image[y0 + 1, x0 + 1]
                # weights sum to 1, so only rounding can push the value past 255
                out[n, i * width + j] = min(((1.0 - fy) * top + fy * bottom) * (1.0 / 255.0), 1.0)


# -- svmlight parsing -------------------------------------------------------------------------

#: 10^0 .. 10^22, every one exactly representable in float64 (Clinger's fast path)
_POW10 = np.array([10.0**k for k in range(23)])
#: mantissas below 2^53 are exact in float64
_EXACT_MANTISSA = 1 << 53
#: the largest feature index (int64)
_INDEX_LIMIT = (1 << 63) - 1

#: error codes of ``_datasets_parse_svmlight``
SVMLIGHT_OK = 0
SVMLIGHT_BAD_ROW = 1


@numba.njit(**NJIT_OPTIONS)
def _datasets_is_space(c):
    """ASCII whitespace but the newline (``bytes.strip`` strips these and \\n)."""
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(**NJIT_OPTIONS)
def _datasets_number(data, p, end):
    """Parse ``[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?`` at ``data[p:end]``.

    Returns ``(q, ok, value, exact)``: ``q`` the position after the number, ``ok`` whether
    a number was read, and ``value`` its float64 when ``exact`` (Clinger's fast path: a
    mantissa below 2^53 times or divided by an exact power of ten <= 10^22 is one correctly
    rounded IEEE operation, so it equals ``float(token)``); otherwise the caller asks Python.
    """
    negative = False
    if p < end and (data[p] == 45 or data[p] == 43):  # '-' '+'
        negative = data[p] == 45
        p += 1
    mantissa = 0
    exact = True
    digits = 0
    exponent = 0
    while p < end and 48 <= data[p] <= 57:
        if exact:
            mantissa = mantissa * 10 + (data[p] - 48)
            if mantissa >= _EXACT_MANTISSA:
                exact = False
        digits += 1
        p += 1
    if p < end and data[p] == 46:  # '.'
        p += 1
        while p < end and 48 <= data[p] <= 57:
            if exact:
                mantissa = mantissa * 10 + (data[p] - 48)
                exponent -= 1
                if mantissa >= _EXACT_MANTISSA:
                    exact = False
            digits += 1
            p += 1
    if digits == 0:
        return p, False, 0.0, False
    if p < end and (data[p] == 101 or data[p] == 69):  # 'e' 'E'
        q = p + 1
        exponent_negative = False
        if q < end and (data[q] == 45 or data[q] == 43):
            exponent_negative = data[q] == 45
            q += 1
        start = q
        written = 0
        while q < end and 48 <= data[q] <= 57:
            if written < 100_000:  # saturate: such numbers go to Python anyway
                written = written * 10 + (data[q] - 48)
            q += 1
        if q == start:
            # no exponent digits: the number ends before the 'e' (which then fails the row)
            return p, True, 0.0, False
        exponent += -written if exponent_negative else written
        p = q
    value = 0.0
    if exact:
        if mantissa == 0:
            value = 0.0
        elif 0 <= exponent <= 22:
            value = float(mantissa) * _POW10[exponent]
        elif -22 <= exponent < 0:
            value = float(mantissa) / _POW10[-exponent]
        else:
            exact = False
    return p, True, -value if negative else value, exact


@numba.njit(**NJIT_OPTIONS)
def _datasets_svmlight_bounds(data):
    """``(lines, colons)`` of uint8 text: bounds of the rows and non-zeros to allocate."""
    newlines = 0
    colons = 0
    for i in range(data.shape[0]):
        c = data[i]
        newlines += c == 10
        colons += c == 58
    return newlines + 1, colons


@numba.njit(**NJIT_OPTIONS)
def _datasets_parse_svmlight(
    data, labels, indptr, indices, values, fallback_start, fallback_end, fallback_slot
):
    """Parse svmlight text (``label index:value ...`` per line, ``#`` comments) in one pass.

    data: uint8 (n_bytes,); outputs sized by the caller: labels (>= lines), indptr
    (>= lines + 1), indices and values (>= number of ':'), fallback_* (>= lines + ':').
    The grammar is that of ``bytes.split(b"\\n")``, then per line ``split(b"#")[0].strip()``
    and a full match of ``label([ \\t]+index:value)*``: blank lines are skipped, ASCII
    whitespace at either end of a line is ignored, and inside a line only spaces and tabs
    separate tokens. ``indices`` receives the 0-based column (index - 1, so -1 for a 0 index).

    Numbers outside Clinger's fast path are left to the caller: their byte ranges go to
    ``fallback_start/end`` and their slot (``k`` for ``values[k]``, ``-1 - row`` for a label)
    to ``fallback_slot``.

    Returns ``(n_rows, nnz, n_fallback, error, error_line, error_offset, first_zero,
    largest, overflow_line)``: ``error`` is ``SVMLIGHT_OK`` or ``SVMLIGHT_BAD_ROW`` (the
    first line that is not a svmlight row), with its 1-based number and byte offset;
    ``first_zero`` the position in ``indices`` of the first index 0 (-1 if none);
    ``largest`` the largest index (0 if none); ``overflow_line`` the first line with an
    index beyond int64 (0 if none; such indices are saturated).
    """
    n = data.shape[0]
    row = 0
    k = 0
    n_fallback = 0
    first_zero = -1
    largest = 0
    overflow_line = 0
    line = 0
    p = 0
    indptr[0] = 0
    while p <= n:
        line += 1
        line_start = p
        while p < n and _datasets_is_space(data[p]):
            p += 1
        c = data[p] if p < n else 10
        if c == 10:  # blank line (or the end)
            p += 1
            continue
        if c == 35:  # a comment line
            while p < n and data[p] != 10:
                p += 1
            p += 1
            continue
        # the label
        q, ok, value, exact = _datasets_number(data, p, n)
        if not ok:
            return row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start, first_zero, largest, 0
        labels[row] = value
        if not exact:
            fallback_start[n_fallback] = p
            fallback_end[n_fallback] = q
            fallback_slot[n_fallback] = -1 - row
            n_fallback += 1
        p = q
        # after each token: separators and the next index:value, or the end of the row
        while True:
            c = data[p] if p < n else 10
            if c == 32 or c == 9:
                while p < n and (data[p] == 32 or data[p] == 9):
                    p += 1
                c = data[p] if p < n else 10
                if 48 <= c <= 57:
                    index = 0
                    while p < n and 48 <= data[p] <= 57:
                        digit = data[p] - 48
                        if index > (_INDEX_LIMIT - digit) // 10:
                            index = _INDEX_LIMIT  # saturated; reported after the syntax
                            if overflow_line == 0:
                                overflow_line = line
                        else:
                            index = index * 10 + digit
                        p += 1
                    if p >= n or data[p] != 58:  # ':'
                        return (
                            row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start,
                            first_zero, largest, 0,
                        )  # fmt: skip
                    q, ok, value, exact = _datasets_number(data, p + 1, n)
                    if not ok:
                        return (
                            row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start,
                            first_zero, largest, 0,
                        )  # fmt: skip
                    if index == 0 and first_zero < 0:
                        first_zero = k
                    if index > largest:
                        largest = index
                    indices[k] = index - 1
                    values[k] = value
                    if not exact:
                        fallback_start[n_fallback] = p + 1
                        fallback_end[n_fallback] = q
                        fallback_slot[n_fallback] = k
                        n_fallback += 1
                    k += 1
                    p = q
                    continue
            # the end of the row: trailing whitespace, then the newline, a comment or the end
            while p < n and _datasets_is_space(data[p]):
                p += 1
            c = data[p] if p < n else 10
            if c == 35:
                while p < n and data[p] != 10:
                    p += 1
            elif c != 10:
                return (
                    row,
                    k,
                    n_fallback,
                    SVMLIGHT_BAD_ROW,
                    line,
                    line_start,
                    first_zero,
                    largest,
                    0,
                )
            p += 1
            break
        row += 1
        indptr[row] = k
    return row, k, n_fallback, SVMLIGHT_OK, 0, 0, first_zero, largest, overflow_line
