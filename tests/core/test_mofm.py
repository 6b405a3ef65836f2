"""MultiOutputPN and its kernels: scores, losses, gradients and projections against plain-numpy
references (tests/naive.py) and finite differences; the basis selection against eigenvectors,
brute force and the exact l1/linf answer; Algorithm 1's monotone objective and feasible
iterates; online learning, refit, the reservoir and the generic model suite."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from core.checks import check_estimator
from core.features import as_batch
from core.kernels.mofm import LOSSES, PENALTIES, _mofm_project, _mofm_score
from core.mofm import MultiOutputPN, Problem, Reservoir, batch_loss_grad, select_basis
from core.mofm.algorithm1 import SELECTION_NORM
from core.registry import from_state, state_digest
from tests import naive

ACTIVATION_NAMES = ("square", "anova")


def random_model(n_features, n_basis, m, activation="square", seed=0, **params):
    model = MultiOutputPN(
        n_features=n_features,
        n_outputs=m,
        loss="squared",
        activation=activation,
        n_basis=n_basis,
        **params,
    )
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((n_basis, n_features + 1))
    H /= np.linalg.norm(H, axis=1, keepdims=True)
    model._load(H, rng.standard_normal((n_basis, m)), compact=False)
    return model


def blobs(n=120, d=4, classes=(1, 3, 5), seed=0):
    """Classes separated by quadratic boundaries (rings around the origin) plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    radius = np.linalg.norm(X, axis=1)
    edges = np.quantile(radius, np.linspace(0, 1, len(classes) + 1)[1:-1])
    y = np.array(classes)[np.searchsorted(edges, radius)]
    return X, y


