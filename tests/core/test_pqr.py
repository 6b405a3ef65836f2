import numpy as np
import pytest

from core.checks import check_estimator, digest
from core.kernels.pqr import _pqr_expand
from core.pqr import PQR, top_k
from core.registry import state_digest
from tests import naive


def sparse_stream(n=300, d=8, density=0.5, seed=0):
    """Rows with random signs and magnitudes, about density * d non-zeros each."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < density)
    return X


def binary_labels(X, seed=0):
    rng = np.random.default_rng(seed)
    logit = X @ rng.standard_normal(X.shape[1]) + X[:, 0] * X[:, 1]
    return np.where(logit + 0.3 * rng.standard_normal(X.shape[0]) > 0, 1, -1)


# -- the expansion (eq 12 / Definition 3) and the quadratic form (eq 9) ---------------------------
@pytest.mark.parametrize("seed", range(4))
def test_expansion_matches_dense_reference(seed):
    rng = np.random.default_rng(seed)
    d, k = 11, 5
    members = np.array([3, -1, 0, 7, -1])  # empty slots in the middle and at the end
    slot = np.full(d, -1)
    slot[members[members >= 0]] = np.flatnonzero(members >= 0)
    for _ in range(20):
        x = rng.standard_normal(d) * (rng.random(d) < 0.6)
        if rng.random() < 0.3:  # x_L cancels: no (a, L) pair is in I_t
            low = [j for j in range(d) if slot[j] < 0]
            x[low] = 0.0
            x[low[0]], x[low[1]] = 1.5, -1.5
        indices = np.arange(d)  # a dense row: its zeros must not enter x~
        h, size = np.count_nonzero(x[members[members >= 0]]), d + 1 + k * (k + 1) // 2
        out_index, out_value = np.empty(size, dtype=np.int64), np.empty(size)
        m = _pqr_expand(
            slot, k, indices, x, np.empty(k, np.int64), np.empty(k), out_index, out_value
        )
        dense = naive.pqr_expand_dense(x, members)
        scattered = np.zeros(size)
        scattered[out_index[:m]] = out_value[:m]
        assert np.unique(out_index[:m]).shape[0] == m
        np.testing.assert_allclose(scattered, dense, rtol=1e-14, atol=0)  # x_L: sum order
        assert set(out_index[:m].tolist()) == set(np.flatnonzero(dense).tolist())
        # O(nnz + h^2): nnz first-order, the bias, h (h - 1) / 2 pairs in H, h pairs with L
        nnz = np.count_nonzero(x)
        x_low = np.sum(x[slot < 0])
        assert m == nnz + 1 + h * (h - 1) // 2 + (h if x_low != 0 else 0)


def test_expand_method_and_named_rows():
    model = PQR(n_features=6, k=2, separation=[4, 1])
    indices, values = model.expand(([1, 4, 5], [2.0, 3.0, -1.0]))
    # x1 -> slot 1, x4 -> slot 0, x_L = x5 = -1; then M[0, 1], M[1, 2] (q_1), M[0, 2] (q_4)
    d = 6
    assert indices.tolist() == [1, 4, 5, d, d + 1, d + 1 + 2, d + 1 + 1]
    np.testing.assert_array_equal(values, [2.0, 3.0, -1.0, 1.0, 6.0, -2.0, -3.0])


@pytest.mark.parametrize("optimizer", ["ftrl", "ogd"])
def test_score_is_half_quadratic_form(optimizer):
    d = 7
    X = sparse_stream(200, d, 0.7, seed=1)
    model = PQR(n_features=d, k=4, separation=[5, 0, 3], optimizer=optimizer, alpha=0.5, l1=0.01)
    model.learn_many(X, binary_labels(X, 1))
    weights = model.weights()
    members, M = model.interactions()
    C = naive.pqr_matrix(weights, members, d)  # eq (3) with A from eq (7)
    assert np.count_nonzero(C[:d, :d]) > 10
    np.testing.assert_array_equal(C, C.T)
    # eq (13): A = P^T M P, from the reference and from the model's own M
    np.testing.assert_allclose(
        C[:d, :d], naive.pqr_interaction_from_projection(weights, members, d)
    )
    P = naive.pqr_projection(members, d)
    np.testing.assert_allclose(C[:d, :d], P.T @ M @ P, rtol=0, atol=0)
    for x in sparse_stream(30, d, 0.7, seed=2):
        x_hat = np.append(x, 1.0)
        assert model.score_one(x) == pytest.approx(0.5 * x_hat @ C @ x_hat, rel=1e-12, abs=1e-12)


# -- Algorithm 2 against the plain-numpy reference ---------------------------------------------
@pytest.mark.parametrize("task", ["binary", "regression"])
@pytest.mark.parametrize("optimizer", ["ftrl", "ogd"])
def test_matches_reference_algorithm(task, optimizer):
    d, k = 8, 4
    X = sparse_stream(300, d, 0.5, seed=3)
    y = binary_labels(X, 3) if task == "binary" else X @ np.arange(d) / d + X[:, 1] * X[:, 2]
    members = [2, 5, 0]  # slot 3 stays empty
    params = dict(alpha=0.3, beta=1.0, l1=0.05, l2=0.1)
    model = PQR(n_features=d, k=k, task=task, optimizer=optimizer, separation=members, **params)
    scores = [model.learn_one(x, label).score for x, label in zip(X, y, strict=True)]
    z, n, reference_scores = naive.pqr_train(
        X, y, members + [-1], task=task, optimizer=optimizer, **params
    )
    np.testing.assert_allclose(scores, reference_scores, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.n_, n, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.z_, z, rtol=1e-12, atol=1e-12)
    reference = PQR(n_features=d, k=k, task=task, optimizer=optimizer, separation=members, **params)
    reference.z_[:], reference.n_[:] = z, n
    np.testing.assert_allclose(model.weights(), reference.weights(), rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(model.weights()[d + 1 :]) > 3
    # learn_many runs the same loop in the kernel: bit for bit
    many = PQR(n_features=d, k=k, task=task, optimizer=optimizer, separation=members, **params)
    many.learn_many(X, y)
    assert digest(many) == digest(model)


def test_steps_report_loss_before_update():
    model = PQR(n_features=3, k=2, separation=[0, 1])
    x = [1.0, -2.0, 0.5]
    score = model.score_one(x)
    step = model.learn_one(x, -1)
    assert step.score == score
    assert step.loss == pytest.approx(np.log1p(np.exp(score)))
    assert step.aggressive
    regression = PQR(n_features=3, k=2, separation=[0, 1], task="regression")
    regression.learn_one(x, 2.0)
    score = regression.score_one(x)
    step = regression.learn_one(x, 2.0)
    assert step.score == score and step.loss == pytest.approx(0.5 * (score - 2.0) ** 2)
    assert regression.predict_one(x) == regression.score_one(x)
    # a huge l1 keeps every weight at zero: z moves, no weight does
    sparse = PQR(n_features=3, k=2, separation=[0, 1], l1=100.0)
    steps = sparse.learn_many([x, x], [1, 1])
    assert not steps.aggressive.any() and sparse.model_size() == 0
    assert np.all(steps.losses == np.log(2.0))


def test_ftrl_without_regularisation_is_ogd():
    """McMahan (2011): with l1 = l2 = 0 FTRL-Proximal is OGD with the same per-coordinate
    rates, up to beta (which FTRL centres at 0)."""
    X = sparse_stream(200, 6, 0.6, seed=4)
    y = binary_labels(X, 4)
    kwargs = dict(n_features=6, k=3, separation=[1, 4], alpha=0.5, beta=1e-9)
    ftrl, ogd = PQR(optimizer="ftrl", **kwargs), PQR(optimizer="ogd", **kwargs)
    ftrl.learn_many(X, y)
    ogd.learn_many(X, y)
    np.testing.assert_allclose(ftrl.weights(), ogd.weights(), rtol=1e-7, atol=1e-10)


def test_k_zero_is_ftrl_logistic_regression():
    X = sparse_stream(200, 6, 0.6, seed=5)
    y = binary_labels(X, 5)
    model = PQR(n_features=6, k=0, alpha=0.2, l1=0.01, l2=0.1)
    assert model.z_.shape == (7,)
    model.learn_many(X, y)
    z, n, _ = naive.pqr_train(X, y, [], alpha=0.2, beta=1.0, l1=0.01, l2=0.1)
    np.testing.assert_allclose(model.z_, z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.n_, n, rtol=1e-12, atol=1e-12)


# -- warm-up and separation --------------------------------------------------------------------
def warmup_stream(n=150, d=10, seed=6):
    """Feature 7 in every row; 2, 4 and 9 in half of the rows (a three-way tie); the rest rarer."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    for i in range(n):
        X[i, 7] = rng.uniform(0.5, 1.5)
        if i % 2 == 0:
            X[i, [2, 4]] = rng.uniform(-1, 1, 2)
        else:
            X[i, 9] = rng.uniform(-1, 1)
        X[i, rng.choice([0, 1, 3, 5, 6, 8], 2, replace=False)] = rng.standard_normal(2)
    return X


