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
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

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
#: mantissas up to 2^53 are exact in float64
_EXACT_MANTISSA = np.uint64(1 << 53)
#: the largest feature index (int64)
_INDEX_LIMIT = (1 << 63) - 1
#: significant digits that fit a uint64 decimal mantissa (10^19 - 1 < 2^64)
_MAX_DIGITS = 19
#: exponents written beyond this are saturated (and such numbers left to Python)
_EXPONENT_SATURATION = 100_000

#: error codes of ``_datasets_parse_svmlight``
SVMLIGHT_OK = 0
SVMLIGHT_BAD_ROW = 1

#: range of decimal exponents of the table below: w 10^q with w < 10^19 is below half the
#: smallest subnormal for q < -342 (rounds to 0) and above the largest double for q > 308
_POW5_MIN = -342
_POW5_MAX = 308


def _pow5_table() -> tuple[np.ndarray, np.ndarray]:
    """High and low 64-bit words of 5^q, q = -342..308, normalised to [2^127, 2^128) and
    truncated (rounded down), computed exactly with Python integers (Lemire 2021, sec. 5).

    5^q and 10^q = 5^q 2^q share these 128 bits; for q < 0 they are floor(2^(127+z) / 5^-q)
    with z the bit length of 5^-q.
    """
    count = _POW5_MAX - _POW5_MIN + 1
    high = np.empty(count, dtype=np.uint64)
    low = np.empty(count, dtype=np.uint64)
    for i, q in enumerate(range(_POW5_MIN, _POW5_MAX + 1)):
        if q >= 0:
            power = 5**q
            shift = power.bit_length() - 128
            mantissa = power >> shift if shift > 0 else power << -shift
        else:
            power = 5**-q
            mantissa = (1 << (127 + power.bit_length())) // power
        assert 1 << 127 <= mantissa < 1 << 128
        high[i] = mantissa >> 64
        low[i] = mantissa & ((1 << 64) - 1)
    return high, low


_POW5_HIGH, _POW5_LOW = _pow5_table()
#: 2^(e - 1075) for a biased binary exponent e in 0..2047: m 2^(e - 1075) for a 53-bit
#: mantissa m is the double of exponent field e, made by one exact multiplication
_POW2_SCALE = np.ldexp(1.0, np.arange(-1075, 973))

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U9 = np.uint64(9)
_U10 = np.uint64(10)
_U48 = np.uint64(48)
_U53 = np.uint64(53)
_U63 = np.uint64(63)
_LOW9 = np.uint64(0x1FF)