def clusters(n=300, d=4, classes=(1, 3, 5), seed=0):
    """Gaussian clusters, one per class."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(classes), d)) * 3.0
    k = rng.integers(len(classes), size=n)
    return centres[k] + rng.standard_normal((n, d)), np.array(classes)[k]


def problem_for(X, G_rows=None, activation="square", gram="auto", m=3, seed=0):
    """A Problem over X with random loss gradients G (the selection only needs G)."""
    rng = np.random.default_rng(seed)
    batch = as_batch(X, X.shape[1])
    T = np.eye(m)[rng.integers(m, size=batch.n_rows)]
    problem = Problem(batch, X.shape[1], T, 1, 0 if activation == "square" else 1, gram)
    G = rng.standard_normal((batch.n_rows, m)) if G_rows is None else G_rows
    return problem, G


def augmented(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


# -- predictions ------------------------------------------------------------------------------
def test_anova_is_the_quadratic_definition():
    rng = np.random.default_rng(0)
    for trial in range(50):
        d = int(rng.integers(1, 9))
        model = random_model(d, 1, 1, activation="anova", seed=trial)
        model.V_[0, 0] = 1.0
        x = rng.standard_normal(d)
        expected = naive.mofm_anova(model.H_[0], np.append(x, 1.0))
        assert model.score_one(x)[0] == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_scores_match_the_dense_reference_on_sparse_rows(activation):
    rng = np.random.default_rng(1)
    model = random_model(30, 5, 4, activation=activation)
    X = sp.random(40, 30, density=0.2, random_state=1, format="csr")
    scores = model.score_many(X)
    for i in range(40):
        z = np.append(X[i].toarray().ravel(), 1.0)
        expected = naive.mofm_outputs(model.H_, model.V_, z, activation)
        np.testing.assert_allclose(scores[i], expected, rtol=1e-10, atol=1e-12)
    x = rng.standard_normal(30)
    x[::3] = 0.0  # zeros of a dense row change nothing
    nonzero = np.flatnonzero(x)
    np.testing.assert_array_equal(model.score_one(x), model.score_one((nonzero, x[nonzero])))


# -- losses and gradients --------------------------------------------------------------------
@pytest.mark.parametrize("loss", list(LOSSES))
def test_losses_match_reference_and_finite_differences(loss):
    rng = np.random.default_rng(2)
    m = 5
    for _ in range(30):
        O = rng.standard_normal((3, m)) * 3
        if loss == "logistic":
            T = rng.choice([-1.0, 1.0], size=(3, m))
        elif loss == "squared":
            T = rng.standard_normal((3, m))
        else:
            T = np.eye(m)[rng.integers(m, size=3)]
        total, G = batch_loss_grad(LOSSES[loss], T, O)
        values = [naive.mofm_loss(loss, T[i], O[i]) for i in range(3)]
        assert total == pytest.approx(sum(v for v, _ in values), rel=1e-10)
        np.testing.assert_allclose(G, np.array([g for _, g in values]), atol=1e-9)
        step = 1e-6
        for c in range(m):
            E = np.zeros_like(O)
            E[0, c] = step
            numeric = (
                batch_loss_grad(LOSSES[loss], T, O + E)[0]
                - batch_loss_grad(LOSSES[loss], T, O - E)[0]
            ) / (2 * step)
            assert G[0, c] == pytest.approx(numeric, abs=1e-6)


@pytest.mark.parametrize("loss", list(LOSSES))
def test_kernel_loss_matches_batch_loss(loss):
    from core.kernels.mofm import _mofm_loss_grad

    rng = np.random.default_rng(3)
    m = 4
    for _ in range(20):
        o = rng.standard_normal(m) * 5
        t = rng.choice([-1.0, 1.0], size=m) if loss == "logistic" else np.eye(m)[rng.integers(m)]
        g = np.empty(m)
        value = _mofm_loss_grad(LOSSES[loss], t, o, g, np.empty(2 * m))
        total, G = batch_loss_grad(LOSSES[loss], t[None, :], o[None, :])
        assert value == pytest.approx(total, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(g, G[0], atol=1e-12)


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_model_gradients_match_finite_differences(activation):
    """d F / d H (the full refit's gradient) and d F / d V (Phi^T G) of Algorithm 1."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((25, 4))
    T = np.eye(3)[rng.integers(3, size=25)]
    problem = Problem(as_batch(X, 4), 4, T, 0, ACTIVATIONS[activation], "auto")
    H = rng.standard_normal((3, 5)) * 0.4
    V = rng.standard_normal((3, 3))

    def objective(H, V):
        return problem.loss_grad(problem.hidden(H)[1] @ V)[0]

    A, Phi = problem.hidden(H)
    F, G = problem.loss_grad(Phi @ V)
    grad_H = problem.grad_H(A, H, G @ V.T)
    grad_V = Phi.T @ G
    step = 1e-6
    for r, j in itertools.product(range(3), range(5)):
        E = np.zeros_like(H)
        E[r, j] = step
        numeric = (objective(H + E, V) - objective(H - E, V)) / (2 * step)
        assert grad_H[r, j] == pytest.approx(numeric, rel=1e-5, abs=1e-8)
    for r, c in itertools.product(range(3), range(3)):
        E = np.zeros_like(V)
        E[r, c] = step
        numeric = (objective(H, V + E) - objective(H, V - E)) / (2 * step)
        assert grad_V[r, c] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


ACTIVATIONS = {"square": 0, "anova": 1}


# -- projections -------------------------------------------------------------------------------
@pytest.mark.parametrize("penalty", list(PENALTIES))
def test_projections_match_reference_and_are_optimal(penalty):
    rng = np.random.default_rng(5)
    for _ in range(25 if penalty == "l1/linf" else 60):
        k, m = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        V = rng.standard_normal((k, m)) * 10 ** rng.uniform(-1, 1)
        tau = naive.mofm_penalty(V, penalty) * rng.uniform(0.05, 1.2)
        projected = V.copy()
        _mofm_project(projected, k, PENALTIES[penalty], tau, np.empty(2 * k * m + k))
        assert naive.mofm_penalty(projected, penalty) <= tau * (1 + 1e-12)
        expected = naive.mofm_project(V, penalty, tau)
        np.testing.assert_allclose(projected, expected, atol=1e-8 * max(1.0, np.abs(V).max()))
        # optimality: <V - P, W - P> <= 0 for feasible W (random points of the ball)
        for _ in range(20):
            W = rng.standard_normal((k, m))
            W *= tau / max(naive.mofm_penalty(W, penalty), 1e-300) * rng.uniform(0, 1)
            assert np.vdot(V - projected, W - projected) <= 1e-9 * max(1.0, np.vdot(V, V))


def test_projection_rows_past_n_active_are_untouched():
    V = np.ones((4, 3))
    _mofm_project(V, 2, 2, 1.0, np.empty(2 * 4 * 3 + 4))
    np.testing.assert_array_equal(V[2:], 1.0)
    assert naive.mofm_penalty(V[:2], "l1/linf") == pytest.approx(1.0)


# -- basis selection ---------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_gammas_match_the_paper_formula(activation):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((30, 5))
    problem, G = problem_for(X, activation=activation, gram="dense")
    expected = naive.mofm_gammas(augmented(X), G, activation)
    np.testing.assert_allclose(problem.gammas(G), expected, atol=1e-10)
    h = rng.standard_normal(6)
    for c in range(3):
        w = np.eye(3)[c]
        np.testing.assert_allclose(problem.gamma_matvec(G, w, h), expected[c] @ h, atol=1e-10)
    np.testing.assert_allclose(
        problem.q_matvec(G, h), np.einsum("cij,i,j->c", expected, h, h), atol=1e-10
    )


@pytest.mark.parametrize("gram", ["dense", "matvec"])
@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_l1_selection_is_the_dominant_eigenvector(gram, activation):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 8))
    problem, G = problem_for(X, activation=activation, gram=gram, m=4)
    if gram == "matvec":
        problem.gammas = None  # Gamma_c must never be formed on this path
    h, value = select_basis(problem, G, np.inf, tol=1e-10)
    gammas = naive.mofm_gammas(augmented(X), G, activation)
    eigenvalues = [np.max(np.abs(np.linalg.eigvalsh(g))) for g in gammas]
    c = int(np.argmax(eigenvalues))
    assert value == pytest.approx(eigenvalues[c], rel=1e-8)
    assert np.linalg.norm(h) == pytest.approx(1.0)
    residual = gammas[c] @ h - (h @ gammas[c] @ h) * h
    assert np.linalg.norm(residual) <= 1e-6 * eigenvalues[c]


