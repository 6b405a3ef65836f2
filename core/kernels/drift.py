"""Kernels of the drift detectors: ADWIN (Bifet & Gavaldà 2007) and Page-Hinkley (Page 1954).

Both are near-line ports of River 0.26 (``rust_src/adwin.rs`` and
``river/drift/page_hinkley.py``): the order of every floating-point operation is River's, so
that detections agree index for index. ``direction`` is 0 (report any change of the mean), 1
(only increases) or -1 (only decreases). After a reported detection a detector starts afresh,
as River's does (River resets at the start of the next update; the detections are the same).

ADWIN's window is an exponential histogram: row ``i`` of ``totals`` / ``variances`` holds up to
``max_buckets + 1`` buckets of ``2**i`` values each, oldest first; ``counts[i]`` is the number of
buckets in row ``i`` and ``n_rows`` the number of rows in use (row ``n_rows - 1`` holds the
oldest values). A bucket's variance is its sum of squared deviations from its own mean.
"""

import math

import numba

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _adwin_clear(totals, variances, counts, n_rows):
    """Empty the histogram (River's reset: one empty row)."""
    for i in range(n_rows):
        counts[i] = 0
        for k in range(totals.shape[1]):
            totals[i, k] = 0.0
            variances[i, k] = 0.0


@numba.njit(**NJIT_OPTIONS)
def _adwin_drop_front(totals, variances, counts, row, n_elements):
    """Remove the oldest ``n_elements`` buckets of a row, shifting the others left."""
    count = counts[row]
    for k in range(n_elements, count):
        totals[row, k - n_elements] = totals[row, k]
        variances[row, k - n_elements] = variances[row, k]
    for k in range(count - n_elements, count):
        totals[row, k] = 0.0
        variances[row, k] = 0.0
    counts[row] = count - n_elements


@numba.njit(**NJIT_OPTIONS)
def _adwin_compress(totals, variances, counts, n_rows, max_buckets):
    """Merge the two oldest buckets of each full row (max_buckets + 1) into the next row;
    returns the new number of rows."""
    row = 0
    while counts[row] == max_buckets + 1:
        n = float(1 << row)
        t0, t1 = totals[row, 0], totals[row, 1]
        mu0, mu1 = t0 / n, t1 / n
        # variance of the union of two buckets of n values (Babcock et al. 2003)
        merged_variance = (
            variances[row, 0] + variances[row, 1] + n * 0.5 * (mu0 - mu1) * (mu0 - mu1)
        )
        if row + 1 >= n_rows:
            n_rows = row + 2
        slot = counts[row + 1]
        totals[row + 1, slot] = t0 + t1
        variances[row + 1, slot] = merged_variance
        counts[row + 1] = slot + 1
        _adwin_drop_front(totals, variances, counts, row, 2)
        if counts[row + 1] <= max_buckets:
            break
        row += 1
    return n_rows


@numba.njit(**NJIT_OPTIONS)
def _adwin_insert(totals, variances, counts, n_rows, max_buckets, value, total, variance, width):
    """Append one value as a bucket of size 1; returns (n_rows, total, variance, width)."""
    slot = counts[0]
    totals[0, slot] = value
    variances[0, slot] = 0.0
    counts[0] = slot + 1
    width += 1.0
    if width > 1.0:
        deviation = value - total / (width - 1.0)
        variance += (width - 1.0) * deviation * deviation / width
    total += value
    n_rows = _adwin_compress(totals, variances, counts, n_rows, max_buckets)
    return n_rows, total, variance, width


@numba.njit(**NJIT_OPTIONS)
def _adwin_delete_oldest(totals, variances, counts, n_rows, total, variance, width):
    """Drop the oldest bucket from the window; returns (n_rows, total, variance, width)."""
    last = n_rows - 1
    n = float(1 << last)
    u, v = totals[last, 0], variances[last, 0]
    mu = u / n
    width -= n
    total -= u
    mu_window = total / width
    variance -= v + n * width * (mu - mu_window) * (mu - mu_window) / (n + width)
    _adwin_drop_front(totals, variances, counts, last, 1)
    # with max_buckets = 1 a merge can empty a middle row, which may become the last row
    # here: drop it too (River 0.26 panics on the next deletion instead)
    while n_rows > 1 and counts[n_rows - 1] == 0:
        n_rows -= 1
    return n_rows, total, variance, width


@numba.njit(**NJIT_OPTIONS)
def _adwin_cut(n0, n1, delta_mean, width, variance, delta, min_window_length):
    """|mu0 - mu1| > eps_cut = sqrt(2/m sigma^2 delta') + 2/(3m) delta', with
    delta' = ln(2 ln(W) / delta) and 1/m = 1/(n0 - l + 1) + 1/(n1 - l + 1) (River's form)."""
    delta_prime = math.log(2.0 * math.log(width) / delta)
    m_recip = 1.0 / (n0 - min_window_length + 1.0) + 1.0 / (n1 - min_window_length + 1.0)
    epsilon = math.sqrt(2.0 * m_recip * (variance / width) * delta_prime)
    epsilon += 2.0 / 3.0 * delta_prime * m_recip
    return abs(delta_mean) > epsilon


