import numpy as np
import pytest

from core.align import boost
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.parallel import (
    DataParallel,
    align_to,
    deal,
    merge,
    merge_to_reference,
    tree_children,
    tree_sum,
)
from tests import naive


def scores(template, state, X):
    model = template.clone()
    model.set_state(state)
    return model.score_many(X)


def test_merging_copies_of_one_model_under_its_symmetries_gives_it_back():
    """U, V and (Q U, Q V) boosted are one classifier: their aligned average is too."""
    rng = np.random.default_rng(0)
    model = DoSClassifier(n_features=6, rank=3, seed=1)
    model.learn_many(rng.standard_normal((30, 6)), np.sign(rng.standard_normal(30)))
    state = model.get_state()
    copies = []
    for phi in (0.0, 0.8, -1.3):
        Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
        copy = model.get_state()
        copy["arrays"]["U_"], copy["arrays"]["V_"] = boost(Q @ model.U_, Q @ model.V_, phi)
        copies.append(copy)
    X = rng.standard_normal((20, 6))
    np.testing.assert_allclose(scores(model, merge(copies), X), model.score_many(X), atol=1e-9)
    np.testing.assert_allclose(scores(model, merge([state]), X), model.score_many(X), atol=1e-12)
    with pytest.raises(ValueError):
        merge([])