def criterion(gammas, h, p):
    return np.linalg.norm(np.einsum("cij,i,j->c", gammas, h, h), ord=p)


@pytest.mark.parametrize("penalty", ["l1/l2", "l1/linf"])
@pytest.mark.parametrize("gram", ["dense", "matvec"])
def test_group_selection_beats_random_search(penalty, gram):
    """The selected h is at least as good as the best of 20,000 random unit vectors."""
    rng = np.random.default_rng(8)
    p = SELECTION_NORM[penalty]
    for trial in range(4):
        X = rng.standard_normal((30, 5))
        problem, G = problem_for(X, gram=gram, m=4, seed=trial)
        h, value = select_basis(problem, G, p)
        gammas = naive.mofm_gammas(augmented(X), G, "square")
        assert value == pytest.approx(criterion(gammas, h, p), rel=1e-9)
        candidates = rng.standard_normal((20000, 6))
        candidates /= np.linalg.norm(candidates, axis=1, keepdims=True)
        q = np.einsum("cij,ni,nj->nc", gammas, candidates, candidates)
        assert value >= np.max(np.linalg.norm(q, ord=p, axis=1)) * (1 - 1e-9)
        # refining never loses against its l1 initialisation
        h0, _ = select_basis(problem, G, np.inf)
        assert value >= criterion(gammas, h0, p) * (1 - 1e-12)