def test_warmup_is_linear_then_top_k():
    d, k, warmup = 10, 3, 50
    X = warmup_stream(d=d)
    y = binary_labels(X, 6)
    params = dict(alpha=0.4, beta=1.0, l1=0.01, l2=0.0)
    model = PQR(n_features=d, k=k, warmup=warmup, **params)
    linear = PQR(n_features=d, k=0, **params)
    for i in range(warmup - 1):
        model.learn_one(X[i], y[i])
        linear.learn_one(X[i], y[i])
        assert model.score_one(X[i + 1]) == linear.score_one(X[i + 1])
    assert not np.any(model.z_[d + 1 :]) and model.n_separations_ == 0
    model.learn_one(X[warmup - 1], y[warmup - 1])
    linear.learn_one(X[warmup - 1], y[warmup - 1])
    counts = np.count_nonzero(X[:warmup], axis=0)
    np.testing.assert_array_equal(model.counts_, counts)
    assert naive.pqr_top_k(counts, k) == [7, 2, 4]  # ties broken by the lower index
    assert model.members_.tolist() == [7, 2, 4] and model.n_separations_ == 1
    np.testing.assert_array_equal(model.z_[: d + 1], linear.z_)  # first-order weights carry on
    assert not np.any(model.z_[d + 1 :])  # pair weights start at zero
    z, n = model.z_.copy(), model.n_.copy()
    for x, label in zip(X[warmup:], y[warmup:], strict=True):
        model.learn_one(x, label)
    z, n, _ = naive.pqr_train(X[warmup:], y[warmup:], [7, 2, 4], z=z, n=n, **params)
    np.testing.assert_allclose(model.z_, z, rtol=1e-12, atol=1e-12)
    # learn_many splits the batch at the end of the warm-up: same model, bit for bit
    for cut in (0, 30, 49, 50, 51):
        many = PQR(n_features=d, k=k, warmup=warmup, **params)
        many.learn_many(X[:cut], y[:cut])
        many.learn_many(X[cut:], y[cut:])
        assert digest(many) == digest(model)


