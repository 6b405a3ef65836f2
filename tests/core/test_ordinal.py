"""OrdinalMcRank (section 6.5): the reduction's targets, the expected relevance, the generic
model suite, and a small recommender experiment with a multi-output FM."""

import numpy as np
import pytest

from core.base import PartialBatchError
from core.checks import check_estimator
from core.features import as_batch
from core.metrics import ndcg_at_k, rmse
from core.mofm import MultiOutputPN
from core.ordinal import OrdinalMcRank
from core.registry import state_digest

LEVELS = [1, 3, 5, 7]


def base(n_features=3, n_outputs=3, **params):
    params = {"loss": "logistic", "n_basis": 4, "tau": 10.0, "seed": 1, **params}
    return MultiOutputPN(n_features=n_features, n_outputs=n_outputs, **params)


def ordinal_stream(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    score = X[:, 0] ** 2 + X[:, 1] * X[:, 2]
    y = np.array(LEVELS)[np.digitize(score, np.quantile(score, [0.25, 0.5, 0.75]))]
    return X, y


def test_targets_are_the_cumulative_indicators():
    model = OrdinalMcRank(base=base(), levels=LEVELS)
    expected = [[1, 1, 1], [-1, 1, 1], [-1, -1, 1], [-1, -1, -1]]
    np.testing.assert_array_equal(model.targets(LEVELS), expected)
    np.testing.assert_array_equal(model.targets([3.0]), [[-1, 1, 1]])  # 3.0 is level 3
    for bad in (2, "3", True, None, np.nan):
        with pytest.raises(ValueError):
            model.targets([bad])


def test_expected_relevance_and_probabilities():
    X, y = ordinal_stream()
    model = OrdinalMcRank(base=base(), levels=LEVELS).fit(X, y)
    cumulative = model.model_.predict_proba_many(X)
    padded = np.hstack([np.zeros((len(X), 1)), cumulative, np.ones((len(X), 1))])
    expected = np.sum(np.array(LEVELS) * np.diff(padded, axis=1), axis=1)  # the paper's sum
    np.testing.assert_allclose(model.predict_many(X), expected, rtol=1e-12)
    assert np.all((model.predict_many(X) >= 1) & (model.predict_many(X) <= 7))
    proba = model.predict_proba_many(X)
    assert proba.shape == (len(X), 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(proba >= 0)
    np.testing.assert_allclose(model.predict_proba_one(X[0]), proba[0])
    assert model.predict_one(X[0]) == model.predict_many(X[:1])[0]


def test_generic_suite():
    X, y = ordinal_stream(n=40)
    check_estimator(lambda: OrdinalMcRank(base=base(), levels=LEVELS), X, list(y))


def test_learn_many_is_the_learn_one_loop_and_refit_swaps():
    X, y = ordinal_stream(n=50, seed=1)
    one = OrdinalMcRank(base=base(activation="anova"), levels=LEVELS)
    for x_i, y_i in zip(X, y, strict=True):
        one.learn_one(x_i, int(y_i))
    many = OrdinalMcRank(base=base(activation="anova"), levels=LEVELS)
    many.learn_many(X, y)
    assert state_digest(one.get_state()) == state_digest(many.get_state())
    before = state_digest(one.get_state())
    new = one.refit(X, y)
    assert state_digest(one.get_state()) == before and new.n_seen_ == 0
    assert rmse(y, new.predict_many(X)) < rmse(y, one.predict_many(X))


def test_rows_learned_before_a_refused_row_are_counted():
    """A batch whose third row overflows the base model: the two rows before it were learned
    by the base model, so the reduction counts them (it counted none)."""
    model = OrdinalMcRank(base=base(), levels=LEVELS)
    model.learn_one([0.5, -0.5, 1.0], 3)  # activates the basis
    X = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5], [1e200, 1.0, 1.0], [1.0, 1.0, 1.0]])
    with pytest.raises(PartialBatchError) as error:
        model.learn_many(X, [1, 5, 7, 3])
    assert len(error.value.learned) == 2
    assert model.n_seen_ == model.model_.n_seen_ == 3
    with pytest.raises(PartialBatchError):
        model.learn_batch(as_batch(X[2:], 3), np.array([3, 0]))  # level indices
    assert model.n_seen_ == model.model_.n_seen_ == 3


def test_base_is_validated():
    with pytest.raises(ValueError, match="n_outputs"):
        OrdinalMcRank(base=base(n_outputs=4), levels=LEVELS)
    with pytest.raises(ValueError):
        OrdinalMcRank(base=base(), levels=[1, 3, 3, 7])
    with pytest.raises(ValueError):
        OrdinalMcRank(base=base(), levels=[1, 3, 5, True])
    with pytest.raises(ValueError):
        OrdinalMcRank(base="model", levels=LEVELS)


def test_recommender_with_multi_output_fm():
    """One-hot users and items, ratings 1..5 from a low-rank interaction: the multi-output FM
    trained through the reduction beats the mean rating on RMSE and ranks items per user."""
    rng = np.random.default_rng(2)
    n_users, n_items, n = 30, 40, 2400
    users, items = rng.integers(n_users, size=n), rng.integers(n_items, size=n)
    taste = rng.standard_normal((n_users, 2)) @ rng.standard_normal((2, n_items))
    affinity = taste[users, items] + 0.3 * rng.standard_normal(n)
    ratings = 1 + np.digitize(affinity, np.quantile(affinity, [0.2, 0.4, 0.6, 0.8]))
    X = np.zeros((n, n_users + n_items))
    X[np.arange(n), users] = 1.0
    X[np.arange(n), n_users + items] = 1.0
    train, test = slice(0, 1800), slice(1800, n)
    fm = MultiOutputPN(
        n_features=n_users + n_items,
        n_outputs=4,
        loss="logistic",
        activation="anova",
        penalty="l1/linf",
        n_basis=8,
        tau=200.0,
    )
    model = OrdinalMcRank(base=fm, levels=[1, 2, 3, 4, 5]).fit(X[train], ratings[train])
    predicted = model.predict_many(X[test])
    baseline = rmse(ratings[test], np.full(600, ratings[train].mean()))
    assert rmse(ratings[test], predicted) < 0.8 * baseline
    ndcg = ndcg_at_k(ratings[test], predicted, k=5, groups=users[test])
    random_ndcg = ndcg_at_k(ratings[test], rng.random(600), k=5, groups=users[test])
    assert ndcg > random_ndcg + 0.1


def test_predictions_from_the_scores_of_a_validated_batch():
    """``score_batch`` then ``predict_from_scores`` / ``proba_from_scores`` give ``score_many``,
    ``predict_many`` and ``predict_proba_many``, bit for bit."""
    X, y = ordinal_stream(n=40, seed=2)
    model = OrdinalMcRank(base=base(), levels=LEVELS)
    model.learn_many(X, y)
    scores = model.score_batch(as_batch(X, 3))
    assert np.array_equal(scores, model.score_many(X))
    assert np.array_equal(model.predict_from_scores(scores), model.predict_many(X))
    assert np.array_equal(model.proba_from_scores(scores), model.predict_proba_many(X))