def test_one_worker_is_a_single_learner_bit_for_bit():
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((50, 5)), rng.integers(0, 3, 50)
    base = OneVsOne(base=DoSClassifier(n_features=5, rank=2), classes=[0, 1, 2])
    single = base.clone()
    single.learn_many(X, y)
    parallel = DataParallel(base, n_workers=1, interval=7)
    parallel.learn_many(X[:23], y[:23])
    parallel.learn_many(X[23:], y[23:])
    for (name, a), (_, b) in zip(single.arrays(), parallel.workers_[0].arrays(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert parallel.n_merges_ == 7


def test_workers_learn_their_share_and_restart_from_the_merge():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((40, 5)), np.sign(rng.standard_normal(40))
    parallel = DataParallel(DoSClassifier(n_features=5, rank=2), n_workers=4, interval=10)
    parallel.learn_many(X, y)
    assert parallel.n_merges_ == 4 and parallel.n_seen_ == 40
    assert all(w.n_seen_ == parallel.model_.n_seen_ for w in parallel.workers_)
    for worker in parallel.workers_:
        np.testing.assert_array_equal(worker.U_, parallel.model_.U_)
    assert [r.tolist() for r in deal(0, 6, 4)] == [[0, 4], [1, 5], [2], [3]]
    # batches cut anywhere give the same result
    again = DataParallel(DoSClassifier(n_features=5, rank=2), n_workers=4, interval=10)
    for start in range(0, 40, 7):
        again.learn_many(X[start : start + 7], y[start : start + 7])
    np.testing.assert_array_equal(again.model_.U_, parallel.model_.U_)
    with pytest.raises(ValueError, match="n_workers"):
        DataParallel(DoSClassifier(n_features=5), n_workers=0, interval=1)


def workers_from(start, k, n=40, seed=5):
    """k copies of ``start`` that each learned n examples of their own: (start state,
    worker states, a test batch)."""
    rng = np.random.default_rng(seed)
    reference, states = start.get_state(), []
    for _ in range(k):
        worker = start.clone()
        worker.set_state(reference)
        X = rng.standard_normal((n, start.n_features))
        worker.learn_many(X, np.sign(X[:, 0] * X[:, 1] + 0.1))
        states.append(worker.get_state())
    return reference, states, rng.standard_normal((25, start.n_features))


def merged_as_naive(states: list[dict], reference: dict) -> dict:
    """``merge_to_reference``, checked against the plain-numpy alignment then mean."""
    merged = merge_to_reference(states, reference)
    expected = naive.aligned_mean_to_reference(
        (reference["arrays"]["U_"], reference["arrays"]["V_"]),
        [(s["arrays"]["U_"], s["arrays"]["V_"]) for s in states],
    )
    np.testing.assert_allclose(merged["arrays"]["U_"], expected[0], atol=1e-12)
    np.testing.assert_allclose(merged["arrays"]["V_"], expected[1], atol=1e-12)
    return merged


def test_parallel_merge_is_the_plain_numpy_alignment_to_the_reference_then_the_mean():
    start = DoSClassifier(n_features=6, rank=3, seed=4)
    X = np.random.default_rng(1).standard_normal((20, 6))
    start.learn_many(X, np.sign(X[:, 2]))  # (a reference that learned)
    reference, states, _ = workers_from(start, 3)
    merged = merged_as_naive(states, reference)
    assert merged["scalars"] == states[-1]["scalars"]  # (counters: the last worker's)
    # the serial fold aligns to running averages instead: close, not equal
    serial = merge(states)["arrays"]["U_"]
    assert not np.allclose(serial, merged["arrays"]["U_"], atol=1e-12)
    # arrays of no DoS pair are averaged as they are
    linear = LinearPA(n_features=3)
    linear_states = []
    for x, label in (([1.0, 0, 0], 1), ([0, 2.0, 0], -1)):
        copy = linear.clone()
        copy.learn_one(x, label)
        linear_states.append(copy.get_state())
    np.testing.assert_array_equal(
        merge_to_reference(linear_states, linear.get_state())["arrays"]["w_"],
        (linear_states[0]["arrays"]["w_"] + linear_states[1]["arrays"]["w_"]) / 2,
    )


@pytest.mark.parametrize("method", ["paper", "spectral"])
def test_parallel_merge_is_invariant_to_each_workers_symmetries(method):
    """A worker's state boosted and rotated (one rotation for U and V with the paper's
    alignment, independent ones with the spectral one) gives the same merged scores;
    averaging without the alignment would not."""
    start = DoSClassifier(n_features=6, rank=3, seed=2)
    reference, states, X = workers_from(start, 3, seed=6)
    rng = np.random.default_rng(7)
    moved = [dict(s, arrays=dict(s["arrays"])) for s in states]
    for state, phi in zip(moved, (0.9, -1.4, 0.3), strict=True):
        omega = np.linalg.qr(rng.standard_normal((3, 3)))[0]
        lam = omega if method == "paper" else np.linalg.qr(rng.standard_normal((3, 3)))[0]
        U, V = state["arrays"]["U_"], state["arrays"]["V_"]
        state["arrays"]["U_"], state["arrays"]["V_"] = boost(omega @ U, lam @ V, phi)
    expected = scores(start, merge_to_reference(states, reference, method), X)
    np.testing.assert_allclose(
        scores(start, merge_to_reference(moved, reference, method), X), expected, atol=1e-9
    )
    plain = {
        name: (moved[0]["arrays"][name] + moved[1]["arrays"][name] + moved[2]["arrays"][name]) / 3
        for name in ("U_", "V_")
    }
    assert not np.allclose(scores(start, dict(states[0], arrays=plain), X), expected, atol=1e-3)


def test_parallel_merge_of_one_worker_or_of_identical_workers_is_that_model():
    start = DoSClassifier(n_features=5, rank=2, seed=3)
    reference, states, X = workers_from(start, 1)
    alone = scores(start, states[0], X)
    np.testing.assert_allclose(scores(start, merge_to_reference(states, reference), X), alone)
    twins = merge_to_reference([states[0]] * 4, reference)
    np.testing.assert_allclose(scores(start, twins, X), alone, atol=1e-12)
    # DataParallel with k = 1 merges nothing: a single learner, bit for bit
    rng = np.random.default_rng(8)
    X, y = rng.standard_normal((28, 5)), np.sign(rng.standard_normal(28))  # (4 merges)
    single = start.clone()
    single.learn_many(X, y)
    parallel = DataParallel(start, n_workers=1, interval=7, merge="parallel")
    parallel.learn_many(X, y)
    np.testing.assert_array_equal(parallel.model_.U_, single.U_)
    np.testing.assert_array_equal(parallel.model_.V_, single.V_)


@pytest.mark.parametrize("reference_kind", ["zeros", "U equals V"])
def test_a_degenerate_reference_fixes_no_rotation(reference_kind):
    """A reference pair that is the zero classifier (a zero start, or U = V: its min-norm
    form is zero) leaves each worker's pair at its min-norm form, unrotated; the merge is
    finite and is the mean of those forms."""
    start = DoSClassifier(n_features=5, rank=3, init_scale=0.0)
    if reference_kind == "U equals V":
        state = start.get_state()
        U = np.random.default_rng(9).standard_normal(state["arrays"]["U_"].shape)
        state["arrays"]["U_"], state["arrays"]["V_"] = U, U.copy()
        start.set_state(state)
    reference, states, X = workers_from(start, 3)
    merged_as_naive(states, reference)
    for i, state in enumerate(states):  # each worker's part: its own min-norm form
        min_norm = naive.min_norm_boost(state["arrays"]["U_"], state["arrays"]["V_"])
        aligned = align_to(reference, state)
        np.testing.assert_allclose(aligned[: min_norm[0].size], min_norm[0].ravel(), atol=1e-12)
        assert np.all(np.isfinite(aligned)), i
    # a worker that is itself the zero classifier adds zeros
    zero = dict(states[0], arrays={n: np.zeros_like(a) for n, a in states[0]["arrays"].items()})
    np.testing.assert_array_equal(align_to(reference, zero), 0.0)


def test_data_parallel_with_the_parallel_merge_learns_and_restarts_from_it():
    rng = np.random.default_rng(10)
    X, y = rng.standard_normal((60, 5)), rng.integers(0, 3, 60)
    base = OneVsOne(base=DoSClassifier(n_features=5, rank=2), classes=[0, 1, 2])
    parallel = DataParallel(base, n_workers=3, interval=20, merge="parallel")
    reference = base.clone()
    reference_states = []
    for start in range(0, 60, 20):
        reference_states.append(parallel.model_.get_state())
        parallel.learn_many(X[start : start + 20], y[start : start + 20])
    assert parallel.n_merges_ == 3
    for worker in parallel.workers_:
        for (name, a), (_, b) in zip(worker.arrays(), parallel.model_.arrays(), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    # the last merge: the workers' states aligned to the state they started the round from
    again = [base.clone() for _ in range(3)]
    for copy, rows in zip(again, deal(40, 20, 3), strict=True):
        copy.set_state(reference_states[-1])
        copy.learn_many(X[40 + rows], y[40 + rows])
    reference.set_state(merge_to_reference([c.get_state() for c in again], reference_states[-1]))
    for (name, a), (_, b) in zip(reference.arrays(), parallel.model_.arrays(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    with pytest.raises(ValueError, match="merge"):
        DataParallel(base, n_workers=2, interval=5, merge="tree")


def test_tree_sum_adds_each_row_once_in_log_levels():
    for k in range(1, 10):
        rows = np.arange(k, dtype=float)[:, None] * np.ones((1, 3))
        np.testing.assert_array_equal(tree_sum(rows.copy()), np.full(3, k * (k - 1) / 2))
        added = sorted(c for w in range(k) for c in tree_children(w, k))
        assert added == list(range(1, k))  # every worker but the root hands its sum on once
        assert len(tree_children(0, k)) == int(np.ceil(np.log2(k)))


def test_parallel_merge_refuses_what_it_cannot_merge():
    start = DoSClassifier(n_features=5, rank=2)
    with pytest.raises(ValueError, match="at least one"):
        merge_to_reference([], start.get_state())
    with pytest.raises(ValueError, match="different models"):
        align_to(DoSClassifier(n_features=5, rank=3).get_state(), start.get_state())
    with pytest.raises(ValueError, match="method"):
        align_to(start.get_state(), start.get_state(), method="none")
    with pytest.raises(ValueError, match="out"):
        align_to(start.get_state(), start.get_state(), out=np.empty(3))


def test_parallel_merge_of_float32_models_keeps_their_dtype():
    """float32 pairs are aligned in float64 (the streamed kernels) and stored back as float32."""
    wide = DoSClassifier(n_features=5, rank=2, seed=11)
    narrow = DoSClassifier(n_features=5, rank=2, seed=11, dtype="float32")
    reference, states, X = workers_from(wide, 2)
    reference32, states32, _ = workers_from(narrow, 2)
    merged = merge_to_reference(states32, reference32)
    assert merged["arrays"]["U_"].dtype == np.float32
    np.testing.assert_allclose(
        scores(narrow, merged, X),
        scores(wide, merge_to_reference(states, reference), X),
        rtol=1e-4,
        atol=1e-4,
    )
