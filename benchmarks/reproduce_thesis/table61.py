"""Table 6.1 (section 6.7): the SDPLIB MAX-CUT feasibility problems solved through the Cholesky
oracle by the parametric perceptron rescaling algorithm (PRA) and the ellipsoid algorithm (EA),
and the checks of the table's shape."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from core.datasets import data_dir
from core.separation import (
    ellipsoid_method,
    maxcut_constraints,
    parametric_rescaling_perceptron,
    read_sdpa,
)

#: Table 6.1 of the thesis: name -> (m = n, PRA updates, PRA seconds, EA updates, EA seconds)
THESIS_TABLE_6_1 = {
    "mcp100": (100, 313, 0.4, 173, 0.5),
    "mcp124-1": (124, 209, 0.4, 167, 0.9),
    "mcp124-2": (124, 381, 0.5, 212, 1.1),
    "mcp124-3": (124, 748, 0.9, 255, 1.3),
    "mcp124-4": (124, 1305, 1.5, 294, 1.5),
    "mcp250-1": (250, 429, 4.2, 350, 11.6),
    "mcp250-2": (250, 696, 4.8, 420, 14.1),
    "mcp250-3": (250, 1340, 8.1, 513, 16.6),
    "mcp250-4": (250, 2504, 14.1, 598, 19.8),
    "mcp500-1": (500, 844, 38.7, 683, 147.1),
    "mcp500-2": (500, 1518, 39.7, 856, 177.6),
    "mcp500-3": (500, 2529, 64.2, 1005, 192.5),
    "mcp500-4": (500, 5166, 119.3, 1195, 223.1),
    "maxG11": (800, 721, 165.7, 700, 570.4),
}
#: the size groups within which the PRA / EA ratio should grow
GROUPS = {"124": ["mcp124-1", "mcp124-2", "mcp124-3", "mcp124-4"],
          "250": ["mcp250-1", "mcp250-2", "mcp250-3", "mcp250-4"],
          "500": ["mcp500-1", "mcp500-2", "mcp500-3", "mcp500-4"]}  # fmt: skip


def maxcut_laplacian(path: Path) -> np.ndarray:
    """The graph Laplacian L of an SDPLIB MAX-CUT file (its F0 is +L/4)."""
    _, F0, Fs = read_sdpa(path)
    for i, F in enumerate(Fs):  # F_i = e_i e_i^T
        if F.nnz != 1 or F[i, i] != 1.0:
            raise ValueError(f"{path.name}: F_{i + 1} is not e_i e_i^T; not a MAX-CUT relaxation")
    return 4.0 * F0


def run_problem(name: str) -> dict:
    L = maxcut_laplacian(data_dir() / "sdplib" / f"{name}.dat-s")
    n = L.shape[0]
    row = {
        "problem": name,
        "n": n,
        "edges": int(np.count_nonzero(np.triu(L, 1))),
    }
    for label, solve in (
        ("pra", lambda oracle: parametric_rescaling_perceptron(oracle, seed=0)),
        ("ea", lambda oracle: ellipsoid_method(oracle)),
    ):
        oracle = maxcut_constraints(L)
        started = time.perf_counter()
        result = solve(oracle)
        seconds = time.perf_counter() - started
        x = oracle.solution(result.x)
        row[label] = {
            "status": result.status,
            "updates": result.updates,
            "seconds": seconds,
            "oracle_calls": oracle.n_calls,
            "min_eigenvalue": float(np.linalg.eigvalsh(np.diag(x) - L / 4.0).min()),
            "objective": float(x.sum()),
        }
        if label == "pra":
            row[label] |= {
                "perceptron_updates": result.perceptron_updates,
                "modified_updates": result.modified_updates,
                "rescalings": result.rescalings,
            }
        print(f"  {name} {label}: {result.status}, {result.updates} updates, {seconds:.2f} s")
    return row


def table_checks(rows: list[dict]) -> dict:
    """The thesis's shape of Table 6.1: EA needs fewer updates on every instance; within each
    size group the PRA/EA ratio grows (with the graphs' density); every point is feasible."""
    by_name = {row["problem"]: row for row in rows}
    fewer = all(row["ea"]["updates"] < row["pra"]["updates"] for row in rows)
    growing = {}
    for group, names in GROUPS.items():
        if all(name in by_name for name in names):
            ratios = [by_name[n]["pra"]["updates"] / by_name[n]["ea"]["updates"] for n in names]
            growing[group] = bool(all(b > a for a, b in zip(ratios[:-1], ratios[1:], strict=True)))
    feasible = all(
        row[k]["status"] == "feasible" and row[k]["min_eigenvalue"] > 0
        for row in rows
        for k in ("pra", "ea")
    )
    return {"ea_fewer_updates_everywhere": fewer, "ratio_grows": growing, "all_feasible": feasible}
