"""The comparison with the paper: the roughness of a curve about its trend, and the verdicts."""

import numpy as np
import pytest

from benchmarks.reproduce_dos.report import comparisons, percent, roughness


def record(errors, averaged):
    t = np.arange(1, len(errors) + 1) * 1000
    return {"test": [[int(a), b, c] for a, b, c in zip(t, errors, averaged, strict=True)]}


def test_roughness_is_zero_on_a_log_linear_trend_and_grows_with_scatter():
    t = np.arange(1, 13) * 1000
    smooth = 0.3 - 0.02 * np.log(t)
    noisy = smooth + np.where(np.arange(12) % 2, 0.01, -0.01)
    assert roughness(record(smooth, smooth), 1) == pytest.approx(0.0, abs=1e-9)
    assert roughness(record(noisy, smooth), 1) == pytest.approx(1.0, rel=0.05)  # points of %
    assert np.isnan(roughness(record([0.1, 0.2], [None, None]), 2))
    assert percent(0.1234) == "12.34" and percent(None) == "n/a"


def test_verdicts_follow_the_numbers():
    def model(rank, moving, cumulative, live, averaged, errors):
        return {
            "rank": rank,
            "final_moving_error": moving,
            "final_cumulative_error": cumulative,
            "final_test_error_live": live,
            "final_test_error_averaged": averaged,
            **record(errors, [e - 0.01 for e in errors]),
        }

    errors = [0.2] * 8
    models = {
        "linear": model(None, 0.30, 0.30, 0.12, 0.10, errors),
        "DoS d=1": model(1, 0.32, 0.33, 0.13, 0.11, errors),
        "DoS d=4": model(4, 0.25, 0.28, 0.09, 0.08, errors),
    }
    lines = comparisons({"models": models})
    assert "**agrees**" in lines[0] and "**agrees**" in lines[1]  # higher rank better; monotone
    assert "slightly outperforms DoS d=1" in lines[2] and "**agrees**" in lines[2]
    assert "lower for 3 of 3" in lines[3]
