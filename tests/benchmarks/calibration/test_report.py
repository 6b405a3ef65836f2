"""The calibration page: the command beside the tables."""

from benchmarks.calibration.report import render, table


def result(accuracy):
    curve = {"mean_probability": [0.5], "frequency": [0.5], "count": [2]}
    return {"accuracy": accuracy, "log_loss": 0.5, "brier": 0.2, "ece": 0.1, "reliability": curve}


def test_render_names_the_command_and_shows_both_studies():
    study = {"n_train": 10, "n_test": 2, "models": {"m": result(0.5)}}
    results = {"a9a": study, "mnist": study | {"epochs": 3, "seed": 0}}
    text = render(results, "python -m benchmarks.calibration")
    assert text.startswith("Command: `python -m benchmarks.calibration`")
    assert text.count("| m | 50.00% | 0.5000 | 0.2000 | 0.1000 |") == 2
    assert table(study).splitlines()[0] == "| model | accuracy | log loss | Brier | ECE |"