def exact_l1linf(gammas):
    """max_{|h| <= 1} sum_c |h^T Gamma_c h| by enumerating the sign patterns s (Appendix C):
    the answer is max_s lambda_max(sum_c s_c Gamma_c)."""
    best = 0.0
    for signs in itertools.product([-1.0, 1.0], repeat=len(gammas)):
        best = max(best, np.linalg.eigvalsh(np.tensordot(signs, gammas, axes=1))[-1])
    return best


def test_l1linf_selection_against_exact_enumeration():
    rng = np.random.default_rng(9)
    ratios = []
    for trial in range(10):
        X = rng.standard_normal((30, 4))
        problem, G = problem_for(X, m=5, seed=trial)
        _, value = select_basis(problem, G, 1.0)
        exact = exact_l1linf(naive.mofm_gammas(augmented(X), G, "square"))
        assert value <= exact * (1 + 1e-9)
        ratios.append(value / exact)
    assert min(ratios) >= (1 - 1e-6) / 5  # the guarantee of Table 1 (nu = (1 - eps) / m)
    assert np.mean(ratios) >= 0.9  # and in practice nearly the global maximum (section 6.2)


# -- Algorithm 1 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("refit", ["output", "full"])
@pytest.mark.parametrize("penalty", list(PENALTIES))
def test_conditional_gradient_is_monotone_and_feasible(penalty, refit):
    X, y = blobs()
    tau = 20.0
    history = []

    def record(model, info):
        history.append(info)
        assert model.penalty_value() <= tau * (1 + 1e-12)
        assert np.all(np.linalg.norm(model.H_, axis=1) <= 1 + 1e-12)

    model = MultiOutputPN(
        n_features=4, classes=[1, 3, 5], penalty=penalty, corrective=refit, n_basis=8, tau=tau
    )
    model.fit(X, y, callback=record)
    objectives = [info.objective for info in history]
    assert len(objectives) == 8
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(objectives))
    assert objectives[-1] < 0.75 * np.log(3)  # well below the zero model's loss
    assert all(info.omega <= tau * (1 + 1e-12) for info in history)
    assert np.mean(model.predict_many(X) == y) > 0.85
    assert model.n_active_ == model.n_used_ <= 8


@pytest.mark.parametrize("loss", ["squared", "smoothed_hinge", "logistic"])
def test_other_losses_fit(loss):
    X, y = clusters(seed=1)
    model = MultiOutputPN(n_features=4, classes=[1, 3, 5], loss=loss, n_basis=6, tau=50.0)
    assert np.mean(model.fit(X, y).predict_many(X) == y) > 0.85  # linear softmax: 0.897


def test_factorization_machine_fits_xor():
    rng = np.random.default_rng(10)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, "same", "different")
    model = MultiOutputPN(
        n_features=2, classes=["same", "different"], activation="anova", n_basis=2, tau=100.0
    )
    assert np.mean(model.fit(X, y).predict_many(X) == y) > 0.95


def test_sparse_high_dimensional_fit_never_forms_gamma(monkeypatch):
    """d = 2000 sparse features: Algorithm 1 runs on products with Z only."""
    rng = np.random.default_rng(11)
    n, d = 400, 2000
    planted = rng.choice([-1.0, 1.0], size=(n, 2))  # a planted pairwise interaction
    noise = sp.random(n, d - 2, density=0.01, random_state=11, format="csr")
    X = sp.hstack([sp.csr_matrix(planted), noise], format="csr")
    y = np.where(planted[:, 0] * planted[:, 1] > 0, 1, 2)
    monkeypatch.setattr(Problem, "gammas", None)
    model = MultiOutputPN(n_features=d, classes=[1, 2], n_basis=3, tau=50.0)
    model.fit(X, y)
    assert np.mean(model.predict_many(X) == y) > 0.95