def test_explicit_separation_after_warmup():
    X = warmup_stream()
    y = binary_labels(X, 7)
    model = PQR(n_features=10, k=3, separation=[1, 9], warmup=20)
    assert model.members_.tolist() == [-1, -1, -1]
    model.learn_many(X[:19], y[:19])
    assert model.n_separations_ == 0
    model.learn_many(X[19:40], y[19:40])
    assert model.members_.tolist() == [1, 9, -1]
    assert PQR(n_features=10, k=3, separation=[1, 9]).members_.tolist() == [1, 9, -1]


def test_reestimate_separation_rule():
    d = 10
    X = warmup_stream(d=d)
    y = binary_labels(X, 8)
    model = PQR(n_features=d, k=3, separation=[0, 1, 2])
    model.learn_many(X, y)
    before = model.get_state()["arrays"]
    zn_before = np.stack([before["z_"], before["n_"]], axis=1)
    model.counts_[:] = [1, 9, 8, 0, 0, 9, 0, 0, 0, 0]  # top-3: 1, 5 (tie, lower index), 2
    assert model.reestimate_separation().tolist() == [5, 1, 2]
    # 0 left and its slot went to 5; 1 and 2 kept their slots
    assert model.slot_[[0, 1, 2, 5]].tolist() == [-1, 1, 2, 0]
    base = d + 1

    def pair(a, b):
        return base + b * (b - 1) // 2 + a

    kept = [pair(1, 2), pair(1, 3), pair(2, 3)]  # p between staying features and their q
    cleared = [pair(0, 1), pair(0, 2), pair(0, 3)]
    zn = np.stack([model.z_, model.n_], axis=1)
    np.testing.assert_array_equal(zn[kept], zn_before[kept])
    assert np.all(zn_before[cleared] != 0) and not np.any(zn[cleared])
    np.testing.assert_array_equal(zn[:base], zn_before[:base])  # first order and bias kept
    assert top_k(model.counts_, 3).tolist() == naive.pqr_top_k(model.counts_, 3)
    # unseen features never enter H
    fresh = PQR(n_features=d, k=3, warmup=1)
    fresh.learn_one(([4], [1.0]), 1)
    assert fresh.members_.tolist() == [4, -1, -1]


