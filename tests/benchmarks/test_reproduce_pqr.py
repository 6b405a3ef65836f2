"""The PQR reproduction: metrics, the MovieLens loader and protocol on a synthetic folder, and
the quick mode end to end."""

import json
import math

import numpy as np
import pytest

from benchmarks.reproduce_pqr import (
    Settings,
    auc,
    available,
    hashed_stream,
    load_movielens,
    log_loss,
    main,
    run_movielens,
)

OCCUPATIONS = ["artist", "doctor", "engineer", "student", "writer"]
GENRES = 19


def write_movielens(folder, n_users=40, n_items=25, n_ratings=800, seed=0):
    """A MovieLens-100K-like folder: u.user, u.item (19 genre flags, latin-1), u.data."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    users = []
    for user in range(1, n_users + 1):
        age = int(rng.choice([12, 17, 18, 24, 25, 40, 49, 50, 56, 70]))
        gender = "MF"[user % 2]
        occupation = OCCUPATIONS[user % len(OCCUPATIONS)]
        zipcode = f"{int(rng.integers(10000, 10008)):05d}"
        users.append((user, age, gender, occupation, zipcode))
    (folder / "u.user").write_text(
        "".join(f"{u}|{a}|{g}|{o}|{z}\n" for u, a, g, o, z in users), encoding="latin-1"
    )
    items, item_lines = [], []
    for item in range(1, n_items + 1):
        flags = (rng.random(GENRES) < 0.15).astype(int)
        flags[item % GENRES] = 1
        items.append(flags)
        title = f"Caf\xe9 {item} (1995)"  # u.item is latin-1
        item_lines.append(f"{item}|{title}|01-Jan-1995||http://x|" + "|".join(map(str, flags)))
    (folder / "u.item").write_text("\n".join(item_lines) + "\n", encoding="latin-1")
    lines = []
    for _ in range(n_ratings):
        user, item = int(rng.integers(1, n_users + 1)), int(rng.integers(1, n_items + 1))
        # women like genre 1, men genre 2: an interaction of a user and an item feature
        taste = items[item - 1][1] if user % 2 else items[item - 1][2]
        rating = int(np.clip(round(3 + 1.5 * taste - 0.5 + rng.normal(0, 0.5)), 1, 5))
        lines.append(f"{user}\t{item}\t{rating}\t{881250949 + len(lines)}\n")
    (folder / "u.data").write_text("".join(lines))
    return users, items


def test_auc_and_log_loss():
    labels = np.array([1, -1, 1, -1, 1, -1])
    assert auc(np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3]), labels) == 1.0
    assert auc(np.zeros(6), labels) == 0.5  # ties count one half
    assert auc(np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7]), labels) == 0.0
    rng = np.random.default_rng(0)
    scores, labels = rng.integers(0, 5, 300).astype(float), rng.choice([-1, 1], 300)
    ranks = scores[labels > 0][:, None] - scores[labels < 0][None, :]
    assert auc(scores, labels) == pytest.approx(np.mean((ranks > 0) + 0.5 * (ranks == 0)))
    assert log_loss(np.full(4, 0.5), np.array([1, -1, 1, -1])) == pytest.approx(math.log(2))
    assert np.isfinite(log_loss(np.array([0.0, 1.0]), np.array([1, -1])))


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


def test_hashed_stream():
    X, y = hashed_stream(500, seed=1)
    assert X.shape == (500, 2**20) and np.all(X.data == 1.0)
    assert 39 <= X.nnz / 500 <= 40 and set(np.unique(y)) == {-1.0, 1.0}
    assert X.has_sorted_indices


def test_quick_mode_end_to_end(tmp_path):
    write_movielens(tmp_path / "ml", n_ratings=1500)
    out = tmp_path / "out"
    result = main(["--quick", "--movielens", str(tmp_path / "ml"), "--out", str(out)])
    saved = json.loads((out / "reproduce_pqr.json").read_text())
    assert saved["settings"]["mode"] == "quick"
    models = [row["model"] for row in result["a9a"]["rows"]]
    assert models[:4] == ["LR", "PQR (k=4)", "PQR (k=16)", "PQR (k=16, warm-up 200)"]
    peers = {"River FM"} if available("river") else set()
    if available("vowpalwabbit"):
        peers |= {"VW --ftrl", "VW --ftrl -q aa", "VW --lrq (rank 4)"}
    assert peers <= set(models)  # the bench extra's peers, when installed
    for row in result["a9a"]["rows"]:
        assert 0.6 < row["auc"] <= 1.0 and 0.0 < row["log_loss"] < 1.0
        assert row["time_vs_lr"] > 0 and row["model_size"] > 0
    assert result["a9a"]["rows"][0]["time_vs_lr"] == 1.0
    speed = {(row["stream"], row["model"]) for row in result["speed"]["rows"]}
    assert {("a9a", "LR"), ("a9a", "PQR (k=16)"), ("hashed 2^20", "PQR (k=20)")} <= speed
    assert len(result["movielens"]["rows"]) == 3
    document = (out / "pqr.md").read_text()
    assert "<!-- pqr-results:begin -->" in document and "| PQR (k=16) |" in document
    assert "Table 3 (ML100K)" in document
    benchmarks = (out / "benchmarks.md").read_text()
    assert "<!-- pqr:begin -->" in benchmarks and "| hashed 2^20 | LR |" in benchmarks
    if available("matplotlib"):
        assert (out / "reproduce_pqr.png").stat().st_size > 10_000
