"""The calibration study end to end in quick mode: outputs written, figures sane."""

import json
import math

from benchmarks.calibration.cli import main


def test_quick_run_writes_its_outputs(tmp_path):
    results = main(["--quick", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "calibration.json").read_text())
    assert saved["a9a"]["models"].keys() == results["a9a"]["models"].keys()
    assert (tmp_path / "calibration.png").stat().st_size > 10_000
    text = (tmp_path / "calibration.md").read_text()
    assert "<!-- calibration:begin -->" in text and "--quick" in text
    for study, classes in (("a9a", 2), ("mnist", 10)):
        for name, r in results[study]["models"].items():
            assert 0 <= r["ece"] <= 1 and r["brier"] >= 0, name
            assert math.isfinite(r["log_loss"]) and r["log_loss"] < math.log(classes), name
            curve = r["reliability"]
            assert sum(curve["count"]) == results[study]["n_test"]
    # calibrated margins do about as well as the model trained for probabilities (PQR's LR)
    a9a = results["a9a"]["models"]
    assert a9a["linear PA-I + platt"]["log_loss"] < a9a["PQR k=0 (its sigmoid)"]["log_loss"] + 0.05