def test_top_k_matches_reference_on_ties():
    rng = np.random.default_rng(9)
    for _ in range(50):
        counts = rng.integers(0, 4, size=40)
        for k in (0, 1, 5, 39, 60):
            assert top_k(counts, k).tolist() == naive.pqr_top_k(counts, k)


# -- convexity in practice: a realisable stream reaches the noise floor ------------------------
def realisable_stream(n, d, k, task, seed, noise=0.1):
    """Sparse binary rows (about 6 non-zeros, feature j with probability ~ 1 / (j + 2)) labelled
    by a fixed PQR model whose H is the k most frequent features."""
    rng = np.random.default_rng(seed)
    probability = np.minimum(0.6, 2.0 / (np.arange(d) + 2.0))
    X = (rng.random((n, d)) < probability).astype(float)
    truth = PQR(n_features=d, k=k, separation=list(range(k)), optimizer="ogd", task=task)
    truth.z_[:] = rng.standard_normal(truth.z_.shape[0]) * 0.7  # OGD stores the weights
    f = truth.score_many(X)
    if task == "regression":
        return X, f + noise * rng.standard_normal(n), f
    return X, np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-f)), 1, -1), f


def test_realisable_regression_reaches_noise_floor():
    d, k, noise = 30, 5, 0.1
    X, y, _ = realisable_stream(65000, d, k, "regression", seed=10, noise=noise)
    model = PQR(n_features=d, k=k, task="regression", separation="topk", warmup=200, alpha=0.3)
    losses = model.learn_many(X[:60000], y[:60000]).losses
    floor = 0.5 * noise**2
    assert model.members_.tolist() == list(range(k))  # the top-k of the warm-up is H
    windows = [np.mean(window) / floor for window in np.array_split(losses, 6)]
    assert windows[0] > 5 and windows[-1] < 1.25 and windows[-1] < windows[1]
    held_out = 0.5 * np.mean((model.predict_many(X[60000:]) - y[60000:]) ** 2)
    assert held_out < 1.15 * floor
    linear = PQR(n_features=d, k=0, task="regression", alpha=0.3)
    assert np.mean(linear.learn_many(X, y).losses[-10000:]) > 5 * floor


