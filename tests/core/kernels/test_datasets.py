"""Eisel-Lemire decimal-to-double conversion (core/kernels/datasets.py) against exact
rational arithmetic: ``float(Fraction)`` is correctly rounded (CPython divides the integers
exactly), so it is the reference for ``w * 10^q``."""

import random
from fractions import Fraction

import numpy as np
import pytest

from core.kernels.datasets import (
    _POW5_HIGH,
    _POW5_LOW,
    _POW5_MAX,
    _POW5_MIN,
    _datasets_decimal,
    _datasets_eisel_lemire,
    _datasets_number,
)


def exact(w: int, q: int) -> float:
    """w 10^q correctly rounded (inf beyond the largest double)."""
    value = Fraction(w) * Fraction(10) ** q
    try:
        return float(value)
    except OverflowError:
        return float("inf")


def same_bits(a: float, b: float) -> bool:
    return np.float64(a).view(np.int64) == np.float64(b).view(np.int64)


def test_table_holds_the_truncated_128_bit_mantissas_of_the_powers_of_five():
    for i, q in enumerate(range(_POW5_MIN, _POW5_MAX + 1)):
        mantissa = (int(_POW5_HIGH[i]) << 64) | int(_POW5_LOW[i])
        assert 1 << 127 <= mantissa < 1 << 128
        # mantissa <= 5^q 2^s < mantissa + 1 for the s that normalises 5^q
        power = Fraction(5) ** q
        s = 127 - (power.numerator.bit_length() - power.denominator.bit_length())
        scaled = power * Fraction(2) ** s
        if not mantissa <= scaled < mantissa + 1:
            scaled *= 2 if scaled < mantissa else Fraction(1, 2)
        assert mantissa <= scaled < mantissa + 1, q


def check(w: int, q: int) -> bool:
    """Whether the kernels decided w 10^q; when they did, the value must be exact."""
    value, ok = _datasets_eisel_lemire(np.uint64(w), q)
    if ok:
        assert same_bits(value, exact(w, q)), (w, q, value, exact(w, q))
    value, ok = _datasets_decimal(np.uint64(w), q)
    if ok:
        assert same_bits(value, exact(w, q)), (w, q, value, exact(w, q))
    return ok


def test_small_exact_products_and_ties_are_correctly_rounded():
    """Every w 10^q that is a 64-bit integer times a power of two (where the truncated table
    cannot decide): ties to even included."""
    rng = random.Random(2)
    for _ in range(3000):
        q = rng.randrange(-27, 28)
        if q >= 0:
            w = rng.randrange(1, min(10**19, ((1 << 64) - 1) // 5**q + 1))
        else:
            w = 5**-q * rng.randrange(1, (10**19 - 1) // 5**-q + 1)
        assert check(w, q), (w, q)
    for w in (9007199254740993, 9007199254740995, 18014398509481989, 10**19 - 1):
        assert check(w, 0)


def test_random_mantissas_and_exponents_are_correctly_rounded():
    rng = np.random.default_rng(0)
    decided = 0
    n = 20_000
    for _ in range(n):
        digits = int(rng.integers(1, 20))
        w = int(rng.integers(1, 10**digits, dtype=np.uint64))
        decided += check(w, int(rng.integers(_POW5_MIN, _POW5_MAX + 1)))
    # undecided: subnormal results (q below about -308) and the rare near-ties
    assert decided > 0.9 * n


@pytest.mark.parametrize(
    ("w", "q"),
    [
        (1, 0), (1, 23), (17976931348623157, 292), (17976931348623158, 292),
        (17976931348623159, 292), (1, 308), (9999999999999999999, 308),
        (22250738585072014, -324), (9007199254740993, 0), (9007199254740995, 0),
        (9007199254740993, 1), (4503599627370497, 0), (123456789012345678, -5),
        (9999999999999999999, -342), (1, -342), (7, -1), (5, -1), (3, -1),
        (10000000000000000000 - 1, 0), (18446744073709551615 // 10, 3),
    ],
)  # fmt: skip
def test_edges_are_correct_or_left_to_python(w, q):
    value, ok = _datasets_eisel_lemire(np.uint64(w), q)
    reference = exact(w, q)
    if ok:
        assert same_bits(value, reference)
    else:  # subnormal results, exact products and ties are left undecided here
        assert reference < 2.2250738585072014e-308 or is_tie(w, q) or exact_product(w, q)
    value, ok = _datasets_decimal(np.uint64(w), q)
    if reference >= 2.2250738585072014e-308:  # ... and decided there but for subnormals
        assert ok and same_bits(value, reference), (w, q)


def exact_product(w: int, q: int) -> bool:
    value = Fraction(w) * Fraction(10) ** q
    return Fraction(float(value)) == value


def is_tie(w: int, q: int) -> bool:
    """Whether w 10^q lies exactly halfway between two adjacent doubles."""
    value = Fraction(w) * Fraction(10) ** q
    below = float(value)
    if Fraction(below) > value:
        below = float(np.nextafter(below, 0.0))
    above = float(np.nextafter(below, np.inf))
    return (Fraction(below) + Fraction(above)) / 2 == value


def test_exact_ties_are_left_to_python():
    # 2^53 + 1 is halfway between two doubles: ties-to-even needs the exact digits
    assert not _datasets_eisel_lemire(np.uint64(9007199254740993), 0)[1]


def parse_one(token: str) -> tuple[float, bool]:
    data = np.frombuffer(token.encode(), dtype=np.uint8)
    end, ok, value, decided = _datasets_number(data, 0, data.shape[0], True)
    assert ok and end == data.shape[0]
    return value, decided


def test_number_decides_repr_of_normal_doubles_in_numba():
    rng = np.random.default_rng(1)
    bits = rng.integers(0x0010_0000_0000_0000, 0x7FF0_0000_0000_0000, size=5000)
    for x in bits.view(np.float64).tolist() + (rng.random(5000) / 255).tolist():
        for token in (repr(x), f"{x:.17g}", f"{-x:.3e}"):
            value, decided = parse_one(token)
            assert decided, token
            assert same_bits(value, float(token)), token


@pytest.mark.parametrize(
    "token",
    [
        "0.1000000000000000055511151231257827",  # 34 significant digits
        "1" + "0" * 64,  # wraps a uint64 mantissa to 0
        "4.9e-324",  # subnormal
        "1e100000",  # saturated exponent
    ],
)
def test_number_leaves_to_python_what_it_cannot_decide(token):
    assert not parse_one(token)[1]
