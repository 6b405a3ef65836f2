"""The MovieLens loader and the Table 3 protocol on a synthetic folder."""

import numpy as np

from benchmarks.reproduce_pqr.movielens import load_movielens, run_movielens
from benchmarks.reproduce_pqr.settings import Settings
from tests.benchmarks.reproduce_pqr.movielens_folder import GENRES, OCCUPATIONS, write_movielens


def test_movielens_loader(tmp_path):
    users, items = write_movielens(tmp_path / "ml")
    X, y, names = load_movielens(tmp_path / "ml")
    ratings = np.loadtxt(tmp_path / "ml" / "u.data", dtype=int)
    assert X.shape == (800, len(names)) and np.array_equal(y, ratings[:, 2])
    genders, ages = 2, 7
    zips = len({u[4] for u in users})
    assert len(names) == genders + ages + len(OCCUPATIONS) + zips + GENRES
    for i in (0, 17, 799):
        user, item = ratings[i, 0], ratings[i, 1]
        row = [names[j] for j in X[i].indices]
        age, gender, occupation, zipcode = users[user - 1][1:]
        bucket = {12: "age<18", 17: "age<18", 18: "age18-24", 24: "age18-24", 25: "age25-34"}
        bucket |= {40: "age35-44", 49: "age45-49", 50: "age50-55", 56: "age>=56", 70: "age>=56"}
        expected = [f"gender={gender}", bucket[age], f"occupation={occupation}", f"zip={zipcode}"]
        expected += [f"genre{g}" for g in np.flatnonzero(items[item - 1])]
        assert sorted(row) == sorted(expected)
        assert np.all(X[i].data == 1.0)


def test_movielens_protocol(tmp_path):
    write_movielens(tmp_path / "ml", n_ratings=3000)
    result = run_movielens(tmp_path / "ml", Settings.make(quick=True))
    rows = {row["model"]: row for row in result["rows"]}
    assert list(rows) == ["LR", "PQR (k=4)", "PQR (k=16)"]
    for row in rows.values():
        assert 0.0 < row["test_rmse"] < 1.5 and row["model_size"] > 0
    # the ratings hinge on gender x genre, which only the quadratic models can represent
    assert rows["PQR (k=16)"]["test_rmse"] < rows["LR"]["test_rmse"]