@intrinsic
def _leading_zeros(typingctx, a):
    """Leading zero bits of a uint64 (LLVM's ``ctlz``)."""
    signature = types.uint64(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return signature, codegen


@intrinsic
def _mul_128(typingctx, a, b):
    """``(high, low)`` words of the 128-bit product of two uint64 (one ``mul`` instruction:
    numba has no 128-bit integers, LLVM has)."""
    signature = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        low = builder.trunc(product, ir.IntType(64))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        return context.make_tuple(builder, sig.return_type, (high, low))

    return signature, codegen


@numba.njit(**NJIT_OPTIONS)
def _datasets_eisel_lemire(w, q):
    """``(value, ok)``: w 10^q correctly rounded to float64 for 1 <= w < 2^64 (uint64) and
    _POW5_MIN <= q <= _POW5_MAX, by Lemire's algorithm ("Number parsing at a gigabyte per
    second", 2021, sec. 5-6, as in Go's strconv ``eiselLemire64``).

    The normalised w times the truncated 128-bit mantissa of 5^q gives the leading 54 bits
    of the product; ``ok`` is False where the truncation leaves them undecided, for a
    possible exact tie between two doubles, and for subnormal results: the caller then
    asks Python. Results beyond the largest double are inf.
    """
    index = q - _POW5_MIN
    shift = _leading_zeros(w)
    w = w << shift
    high, low = _mul_128(w, _POW5_HIGH[index])
    if (high & _LOW9) == _LOW9 and low + w < w:
        # the lower 9 bits are all ones and the error of the truncated table could carry
        # into them: add the product by the table's low word (128 x 64 bits)
        cross_high, cross_low = _mul_128(w, _POW5_LOW[index])
        merged_low = low + cross_high
        merged_high = high + _U1 if merged_low < low else high
        if (merged_high & _LOW9) == _LOW9 and merged_low + _U1 == _U0 and cross_low + w < w:
            return 0.0, False
        high = merged_high
        low = merged_low
    top = high >> _U63
    mantissa = high >> (top + _U9)
    # binary exponent: floor(q log2 10) (217706 / 2^16 ~ log2 10 for |q| < 1650), bias 1023
    exponent = ((217706 * q) >> 16) + 64 + 1023 - np.int64(shift) - 1 + np.int64(top)
    if low == _U0 and (high & _LOW9) == _U0 and (mantissa & _U3) == _U1:
        return 0.0, False  # perhaps exactly halfway: ties-to-even needs the exact value
    mantissa = (mantissa + (mantissa & _U1)) >> _U1
    if (mantissa >> _U53) != _U0:
        mantissa = mantissa >> _U1
        exponent += 1
    if exponent >= 0x7FF:
        return np.inf, True
    if exponent <= 0:
        return 0.0, False
    return float(mantissa) * _POW2_SCALE[exponent], True


#: 5^0 .. 5^27, all below 2^63
_POW5_EXACT = np.array([5**k for k in range(28)], dtype=np.uint64)
_U64_MAX = np.uint64((1 << 64) - 1)


@numba.njit(**NJIT_OPTIONS)
def _datasets_decimal(w, q):
    """``(value, ok)``: w 10^q correctly rounded to float64 for 1 <= w < 10^19 (uint64).

    Beyond the table the value is 0 or inf; within it ``_datasets_eisel_lemire`` decides
    nearly every case. The products it leaves undecided because they are exact, ties
    included (2^53 + 1, 1e23, 2531199474027112.5), are exact integers times a power of two:
    w 5^q 2^q for q >= 0, (w / 5^-q) 2^q when 5^-q divides w; with that integer below 2^64
    the value is its conversion to float64 (correctly rounded, ties to even) scaled exactly.
    """
    if q < _POW5_MIN:
        return 0.0, True
    if q > _POW5_MAX:
        return np.inf, True
    value, ok = _datasets_eisel_lemire(w, q)
    if ok or q > 27 or q < -27:
        return value, ok
    if q >= 0:
        power = _POW5_EXACT[q]
        if w <= _U64_MAX // power:
            return float(w * power) * _POW2_SCALE[1075 + q], True
    else:
        power = _POW5_EXACT[-q]
        if w % power == _U0:
            return float(w // power) * _POW2_SCALE[1075 + q], True
    return value, False


@numba.njit(**NJIT_OPTIONS)
def _datasets_is_space(c):
    """ASCII whitespace but the newline (``bytes.strip`` strips these and \\n)."""
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(**NJIT_OPTIONS, inline="always")
def _datasets_number(data, p, end, correctly_rounded):
    """Parse ``[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?`` at ``data[p:end]``.

    Returns ``(q, ok, value, exact)``: ``q`` the position after the number, ``ok`` whether
    a number was read, and ``value`` its float64, equal to ``float(token)``, when
    ``exact``; otherwise the caller asks Python. A decimal mantissa w of at most 19
    significant digits and exponent q give ``value`` by Clinger's fast path (w <= 2^53,
    |q| <= 22: one correctly rounded IEEE operation) or, with ``correctly_rounded``, by
    ``_datasets_eisel_lemire``. Left to Python: more than 19 significant digits, exponents
    written beyond 10^5, subnormal results and the rare products Eisel-Lemire cannot
    decide (all numbers outside Clinger's path without ``correctly_rounded``).
    """
    negative = False
    if p < end and (data[p] == 45 or data[p] == 43):  # '-' '+'
        negative = data[p] == 45
        p += 1
    # digits accumulate without a check: past 19 significant ones the mantissa wraps
    # around, and such numbers go to Python anyway
    mantissa = _U0
    significant = 0  # digits from the first non-zero one
    exponent = 0
    start = p
    while p < end and data[p] == 48:
        p += 1
    first = p
    while p < end and 48 <= data[p] <= 57:
        mantissa = mantissa * _U10 + (data[p] - _U48)
        p += 1
    significant = p - first
    digits = p - start
    if p < end and data[p] == 46:  # '.'
        p += 1
        start = p
        if significant == 0:
            while p < end and data[p] == 48:
                p += 1
        first = p
        while p < end and 48 <= data[p] <= 57:
            mantissa = mantissa * _U10 + (data[p] - _U48)
            p += 1
        significant += p - first
        exponent = start - p
        digits += p - start
    if digits == 0:
        return p, False, 0.0, False
    saturated = False
    if p < end and (data[p] == 101 or data[p] == 69):  # 'e' 'E'
        q = p + 1
        exponent_negative = False
        if q < end and (data[q] == 45 or data[q] == 43):
            exponent_negative = data[q] == 45
            q += 1
        start = q
        written = 0
        while q < end and 48 <= data[q] <= 57:
            if written < _EXPONENT_SATURATION:
                written = written * 10 + (data[q] - 48)
            q += 1
        if q == start:
            # no exponent digits: the number ends before the 'e' (which then fails the row)
            return p, True, 0.0, False
        saturated = written >= _EXPONENT_SATURATION
        exponent += -written if exponent_negative else written
        p = q
    value = 0.0
    exact = True
    if significant > _MAX_DIGITS or saturated:
        exact = False
    elif mantissa == _U0:
        value = 0.0
    elif mantissa <= _EXACT_MANTISSA and 0 <= exponent <= 22:
        value = float(mantissa) * _POW10[exponent]
    elif mantissa <= _EXACT_MANTISSA and -22 <= exponent < 0:
        value = float(mantissa) / _POW10[-exponent]
    elif not correctly_rounded:
        exact = False
    else:
        # trailing zeros of the digits ("5129832425396649.0") move into the exponent: the
        # shorter mantissa may take Clinger's path, where Eisel-Lemire would see an exact
        # product that looks like a tie and leave it to Python
        while exponent < 0 and mantissa % _U10 == _U0:
            mantissa = mantissa // _U10
            exponent += 1
        if mantissa <= _EXACT_MANTISSA and -22 <= exponent <= 22:
            if exponent >= 0:
                value = float(mantissa) * _POW10[exponent]
            else:
                value = float(mantissa) / _POW10[-exponent]
        else:
            value, exact = _datasets_decimal(mantissa, exponent)
    return p, True, -value if negative else value, exact


@numba.njit(**NJIT_OPTIONS)
def _datasets_index(data, p, end):
    """``(index, overflow)``: the decimal integer ``data[p:end]``, saturated to int64's
    largest value when beyond it."""
    index = 0
    for i in range(p, end):
        digit = data[i] - 48
        if index > (_INDEX_LIMIT - digit) // 10:
            return _INDEX_LIMIT, True
        index = index * 10 + digit
    return index, False


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
    data, labels, indptr, indices, values, fallback_start, fallback_end, fallback_slot,
    correctly_rounded, limit,
):  # fmt: skip
    """Parse svmlight text (``label index:value ...`` per line, ``#`` comments) in one pass.

    data: uint8 (n_bytes,); outputs sized by the caller: labels (>= lines), indptr
    (>= lines + 1), indices and values (>= number of ':'), fallback_* (>= lines + ':').
    The grammar is that of ``bytes.split(b"\\n")``, then per line ``split(b"#")[0].strip()``
    and a full match of ``label([ \\t]+index:value)*``: blank lines are skipped, ASCII
    whitespace at either end of a line is ignored, and inside a line only spaces and tabs
    separate tokens. ``indices`` receives the 0-based column (index - 1, so -1 for a 0 index)
    of every value but those read as exactly 0, which are left out (as ``eliminate_zeros``
    would: a sum of duplicates is the same without them).

    Numbers ``_datasets_number`` leaves to Python (few with ``correctly_rounded``, every
    one outside Clinger's fast path without it) are left to the caller: their byte ranges
    go to ``fallback_start/end`` and their slot (``k`` for ``values[k]``, ``-1 - row`` for a
    label) to ``fallback_slot``.

    ``limit``: the largest index allowed (``n_features``; -1 for no limit).

    Returns ``(n_rows, nnz, n_fallback, error, error_line, error_offset, first_zero_row,
    largest, overflow_line, excess_line, excess_index, canonical, infinite)``: ``error`` is
    ``SVMLIGHT_OK`` or
    ``SVMLIGHT_BAD_ROW`` (the first line that is not a svmlight row), with its 1-based
    number and byte offset; ``first_zero_row`` the first row with an index 0 (-1 if none);
    ``largest`` the largest index (0 if none); ``overflow_line`` the first line with an
    index beyond int64 (0 if none; such indices are saturated); ``excess_line`` and
    ``excess_index`` the first line with an index above ``limit`` and that index, the first
    on the line (0 and 0 if none); ``canonical`` whether the
    stored indices increase strictly along every row (no sort, no sum of duplicates
    needed); ``infinite`` whether a label or value parsed here is infinite.
    """
    n = data.shape[0]
    row = 0
    k = 0
    n_fallback = 0
    first_zero_row = -1
    largest = 0
    overflow_line = 0
    excess_line = 0
    excess_index = 0
    canonical = True
    infinite = False
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
        q, ok, value, exact = _datasets_number(data, p, n, correctly_rounded)
        if not ok:
            return (
                row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start, first_zero_row,
                largest, 0, 0, 0, canonical, infinite,
            )  # fmt: skip
        labels[row] = value
        if not exact:
            fallback_start[n_fallback] = p
            fallback_end[n_fallback] = q
            fallback_slot[n_fallback] = -1 - row
            n_fallback += 1
        elif abs(value) == np.inf:
            infinite = True
        p = q
        previous = -1  # the last column stored in this row
        # after each token: separators and the next index:value, or the end of the row
        while True:
            c = data[p] if p < n else 10
            if c == 32 or c == 9:
                while p < n and (data[p] == 32 or data[p] == 9):
                    p += 1
                c = data[p] if p < n else 10
                if 48 <= c <= 57:
                    index = 0
                    start = p
                    while p < n and 48 <= data[p] <= 57:
                        index = index * 10 + (data[p] - 48)
                        p += 1
                    if p - start > 18:  # perhaps beyond int64: read it again, with care
                        index, overflow = _datasets_index(data, start, p)
                        if overflow and overflow_line == 0:
                            overflow_line = line
                    if p >= n or data[p] != 58:  # ':'
                        return (
                            row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start,
                            first_zero_row, largest, 0, 0, 0, canonical, infinite,
                        )  # fmt: skip
                    q, ok, value, exact = _datasets_number(data, p + 1, n, correctly_rounded)
                    if not ok:
                        return (
                            row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start,
                            first_zero_row, largest, 0, 0, 0, canonical, infinite,
                        )  # fmt: skip
                    if index == 0 and first_zero_row < 0:
                        first_zero_row = row
                    if index > largest:
                        largest = index
                    if 0 <= limit < index and excess_line == 0:
                        excess_line = line
                        excess_index = index
                    if value != 0.0 or not exact:
                        column = index - 1
                        if column <= previous:
                            canonical = False
                        previous = column
                        indices[k] = column
                        values[k] = value
                        if not exact:
                            fallback_start[n_fallback] = p + 1
                            fallback_end[n_fallback] = q
                            fallback_slot[n_fallback] = k
                            n_fallback += 1
                        elif abs(value) == np.inf:
                            infinite = True
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
                    row, k, n_fallback, SVMLIGHT_BAD_ROW, line, line_start, first_zero_row,
                    largest, 0, 0, 0, canonical, infinite,
                )  # fmt: skip
            p += 1
            break
        row += 1
        indptr[row] = k
    return (
        row, k, n_fallback, SVMLIGHT_OK, 0, 0, first_zero_row, largest, overflow_line,
        excess_line, excess_index, canonical, infinite,
    )  # fmt: skip
