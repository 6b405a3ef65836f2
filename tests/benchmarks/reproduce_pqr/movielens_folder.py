"""A synthetic MovieLens-100K folder for the PQR reproduction's tests."""

import numpy as np

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
