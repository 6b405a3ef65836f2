"""The Table 2 / Figure 2 reproduction: its splits, its model selection, its shared-file
section, and its quick mode end to end."""

import json

import numpy as np
import pytest

from benchmarks.reproduce_mofm import (
    BEGIN,
    END,
    QUICK_SPECS,
    _stratified_parts,
    best_point,
    budget_points,
    main,
    tau_for,
    write_section,
)


def test_stratified_split_is_seeded_disjoint_and_balanced():
    y = np.repeat(np.arange(3), [40, 80, 120])
    parts = _stratified_parts(y, (0.5, 0.25, 0.25), seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(240))
    for part, fraction in zip(parts, (0.5, 0.25, 0.25), strict=True):
        np.testing.assert_allclose(np.bincount(y[part]), fraction * np.array([40, 80, 120]))
    again = _stratified_parts(y, (0.5, 0.25, 0.25), seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_selection_prefers_validation_then_fewer_basis_vectors():
    path = [
        dict(t=1, basis=1, validation=0.5, test=0.9),
        dict(t=2, basis=2, validation=0.8, test=0.1),
        dict(t=3, basis=2, validation=0.8, test=0.2),
        dict(t=4, basis=4, validation=0.8, test=0.3),
    ]
    assert best_point(path)["t"] == 2  # never the test accuracy
    assert tau_for("l1/linf", 10.0, 4) == 10.0
    assert tau_for("l1", 10.0, 4) == 20.0
    assert tau_for("l1/l2", 10.0, 4) == pytest.approx(12.0)


def test_write_section_keeps_the_other_sections(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_section(path, "first")
    assert path.read_text().startswith("# Benchmarks")
    path.write_text(path.read_text() + "\n<!-- other:begin -->\nkeep\n<!-- other:end -->\n")
    write_section(path, "second")
    text = path.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert "second" in text and "first" not in text and "keep" in text


def test_quick_mode_end_to_end(tmp_path):
    result = main(["--quick", "--out", str(tmp_path), "--jobs", "1"])
    for name in ("mofm_fig2.png", "mofm_paths.png", "mofm_results.md"):
        assert (tmp_path / name).stat().st_size > 1000
    saved = json.loads((tmp_path / "reproduce_mofm.json").read_text())
    assert saved["config"]["mode"] == "quick"
    table = result["table"]
    for dataset in ("segment", "vowel"):
        for corrective in ("full", "output"):
            for penalty in ("l1", "l1/l2", "l1/linf"):
                entry = table[(dataset, corrective, penalty)]
                assert 0.0 <= entry["test"] <= 1.0 and 1 <= entry["basis"] <= 6
        assert table[(dataset, "kernel")]["basis"] > 0
    # chance is 1/7 on segment: even tiny models are far above it
    assert table[("segment", "output", "l1/linf")]["test"] > 0.5
    assert "vowel" in result["config"]["pilot_tau0"]
    assert set(result["verdicts"]) == {"segment", "vowel"}
    figure2 = [r for r in result["results"] if r["kind"] == "figure2"]
    for entry in figure2:
        for ratios in entry["ratios"].values():
            assert all(0.0 < r <= 1.0 + 1e-9 for r in ratios)
    online = {r["dataset"]: r for r in result["results"] if r["kind"] == "online"}
    assert set(online) == {"segment", "vowel"}
    assert online["segment"]["test"] > 0.5 and 0.0 <= online["vowel"]["test"] <= 1.0
    # the repeated-split study: seeds 0 and 1 of both data sets; seed 0 is the main run, so its
    # model is the targets' column (a) of the main results
    study = result["split_study"]
    assert set(study) == {"segment", "vowel"}
    for spec in QUICK_SPECS:
        entry = study[spec.name]
        assert [c["seed"] for c in entry["chosen"]] == [0, 1]
        points = budget_points(result["results"], spec, entry["budget"]).values()
        strict = max(points, key=lambda p: (p["validation"], -p["basis"]))
        assert entry["chosen"][0]["test"] == pytest.approx(100 * strict["test"])
        assert entry["mean"] == pytest.approx(np.mean([c["test"] for c in entry["chosen"]]))
        assert all(c["basis"] <= entry["budget"] for c in entry["chosen"])
    markdown = (tmp_path / "mofm_results.md").read_text()
    assert "quick mode" in markdown and "| l1/linf |" in markdown
    section = (tmp_path / "benchmarks.md").read_text()
    assert BEGIN in section and "learn_one" in section
    # the tables and figures can be rebuilt from the saved results without fitting
    rebuilt = tmp_path / "rebuilt"
    again = main(["--from-json", str(tmp_path / "reproduce_mofm.json"), "--out", str(rebuilt)])
    assert again["verdicts"] == result["verdicts"]
    assert again["split_study"] == result["split_study"]
    assert (rebuilt / "mofm_results.md").read_text() == markdown


def test_a_subset_with_other_corrective_iterations(tmp_path):
    # how the docs' satimage attempts are re-run: one data set, other corrective iterations
    result = main(
        ["--quick", "--datasets", "vowel", "--refit-iter", "7", "3", "--out", str(tmp_path)]
    )
    assert set(result["verdicts"]) == set(result["split_study"]) == {"vowel"}
    runs = [r for r in result["results"] if r["kind"] == "cg" and not r["pilot"]]  # (pilots: 20)
    assert runs and {r["refit_iter"] for r in runs} == {7, 3}
    assert result["config"]["datasets"] == ["vowel"] and result["config"]["refit_iter"] == [7, 3]
    with pytest.raises(SystemExit):
        main(["--quick", "--datasets", "letter", "--out", str(tmp_path)])  # not in quick mode
