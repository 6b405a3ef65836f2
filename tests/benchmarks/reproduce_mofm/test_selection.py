"""Model selection: validation first, then fewer basis vectors; the budget of the targets."""

from benchmarks.reproduce_mofm.selection import best_point, budget_points, strict_choice
from benchmarks.reproduce_mofm.specs import QUICK_SPECS


def test_selection_prefers_validation_then_fewer_basis_vectors():
    path = [
        dict(t=1, basis=1, validation=0.5, test=0.9),
        dict(t=2, basis=2, validation=0.8, test=0.1),
        dict(t=3, basis=2, validation=0.8, test=0.2),
        dict(t=4, basis=4, validation=0.8, test=0.3),
    ]
    assert best_point(path)["t"] == 2  # never the test accuracy


def test_budget_points_and_the_strict_choice():
    spec = QUICK_SPECS[0]

    def run(corrective, penalty, path, pilot=False):
        return dict(kind="cg", dataset=spec.name, corrective=corrective, penalty=penalty,
                    path=path, pilot=pilot)  # fmt: skip

    results = [
        run("full", "l1", [dict(t=1, basis=3, validation=0.9, test=0.5),
                           dict(t=2, basis=30, validation=0.99, test=0.9)]),
        run("output", "l1", [dict(t=1, basis=5, validation=0.9, test=0.6)]),
        run("output", "l1/l2", [dict(t=1, basis=1, validation=0.99, test=0.1)], pilot=True),
    ]  # fmt: skip
    points = budget_points(results, spec, budget=10)
    assert set(points) == {("full", "l1"), ("output", "l1")}  # pilots and big models excluded
    assert strict_choice(points)[0] == ("full", "l1")  # validation tie: fewer basis vectors
