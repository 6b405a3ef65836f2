"""OneVsOne (``core.one_vs_one``): its pairs, each learning from its two classes only, the
vote and its tie-breaks, and its accuracy on the vowel data set against one-vs-rest."""

from pathlib import Path

import numpy as np
import pytest

from core.checks import digest
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from tests.core.test_reduction import BASES, multiclass_stream

VOWEL = Path(__file__).resolve().parents[3] / "shared" / "data" / "vowel"


def read_svmlight(path: Path, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense rows and int labels of an svmlight file with 1-based feature indices."""
    rows, labels = [], []
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields:
            continue
        row = np.zeros(n_features)
        for field in fields[1:]:
            index, value = field.split(":")
            row[int(index) - 1] = float(value)
        rows.append(row)
        labels.append(int(float(fields[0])))
    return np.array(rows), np.array(labels)


def test_structure_and_params():
    model = OneVsOne(base=LinearPA(n_features=3), classes=list(range(10)))
    assert len(model.models_) == 45  # section 4: 45 pairwise classifiers for 10 digits
    assert model.pairs_[:3] == ((0, 1), (0, 2), (0, 3)) and model.pairs_[-1] == (8, 9)
    assert all(i < j for i, j in model.pairs_)
    assert len(set(model.pairs_)) == 45
    assert model.n_features == 3 and model.classes_ == tuple(range(10))
    assert len(OneVsRest(base=LinearPA(n_features=3), classes=["a", "b"]).models_) == 2
    assert [name for name, _ in model.children()] == [str(p) for p in range(45)]
    # sub-models are distinct clones of base, base itself is never trained
    assert len({id(m) for m in model.models_}) == 45 and model.base not in model.models_


@pytest.mark.parametrize("base", ["linear", "dos"])
def test_each_pair_learns_only_from_its_two_classes(base):
    classes = [10, 20, 30, 40]
    X, y = multiclass_stream(classes, n=150, seed=4)
    model = OneVsOne(base=BASES[base](), classes=classes)
    model.learn_many(X[:70], y[:70])
    for x, label in zip(X[70:], y[70:], strict=True):
        model.learn_one(x, label)
    y = np.array(y)
    for (i, j), pair in zip(model.pairs_, model.models_, strict=True):
        alone = BASES[base]()
        for x, label in zip(X, y, strict=True):
            if label in (classes[i], classes[j]):
                alone.learn_one(x, 1 if label == classes[i] else -1)
        assert alone.n_seen_ == np.count_nonzero((y == classes[i]) | (y == classes[j])) > 0
        assert digest(pair) == digest(alone), (i, j)


def hand_built_ovo(pair_scores: dict[tuple[int, int], float], n_classes: int = 3):
    """OvO over LinearPA(n_features=1, no intercept) whose pair (i, j) scores s * x."""
    model = OneVsOne(
        base=LinearPA(n_features=1, fit_intercept=False),
        classes=[f"c{k}" for k in range(n_classes)],
    )
    for p, pair in enumerate(model.pairs_):
        model.models_[p].w_[0] = pair_scores.get(pair, 0.0)
    return model


@pytest.mark.parametrize(
    ("pair_scores", "votes", "confidence", "winner"),
    [
        # clear majority: 0 beats 1 and 2, 1 beats 2
        ({(0, 1): 1.0, (0, 2): 2.0, (1, 2): 0.5}, [2, 1, 0], [3.0, -0.5, -2.5], "c0"),
        # a score of exactly 0 votes for the pair's second class: a zero model predicts the last
        ({}, [0, 1, 2], [0.0, 0.0, 0.0], "c2"),
        ({(0, 1): 1.0, (0, 2): 1.0}, [2, 0, 1], [2.0, -1.0, -1.0], "c0"),
        # 3-cycle (0 > 1 > 2 > 0): votes tie, the summed signed scores decide
        ({(0, 1): 0.5, (0, 2): -2.0, (1, 2): 3.0}, [1, 1, 1], [-1.5, 2.5, -1.0], "c1"),
        ({(0, 1): 3.0, (0, 2): -2.0, (1, 2): 0.5}, [1, 1, 1], [1.0, -2.5, 1.5], "c2"),
        # the other cycle, equal confidences: the lowest class index wins
        ({(0, 1): -1.0, (0, 2): 1.0, (1, 2): -1.0}, [1, 1, 1], [0.0, 0.0, 0.0], "c0"),
        # a cycle where c0 wins by confidence alone
        ({(0, 1): 2.0, (0, 2): -1.0, (1, 2): 1.0}, [1, 1, 1], [1.0, -1.0, 0.0], "c0"),
    ],
)
def test_vote_and_tie_break(pair_scores, votes, confidence, winner):
    model = hand_built_ovo(pair_scores)
    got_votes, got_confidence = model.decision_one([1.0])
    assert got_votes.tolist() == votes
    assert got_confidence.tolist() == confidence
    assert model.predict_one([1.0]) == winner
    assert model.predict_many([[1.0], [1.0]]).tolist() == [winner, winner]
    assert model.classes_[int(np.argmax(model.score_one([1.0])))] == winner


def test_tie_break_among_tied_classes_only_uses_all_their_pairs():
    # 4 classes: 0, 1 and 3 tie with 2 votes each; each confidence sums all pairs of its class
    scores = {(0, 1): 0.1, (0, 2): 0.1, (0, 3): -5.0, (1, 2): 4.0, (1, 3): 0.2, (2, 3): -9.0}
    model = hand_built_ovo(scores, n_classes=4)
    votes, confidence = model.decision_one([1.0])
    assert votes.tolist() == [2, 2, 0, 2]
    assert confidence.tolist() == pytest.approx([-4.8, 4.1, -13.1, 13.8])
    assert model.predict_one([1.0]) == "c3"
    # now 3 loses to 2: votes 2, 2, 1, 1; class 2 has the highest confidence but fewer votes
    scores[(2, 3)] = 20.0
    model = hand_built_ovo(scores, n_classes=4)
    votes, confidence = model.decision_one([1.0])
    assert votes.tolist() == [2, 2, 1, 1]
    assert confidence.tolist() == pytest.approx([-4.8, 4.1, 15.9, -15.2])
    assert model.predict_one([1.0]) == "c1"


def test_vote_batch_matches_rows_and_sign_of_x():
    model = hand_built_ovo({(0, 1): 0.5, (0, 2): -2.0, (1, 2): 3.0})
    X = np.array([[1.0], [-1.0], [0.0], [2.0]])
    # x = -1 flips every pair: 1 > 0 > 2 > 1, confidences 1.5, -2.5, 1.0 -> c0
    assert model.predict_many(X).tolist() == ["c1", "c0", "c2", "c1"]
    assert [model.predict_one(x) for x in X] == ["c1", "c0", "c2", "c1"]
    votes, confidence = model.decision_many(X)
    assert votes.shape == confidence.shape == (4, 3) and votes.dtype == np.int64
    assert np.array_equal(np.argmax(model.score_many(X), axis=1), [1, 0, 2, 1])
    assert np.all(np.abs(model.score_many(X) - votes) < 1 / 3)


@pytest.fixture(scope="module")
def vowel():
    X_train, y_train = read_svmlight(VOWEL / "vowel.scale", 10)
    X_test, y_test = read_svmlight(VOWEL / "vowel.scale.t", 10)
    return X_train, y_train, X_test, y_test


def test_vowel_reader(vowel):
    X_train, y_train, X_test, y_test = vowel
    assert X_train.shape == (528, 10) and X_test.shape == (462, 10)
    assert np.array_equal(np.bincount(y_train), np.full(11, 48))
    assert np.array_equal(np.bincount(y_test), np.full(11, 42))
    assert np.abs(X_train).max() <= 1.0


def accuracy_after(model, vowel, epochs: int) -> float:
    X_train, y_train, X_test, y_test = vowel
    for _ in range(epochs):
        model.learn_many(X_train, y_train)
    return float(np.mean(model.predict_many(X_test) == y_test))


def test_vowel_one_vs_one_dos(vowel):
    """Eleven vowels, 55 pairwise DoS rank-4 models, 5 epochs (measured: OvO DoS 0.47-0.53
    over seeds 0-5, OvR DoS 0.33-0.38, OvO linear 0.45; majority class 1/11 = 0.09)."""
    classes = list(range(11))
    _, y_train, _, y_test = vowel
    majority = np.mean(y_test == np.bincount(y_train).argmax())
    ovo = accuracy_after(
        OneVsOne(base=DoSClassifier(n_features=10, rank=4, seed=0), classes=classes), vowel, 5
    )
    ovr = accuracy_after(
        OneVsRest(base=DoSClassifier(n_features=10, rank=4, seed=0), classes=classes), vowel, 5
    )
    assert majority < 0.1
    assert ovo > 0.40
    assert ovo > ovr + 0.08
