"""The thesis reproduction: data helpers, the shape checks of Table 6.1, and the quick mode
end to end."""

import json

import numpy as np

from benchmarks.reproduce_thesis import (
    THESIS_TABLE_6_1,
    main,
    maxcut_laplacian,
    random_affine,
    table_checks,
    two_classes,
)
from core.datasets import data_dir


def test_two_classes_and_affine_maps():
    rng = np.random.default_rng(0)
    X, y = two_classes(rng, 100)
    radius = np.linalg.norm(X, axis=1)
    assert np.all(radius[y > 0] <= 1.0) and np.all(radius[y < 0] >= 1.0)
    assert np.sum(y > 0) == np.sum(y < 0) == 100
    M, shift = random_affine(rng)
    assert np.allclose(M, M.T) and np.all(np.linalg.eigvalsh(M) > 0) and shift.shape == (2,)


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


def test_quick_mode_end_to_end(tmp_path):
    result = main(["--quick", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "reproduce_thesis.json").read_text())
    assert saved["settings"]["quick"] and len(saved["table_6_1"]) == 2
    for row in result["table_6_1"]:
        for algorithm in ("pra", "ea"):
            assert row[algorithm]["status"] == "feasible"
            assert row[algorithm]["min_eigenvalue"] > 0
        assert row["ea"]["updates"] < row["pra"]["updates"]
    figure = result["figure_7_4"]
    assert figure["maxsep_error_range_within_a_test"] == {"all": 0.0, "one": 0.0}
    svm = figure["mean_error"]["all"]["svm_gamma1"]
    assert svm[-1] > svm[0]  # the thesis's kernel is not rescaling invariant
    text = (tmp_path / "separation_results.md").read_text()
    assert "| mcp100 | 100 |" in text and "Figure 7.4" in text
    assert (tmp_path / "thesis_fig7_4.png").stat().st_size > 10_000
    rebuilt = tmp_path / "rebuilt"
    main(["--from-json", str(tmp_path / "reproduce_thesis.json"), "--out", str(rebuilt)])
    assert (rebuilt / "separation_results.md").read_text() == text