def test_refit_warm_starts_and_returns_a_new_model():
    X, y = blobs(seed=2)
    model = MultiOutputPN(n_features=4, classes=[1, 3, 5], n_basis=8, tau=20.0)
    model.fit(X[:60], y[:60])
    before = state_digest(model.get_state())
    history = []
    new = model.refit(X, y, n_new=2, callback=lambda m, info: history.append(info))
    assert state_digest(model.get_state()) == before
    assert new is not model and new.n_active_ <= min(8, model.n_active_ + 2)
    # iteration 0: the old basis refitted on the new data, no worse than the old model
    old_loss = batch_loss_grad(
        LOSSES["softmax"], np.eye(3)[np.searchsorted([1, 3, 5], y)], model.score_many(X)
    )[0] / len(y)
    assert history[0].iteration == 0 and history[0].objective <= old_loss
    objectives = [info.objective for info in history]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(objectives))
    assert np.mean(new.predict_many(X) == y) > 0.85


# -- online learning ---------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["adagrad", "sgd"])
@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
@pytest.mark.parametrize("penalty", list(PENALTIES))
def test_online_step_matches_reference(optimizer, activation, penalty):
    rng = np.random.default_rng(12)
    model = random_model(
        6,
        4,
        3,
        activation=activation,
        penalty=penalty,
        optimizer=optimizer,
        tau=3.0,
        learning_rate=0.3,
    )
    model._load(model.H_[:4] * 0.9, model.V_[:4], compact=False)
    for _ in range(15):
        x = rng.standard_normal(6)
        x[rng.random(6) < 0.3] = 0.0
        t = rng.standard_normal(3)
        H, V = model.H_.copy(), model.V_.copy()
        Hacc, Vacc = model.H_accumulator_.copy(), model.V_accumulator_.copy()
        z = np.append(x, 1.0)
        expected = naive.mofm_step(
            H,
            V,
            Hacc,
            Vacc,
            z,
            t,
            activation=activation,
            loss="squared",
            penalty=penalty,
            tau=3.0,
            optimizer=optimizer,
            rate=0.3,
            n_seen=model.n_seen_,
        )
        result = model.learn_one(x, t)
        np.testing.assert_allclose(result.scores, expected[4], rtol=1e-10, atol=1e-12)
        assert result.loss == pytest.approx(expected[5], rel=1e-10)
        np.testing.assert_allclose(model.H_, expected[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.V_, expected[1], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(model.H_accumulator_, expected[2], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.V_accumulator_, expected[3], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(
            model.H_sqnorm_, np.sum(model.H_**2, axis=1), rtol=1e-9, atol=1e-12
        )


def test_online_learning_keeps_the_constraints_and_learns():
    X, y = clusters(n=1000, seed=3)
    model = MultiOutputPN(n_features=4, classes=[1, 3, 5], n_basis=6, tau=5.0)
    steps = model.learn_many(X, y)
    assert np.all(np.linalg.norm(model.H_, axis=1) <= 1 + 1e-9)
    assert model.penalty_value() <= 5.0
    late = np.argmax(steps.scores[500:], axis=1)
    assert np.mean(np.array([1, 3, 5])[late] == y[500:]) > 0.8  # progressive accuracy
    assert model.n_seen_ == 1000 and model.n_active_ == 6


def test_learn_one_after_fit_updates_only_the_fitted_rows():
    X, y = blobs(seed=4)
    model = MultiOutputPN(n_features=4, classes=[1, 3, 5], n_basis=10, tau=20.0)
    model.fit(X, y)
    for x_i, y_i in zip(X[:20], y[:20], strict=True):
        model.learn_one(x_i, int(y_i))
    t = model.n_active_
    assert np.all(model.H_[t:] == 0) and np.all(model.V_[t:] == 0)


def test_overflow_is_refused_without_update():
    model = random_model(3, 2, 2, learning_rate=0.1)
    before = state_digest(model.get_state())
    with pytest.raises(ValueError, match="overflow"):
        model.learn_one([1e200, 1.0, 1.0], [0.0, 0.0])
    assert state_digest(model.get_state()) == before


# -- protocol ----------------------------------------------------------------------------------
@pytest.mark.parametrize("classes", [[1, 3, 5], ["ant", "bee", "cat"]])
@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_generic_suite(classes, activation):
    X, labels = blobs(n=40, d=3, classes=(0, 1, 2), seed=5)
    y = [classes[k] for k in labels]
    check_estimator(
        lambda: MultiOutputPN(
            n_features=3, classes=classes, activation=activation, n_basis=4, tau=10.0, seed=3
        ),
        X,
        y,
    )


def test_generic_properties_with_target_vectors():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((30, 3))
    Y = np.sign(rng.standard_normal((30, 2)))

    def factory():
        return MultiOutputPN(n_features=3, n_outputs=2, loss="logistic", n_basis=3)

    one = factory()
    for x_i, y_i in zip(X, Y, strict=True):
        one.learn_one(x_i, y_i)
    many = factory()
    many.learn_many(X[:13], Y[:13])
    many.learn_many(X[13:], Y[13:])
    assert state_digest(one.get_state()) == state_digest(many.get_state())
    assert state_digest(from_state(one.get_state()).get_state()) == state_digest(one.get_state())
    assert set(np.unique(one.predict_many(X))) <= {-1, 1}
    proba = one.predict_proba_many(X)
    assert proba.shape == (30, 2) and np.all((proba > 0) & (proba < 1))
    for bad in ([1.0, 0.5], [1.0], [[1.0, 1.0]], [True, 1.0], "ab"):
        with pytest.raises(ValueError):
            one.learn_one(X[0], bad)
    with pytest.raises(ValueError):
        one.learn_many(X[:2], Y[:2, :1])


def test_parameters_are_validated():
    for bad in (
        dict(classes=[1, 2], n_outputs=2),
        dict(),
        dict(classes=[1, 2], loss="hinge"),
        dict(n_outputs=2, loss="softmax"),
        dict(classes=[1, 2], penalty="l2"),
        dict(classes=[1, 2], n_basis=0),
        dict(classes=[1, 2], tau=-1.0),
        dict(classes=[1, 2], activation="relu"),
        dict(classes=[1, 1]),
        dict(classes=[1, 2], corrective="none"),
    ):
        with pytest.raises(ValueError):
            MultiOutputPN(n_features=3, **bad)
    model = MultiOutputPN(n_features=2, classes=[1, 2], loss="squared")
    with pytest.raises(ValueError, match="probabilities"):
        model.predict_proba_one([0.0, 0.0])
    state = model.get_state()
    state["scalars"]["n_active_"] = 99
    with pytest.raises(ValueError, match="n_active_"):
        model.set_state(state)


def test_zero_model_predicts_first_class_and_uniform_probabilities():
    model = MultiOutputPN(n_features=2, classes=["x", "y", "z"])
    assert model.predict_one([1.0, 2.0]) == "x"
    np.testing.assert_allclose(model.predict_proba_one([1.0, 2.0]), 1 / 3)


# -- reservoir -------------------------------------------------------------------------------------
def test_window_reservoir_keeps_the_most_recent_in_order_and_replays():
    reservoir = Reservoir(size=4, n_features=2)
    for k in range(10):
        reservoir.add([float(k), 1.0], k)
    X, y = reservoir.data()
    assert y == [6, 7, 8, 9] and X.toarray()[:, 0].tolist() == [6.0, 7.0, 8.0, 9.0]
    mark = reservoir.n_seen
    reservoir.add_many(np.array([[10.0, 1.0], [11.0, 1.0]]), [10, 11])
    assert reservoir.since(mark)[1] == [10, 11]
    with pytest.raises(ValueError):
        reservoir.since(mark - 3)
    with pytest.raises(ValueError):
        reservoir.add([1.0], 0)


def test_uniform_reservoir_is_seeded_and_unbiased():
    counts = np.zeros(100)
    for seed in range(200):
        reservoir = Reservoir(size=10, n_features=1, policy="uniform", seed=seed)
        for k in range(100):
            reservoir.add([float(k)], k)
        counts[reservoir.data()[1]] += 1
        assert len(reservoir) == 10
    again = Reservoir(size=10, n_features=1, policy="uniform", seed=199)
    for k in range(100):
        again.add([float(k)], k)
    assert again.data()[1] == reservoir.data()[1]
    # each example is kept with probability 1/10: 20 times in 200 draws on average
    assert counts.mean() == pytest.approx(20.0) and counts.min() >= 5 and counts.max() <= 40
    with pytest.raises(ValueError):
        again.since(0)


def test_refit_and_swap_protocol():
    X, y = blobs(n=200, seed=6)
    live = MultiOutputPN(n_features=4, classes=[1, 3, 5], n_basis=6, tau=20.0)
    reservoir = Reservoir(size=150, n_features=4)
    for x_i, y_i in zip(X[:150], y[:150], strict=True):
        live.learn_one(x_i, int(y_i))
        reservoir.add(x_i, int(y_i))
    data, mark = reservoir.data(), reservoir.n_seen
    new = live.refit(*data)
    for x_i, y_i in zip(X[150:], y[150:], strict=True):  # arrivals during the refit
        live.learn_one(x_i, int(y_i))
        reservoir.add(x_i, int(y_i))
    new.learn_many(*reservoir.since(mark))
    assert new.n_seen_ == 50
    assert np.mean(new.predict_many(X) == y) >= np.mean(live.predict_many(X) == y) - 0.05


def test_score_kernel_allocates_its_own_scratch():
    """Concurrent readers never share a buffer: the kernel takes only the output array."""
    model = random_model(3, 2, 2)
    o = np.empty(2)
    _mofm_score(model._Ht, model.V_, 2, 0, np.array([0, 2]), np.array([1.0, -1.0]), o)
    np.testing.assert_allclose(o, model.score_one(([0, 2], [1.0, -1.0])))


@pytest.mark.parametrize("policy", ["window", "uniform"])
def test_reservoir_state_round_trip(policy):
    reservoir = Reservoir(size=5, n_features=4, policy=policy, seed=3)
    rng = np.random.default_rng(0)
    for k in range(3):  # part full: empty slots survive the round trip
        reservoir.add(rng.standard_normal(4) * (rng.random(4) < 0.6), f"c{k}")
    twin = Reservoir(size=5, n_features=4, policy=policy, seed=99)
    twin.set_state(reservoir.get_state())
    for k in range(3, 12):  # same rows, targets, arrivals and random choices from here on
        x = rng.standard_normal(4)
        reservoir.add(x, k)
        twin.add(x, k)
        (X1, y1), (X2, y2) = reservoir.data(), twin.data()
        assert (X1 != X2).nnz == 0 and y1 == y2
    with pytest.raises(ValueError, match="size"):
        Reservoir(size=6, n_features=4).set_state(reservoir.get_state())


@pytest.mark.parametrize("loss", ["softmax", "logistic"])
def test_predictions_from_the_scores_of_a_validated_batch(loss):
    """``score_batch`` then ``predict_from_scores`` / ``proba_from_scores`` (what a server that
    validated once calls) give ``predict_many`` / ``predict_proba_many``, bit for bit."""
    X, y = blobs(n=40, seed=8)
    model = MultiOutputPN(n_features=4, classes=["a", "b", "c"], loss=loss, n_basis=3)
    model.learn_many(X, ["abc"[int(k) // 2] for k in y])
    scores = model.score_batch(as_batch(X, 4))
    assert np.array_equal(model.predict_from_scores(scores), model.predict_many(X))
    assert np.array_equal(model.proba_from_scores(scores), model.predict_proba_many(X))
