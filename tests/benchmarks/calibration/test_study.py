"""The calibration study's models and scores."""

import numpy as np
import pytest

from benchmarks.calibration.study import binary_models, evaluate, multiclass_models
from core.calibration import Calibrated
from core.metrics import log_loss


def test_binary_scores_of_known_probabilities():
    p = np.array([0.9, 0.8, 0.3, 0.1])
    y_index = np.array([1, 0, 0, 0])
    result = evaluate(None, None, y_index, p)
    assert result["accuracy"] == 0.75
    assert result["brier"] == pytest.approx(np.mean((p - [1, 0, 0, 0]) ** 2))
    assert result["log_loss"] == log_loss(p, y_index)
    assert sum(result["reliability"]["count"]) == 4


def test_multiclass_scores_are_of_the_top_class():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    result = evaluate(None, None, np.array([0, 1]), p)
    assert result["accuracy"] == 0.5
    assert result["brier"] == pytest.approx(np.mean([0.09 + 0.04 + 0.01, 0.01 + 0.49 + 0.36]))
    assert 0.0 <= result["ece"] <= 1.0


def test_every_margin_model_is_calibrated_and_the_references_are_not():
    binary = binary_models(4)
    assert {name for name, make in binary.items() if not isinstance(make(), Calibrated)} == {
        "PQR k=0 (its sigmoid)"
    }
    assert len(binary) == 7
    multiclass = multiclass_models(4, [0, 1, 2])
    assert all(
        model().predict_proba_many(np.eye(4)[:2]).shape == (2, 3) for model in multiclass.values()
    )
