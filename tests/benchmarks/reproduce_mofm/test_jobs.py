"""The jobs of Table 2: tau per penalty, and Algorithm 1's path on a quick split."""

import pytest

from benchmarks.reproduce_mofm.jobs import job_cg, tau_for
from benchmarks.reproduce_mofm.specs import QUICK_SPECS


def test_tau_is_scaled_per_penalty():
    assert tau_for("l1/linf", 10.0, 4) == 10.0
    assert tau_for("l1", 10.0, 4) == 20.0
    assert tau_for("l1/l2", 10.0, 4) == pytest.approx(12.0)


def test_a_cg_job_validates_every_basis_vector():
    result = job_cg(QUICK_SPECS[0], True, "l1/linf", "output", 30.0, 4, 5)
    assert [p["t"] for p in result["path"]] == [1, 2, 3, 4]
    assert all(0.0 <= p["validation"] <= 1.0 and 1 <= p["basis"] <= p["t"] for p in result["path"])
    assert result["kind"] == "cg" and result["tau"] == 30.0