def test_realisable_binary_reaches_entropy():
    d, k = 30, 5
    X, y, f = realisable_stream(30000, d, k, "binary", seed=11)
    model = PQR(n_features=d, k=k, separation=list(range(k)), alpha=0.1)
    losses = model.learn_many(X, y).losses
    floor = np.mean(np.logaddexp(0.0, -y * f)[-10000:])  # the true model's log loss
    assert np.mean(losses[-10000:]) < floor + 0.005
    linear = PQR(n_features=d, k=0, alpha=0.1)
    assert np.mean(linear.learn_many(X, y).losses[-10000:]) > floor + 0.015


# -- protocol -----------------------------------------------------------------------------------
FACTORIES = {
    "topk-warmup": lambda: PQR(n_features=5, k=3, warmup=20, alpha=0.3),
    "explicit-ogd": lambda: PQR(
        n_features=5, k=3, separation=[3, 0], optimizer="ogd", l1=0.01, l2=0.1
    ),
    "linear": lambda: PQR(n_features=5, k=0, l1=0.05),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_generic_suite_binary(name):
    rng = np.random.default_rng(12)
    X = rng.standard_normal((60, 5))
    y = np.where(X[:, 0] * X[:, 3] + X[:, 1] > 0, 1, -1)
    check_estimator(FACTORIES[name], X, y)


def test_generic_suite_regression():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((60, 5)) * (rng.random((60, 5)) < 0.7)
    y = X[:, 0] * X[:, 3] + X[:, 1] + 0.1 * rng.standard_normal(60)
    check_estimator(
        lambda: PQR(n_features=5, k=2, task="regression", warmup=25),
        X,
        y,
        bad_labels=(np.nan, np.inf, "spam", True, None),
    )


def test_predict_proba():
    X = sparse_stream(100, 5, 0.6, seed=14)
    model = PQR(n_features=5, k=2, separation=[0, 1])
    model.learn_many(X, binary_labels(X, 14))
    scores = model.score_many(X)
    probabilities = model.predict_proba_many(X)
    np.testing.assert_allclose(probabilities, 1.0 / (1.0 + np.exp(-scores)), rtol=1e-15)
    assert model.predict_proba_one(X[3]) == probabilities[3]
    np.testing.assert_array_equal(model.predict_many(X), np.where(scores > 0, 1, -1))
    with pytest.raises(ValueError, match="binary"):
        PQR(n_features=5, k=2, task="regression", warmup=5).predict_proba_one(X[0])


def test_model_size_counts_nonzero_weights():
    X = sparse_stream(300, 8, 0.5, seed=15)
    y = binary_labels(X, 15)
    sizes = []
    for l1 in (0.0, 1.0, 5.0):
        model = PQR(n_features=8, k=4, separation=[0, 1, 2, 3], l1=l1)
        model.learn_many(X, y)
        assert model.model_size() == np.count_nonzero(model.weights())
        sizes.append(model.model_size())
    assert sizes[0] == 8 + 1 + 10 and sizes[0] > sizes[1] > sizes[2]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(k=-1),
        dict(k=2.5),
        dict(k=True),
        dict(task="ranking"),
        dict(optimizer="adam"),
        dict(alpha=0.0),
        dict(alpha=float("nan")),
        dict(beta=-1.0),
        dict(l1=-0.1),
        dict(l2="1"),
        dict(separation="bottomk"),
        dict(separation=[0, 0]),
        dict(separation=[0, 9]),
        dict(separation=[1, 2, 3, 4], k=3),
        dict(separation=np.array([0, 1])),
        dict(separation=[0.5]),
        dict(warmup=-1),
        dict(warmup=1.5),
        dict(separation="topk", warmup=0),
    ],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        PQR(n_features=9, **{"k": 3, **kwargs})


def test_warmup_zero_is_fine_for_k_zero():
    assert PQR(n_features=3, k=0, warmup=0).members_.shape == (0,)


