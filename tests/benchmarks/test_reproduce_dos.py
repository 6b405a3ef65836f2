"""The section-4 reproduction: its kernels against the library, and its quick mode end to end."""

import json

import numpy as np
import pytest

from benchmarks.reproduce_dos import PAIRS, Family, main
from core.base import state_digest
from core.datasets import DeformationStream
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.multiclass import OneVsOne


def strokes(n=30, seed=0):
    """Synthetic digit-like images (bars), labels 0..9: no data needed."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    for image in images:
        for _ in range(3):
            r, c = rng.integers(6, 20, size=2)
            image[r : r + 2, c - 4 : c + 5] = 255
    return images, np.arange(n) % 10


@pytest.mark.parametrize("rank", [None, 2])
def test_stacked_kernel_is_one_vs_one(rank):
    """The benchmark's kernel makes the predictions and updates of core.multiclass.OneVsOne
    over the library's binary models, bit for bit."""
    images, labels = strokes()
    X, y = DeformationStream(images, labels, seed=0).take(250)
    family = Family(rank, seed=3)
    predictions = np.concatenate([family.learn(X[:100], y[:100]), family.learn(X[100:], y[100:])])

    base = (
        LinearPA(n_features=784)
        if rank is None
        else DoSClassifier(n_features=784, rank=rank, seed=3)
    )
    reference = OneVsOne(base=base, classes=list(range(10)))
    expected = []
    for x, label in zip(X, y, strict=True):
        nonzero = np.flatnonzero(x)
        expected.append(reference.learn_one((nonzero, x[nonzero]), int(label)).predicted)
    np.testing.assert_array_equal(predictions, expected)
    for p in range(len(PAIRS)):
        assert state_digest(family.pair_state(p)) == state_digest(reference.models_[p].get_state())
    np.testing.assert_array_equal(family.predict(X[:40]), reference.predict_many(X[:40]))


def test_averaging_identical_snapshots_keeps_the_classifier():
    images, labels = strokes()
    X, y = DeformationStream(images, labels, seed=1).take(200)
    family = Family(2, seed=0)
    family.learn(X, y)
    family.fold_snapshot()
    family.fold_snapshot()
    assert family.n_averaged == 2
    np.testing.assert_array_equal(family.predict(X, averaged=True), family.predict(X))


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
    assert "examples/s" in capsys.readouterr().out
