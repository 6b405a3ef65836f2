"""What one run of the PQR reproduction does: the grids, the sizes and the repeats."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Settings:
    """What one run does; ``quick`` shrinks everything to seconds."""

    quick: bool
    ks: tuple[int, ...] = (10, 20, 40, 80, 123)
    warmup_k: int = 80
    warmup: int = 1000
    pqr_grid: dict = field(
        default_factory=lambda: {
            "alpha": [0.01, 0.02, 0.05, 0.1, 0.2],
            "beta": [0.1, 1.0],
            "l1": [0.0, 1.0],
            "l2": [0.0, 10.0],
        }
    )
    river_grid: dict = field(
        default_factory=lambda: {"n_factors": [8], "learning_rate": [0.005, 0.01, 0.02]}
    )
    vw_ftrl_grid: dict = field(
        default_factory=lambda: {
            "ftrl_alpha": [0.01, 0.05, 0.1, 0.5],
            "ftrl_beta": [0.1, 1.0],
            "l1": [0.0, 1e-6],
        }
    )
    vw_lrq_grid: dict = field(
        default_factory=lambda: {"rank": [4, 8], "learning_rate": [0.05, 0.1, 0.5], "l2": [0.0]}
    )
    movielens_ks: tuple[int, ...] = (20, 100, 400)
    movielens_grid: dict = field(
        default_factory=lambda: {
            "alpha": [0.01, 0.03, 0.1, 0.3],
            "beta": [1.0],
            "l1": [0.0, 1.0],
            "l2": [0.0, 10.0],
        }
    )
    train_rows: int | None = None
    test_rows: int | None = None
    hashed_rows: int = 200_000
    river_speed_rows: int = 1000
    slow_rows: int = 5000
    repeats: int = 5
    seed: int = 0

    @classmethod
    def make(cls, quick: bool) -> Settings:
        if not quick:
            return cls(quick=False)
        return cls(
            quick=True,
            ks=(4, 16),
            warmup_k=16,
            warmup=200,
            pqr_grid={"alpha": [0.05, 0.2], "beta": [1.0], "l1": [0.0], "l2": [0.0]},
            river_grid={"n_factors": [4], "learning_rate": [0.01]},
            vw_ftrl_grid={"ftrl_alpha": [0.1], "ftrl_beta": [1.0], "l1": [0.0]},
            vw_lrq_grid={"rank": [4], "learning_rate": [0.5], "l2": [0.0]},
            movielens_ks=(4, 16),
            movielens_grid={"alpha": [0.05, 0.2], "beta": [1.0], "l1": [0.0], "l2": [0.0]},
            train_rows=1500,
            test_rows=1000,
            hashed_rows=3000,
            river_speed_rows=100,
            slow_rows=300,
            repeats=1,
        )