@numba.njit(**NJIT_OPTIONS)
def _adwin_detect(
    totals, variances, counts, n_rows, total, variance, width, delta, min_window_length, direction
):
    """ADWIN2's check of every cut W = W0 . W1 (W0 older), dropping the oldest bucket while a
    cut holds. Returns (reported, n_rows, total, variance, width)."""
    reported = False
    shrink = True
    while shrink:
        shrink = False
        n0, n1, u0, u1 = 0.0, width, 0.0, total
        done = False
        for row in range(n_rows - 1, -1, -1):
            size = float(1 << row)
            count = counts[row]
            for k in range(count):
                n0 += size
                n1 -= size
                u0 += totals[row, k]
                u1 -= totals[row, k]
                if row == 0 and k == count - 1:
                    done = True  # W1 would be empty
                    break
                delta_mean = u0 / n0 - u1 / n1
                if (
                    n1 >= min_window_length
                    and n0 >= min_window_length
                    and _adwin_cut(n0, n1, delta_mean, width, variance, delta, min_window_length)
                ):
                    shrink = True
                    # delta_mean = mu0 - mu1 < 0: the newer window W1 has the greater mean
                    if direction == 0 or (delta_mean < 0.0) == (direction > 0):
                        reported = True
                    if width > 0.0:
                        n_rows, total, variance, width = _adwin_delete_oldest(
                            totals, variances, counts, n_rows, total, variance, width
                        )
                        done = True
                        break
            if done:
                break
    return reported, n_rows, total, variance, width


@numba.njit(**NJIT_OPTIONS)
def _adwin_update(
    values,
    found,
    totals,
    variances,
    counts,
    n_rows,
    total,
    variance,
    width,
    tick,
    delta,
    clock,
    max_buckets,
    min_window_length,
    grace_period,
    direction,
):
    """ADWIN over ``values`` in order; writes the indices of reported detections to ``found``.
    ``totals`` has at least bit_length(width + len(values)) + 1 rows. Returns (number found,
    n_rows, total, variance, width, tick)."""
    n_found = 0
    for i in range(values.shape[0]):
        n_rows, total, variance, width = _adwin_insert(
            totals, variances, counts, n_rows, max_buckets, values[i], total, variance, width
        )
        tick += 1
        if tick % clock == 0 and width > grace_period:
            reported, n_rows, total, variance, width = _adwin_detect(
                totals,
                variances,
                counts,
                n_rows,
                total,
                variance,
                width,
                delta,
                min_window_length,
                direction,
            )
            if reported:
                found[n_found] = i
                n_found += 1
                _adwin_clear(totals, variances, counts, n_rows)
                n_rows, total, variance, width, tick = 1, 0.0, 0.0, 0.0, 0
    return n_found, n_rows, total, variance, width, tick


@numba.njit(**NJIT_OPTIONS)
def _ph_update(
    values,
    found,
    n_mean,
    mean,
    sum_increase,
    sum_decrease,
    min_increase,
    max_decrease,
    min_instances,
    delta,
    threshold,
    alpha,
    direction,
):
    """Page-Hinkley over ``values`` in order: with the running mean x̄_t,
    m_t = alpha m_{t-1} + (x_t - x̄_t) -+ delta, a change when m_t - min m (increase) or
    max m - m_t (decrease) exceeds lambda = ``threshold``. Writes the indices of detections to
    ``found``; returns (number found, n_mean, mean, sum_increase, sum_decrease, min_increase,
    max_decrease)."""
    n_found = 0
    for i in range(values.shape[0]):
        x = values[i]
        n_mean += 1
        mean += (1.0 / n_mean) * (x - mean)
        deviation = x - mean
        sum_increase = alpha * sum_increase + deviation - delta
        sum_decrease = alpha * sum_decrease + deviation + delta
        if sum_increase < min_increase:
            min_increase = sum_increase
        if sum_decrease > max_decrease:
            max_decrease = sum_decrease
        if n_mean >= min_instances:
            increase = sum_increase - min_increase > threshold
            decrease = max_decrease - sum_decrease > threshold
            if (increase and direction >= 0) or (decrease and direction <= 0):
                found[n_found] = i
                n_found += 1
                n_mean, mean, sum_increase, sum_decrease = 0, 0.0, 0.0, 0.0
                min_increase, max_decrease = math.inf, -1.0
    return n_found, n_mean, mean, sum_increase, sum_decrease, min_increase, max_decrease
