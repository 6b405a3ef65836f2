"""The section-4 reproduction's quick mode end to end."""

import json

import numpy as np

from benchmarks.reproduce_dos.cli import main


def test_quick_mode_end_to_end(tmp_path, capsys):
    result = main(["--quick", "--out", str(tmp_path)])
    for name in ("reproduce_dos_fig4.png", "reproduce_dos_fig5.png", "results.md"):
        assert (tmp_path / name).stat().st_size > 1000
    saved = json.loads((tmp_path / "reproduce_dos.json").read_text())
    assert saved["config"]["mode"] == "quick" and saved["config"]["ranks"] == [1, 4]
    models = result["models"]
    assert set(models) == {"linear", "DoS d=1", "DoS d=4"}
    for m in models.values():
        for key in (
            "final_cumulative_error",
            "final_moving_error",
            "final_test_error_live",
            "final_test_error_averaged",
        ):
            assert 0.0 <= m[key] <= 1.0
        assert np.isfinite(m["final_test_error_averaged"])
        assert m["examples_per_second"] > 0
        assert len(m["windows"]) == saved["config"]["examples"] // saved["config"]["window"]
    # chance is 90 % error on ten classes
    dos4 = models["DoS d=4"]
    assert dos4["final_cumulative_error"] < 0.6
    assert dos4["final_test_error_live"] < 0.4 and dos4["final_test_error_averaged"] < 0.4
    markdown = (tmp_path / "results.md").read_text()
    assert "Quick mode" in markdown and "| DoS d=4 |" in markdown
    assert "`.venv/bin/python -m benchmarks.reproduce_dos --quick`" in markdown
    assert saved["timing"]["threads"] == 2 and "2 thread(s)" in markdown
    assert "examples/s" in capsys.readouterr().out
