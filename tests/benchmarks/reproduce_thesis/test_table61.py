"""Table 6.1: the MAX-CUT Laplacians and the checks of the table's shape."""

import numpy as np

from benchmarks.reproduce_thesis.table61 import (
    THESIS_TABLE_6_1,
    maxcut_laplacian,
    run_problem,
    table_checks,
)
from core.datasets import data_dir


def test_table_checks():
    def row(name, pra, ea):
        entry = {"status": "feasible", "min_eigenvalue": 1.0}
        return {"problem": name, "pra": entry | {"updates": pra}, "ea": entry | {"updates": ea}}

    names = ["mcp124-1", "mcp124-2", "mcp124-3", "mcp124-4"]
    rows = [row(n, THESIS_TABLE_6_1[n][1], THESIS_TABLE_6_1[n][3]) for n in names]
    checks = table_checks(rows)
    assert checks == {
        "ea_fewer_updates_everywhere": True,
        "ratio_grows": {"124": True},
        "all_feasible": True,
    }
    rows[2]["pra"]["updates"] = 100
    assert table_checks(rows)["ratio_grows"]["124"] is False
    assert table_checks(rows)["ea_fewer_updates_everywhere"] is False


def test_maxcut_laplacian():
    L = maxcut_laplacian(data_dir() / "sdplib" / "mcp100.dat-s")
    assert L.shape == (100, 100) and np.allclose(L, L.T)
    assert np.allclose(L.sum(axis=1), 0.0) and np.all(np.diag(L) >= 0)


def test_one_problem_both_algorithms_feasible():
    row = run_problem("mcp100")
    assert row["n"] == 100 and row["edges"] == 269
    for algorithm in ("pra", "ea"):
        assert row[algorithm]["status"] == "feasible" and row[algorithm]["min_eigenvalue"] > 0
    assert row["pra"]["updates"] == 312 and row["ea"]["updates"] == 172  # seeded: the docs' row