def test_overflow_is_rejected_without_change():
    model = PQR(n_features=3, k=2, separation=[0, 1], task="regression")
    model.learn_one([1.0, 2.0, 0.0], 1.0)
    reference = digest(model)
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one([1e160, 1e160, 0.0], 1.0)  # x_0 x_1 overflows
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one([1.0, 0.0, 0.0], 1e300)  # the squared loss overflows
    with pytest.raises(ValueError, match="row 1"):
        model.learn_many([[1.0, 0.0, 0.0], [0.0, 0.0, 1e200]], [1.0, 1.0])
    assert digest(model) == reference


def test_set_state_checks_the_separation():
    model = PQR(n_features=4, k=2, separation=[2])
    state = model.get_state()
    state["arrays"]["slot_"][3] = 1  # slot 1 is empty in members_
    with pytest.raises(ValueError, match="disagree"):
        model.set_state(state)
    state = model.get_state()
    state["arrays"]["members_"][1] = 7
    with pytest.raises(ValueError, match="range"):
        model.set_state(state)
    state = model.get_state()
    state["arrays"]["counts_"][0] = -1
    with pytest.raises(ValueError, match="non-negative"):
        model.set_state(state)
    assert model.members_.tolist() == [2, -1] and model.slot_.tolist() == [-1, -1, 0, -1]


def test_hashed_named_features_in_a_large_space():
    d, k = 2**20, 16
    rng = np.random.default_rng(16)
    rows, labels = [], []
    for _ in range(1000):
        user, item = int(rng.zipf(1.5)) % 50, int(rng.zipf(1.5)) % 80
        row = {"user": f"u{user}", "item": f"i{item}", "hour": float(rng.integers(24)) / 24}
        row.update({f"tag{int(t)}": 1.0 for t in rng.integers(0, 5000, 36)})
        rows.append(row)
        labels.append(1 if (user % 2 == 0) != (item == 1) else -1)
    model = PQR(n_features=d, k=k, warmup=200, alpha=0.1)
    one = PQR(n_features=d, k=k, warmup=200, alpha=0.1)
    steps = model.learn_many(rows, labels)
    for row, label in zip(rows[:250], labels[:250], strict=True):
        one.learn_one(row, label)
    assert np.all(model.members_ >= 0)
    assert np.mean(steps.losses[-200:]) < np.mean(steps.losses[:200]) - 0.03
    probability = model.predict_proba_one(rows[0])
    assert 0.0 < probability < 1.0
    # memory O(d + k^2): four length-d arrays (z, n, slot, counts) and the pair weights
    state = model.get_state()
    total = sum(array.nbytes for array in state["arrays"].values())
    assert total <= 8 * (4 * (d + 1) + 2 * k * (k + 1) // 2 + k)
    assert max(array.size for array in state["arrays"].values()) <= d + 1 + k * (k + 1) // 2
    many = PQR(n_features=d, k=k, warmup=200, alpha=0.1)
    many.learn_many(rows[:250], labels[:250])
    assert state_digest(many.get_state()) == digest(one)


def test_works_as_the_base_of_multiclass_reductions():
    from core.one_vs_one import OneVsOne
    from core.one_vs_rest import OneVsRest
    from core.registry import from_state

    rng = np.random.default_rng(17)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int) + 2 * (X[:, 2] > 0)  # needs the product x0 x1
    for reduction in (OneVsRest, OneVsOne):
        quadratic = reduction(
            base=PQR(n_features=4, k=4, separation=[0, 1, 2, 3]), classes=[0, 1, 2, 3]
        )
        linear = reduction(base=PQR(n_features=4, k=0), classes=[0, 1, 2, 3])
        quadratic.learn_many(X, y)
        linear.learn_many(X, y)
        assert np.mean(quadratic.predict_many(X) == y) > np.mean(linear.predict_many(X) == y) + 0.1
        assert digest(from_state(quadratic.get_state())) == digest(quadratic)
