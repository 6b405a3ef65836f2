"""Figs 4 and 5 of the paper from a run's results: cumulative and moving error (Fig 4), test
error of live and averaged models (Fig 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot(result: dict, out: Path) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = result["models"]
    colours = dict(zip(models, plt.cm.viridis(np.linspace(0.0, 0.9, len(models))), strict=True))
    colours["linear"] = "black"
    window = result["config"]["window"]

    fig4, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, record in models.items():
        t, err = np.array(record["cumulative"]).T
        left.plot(t, 100 * err, color=colours[name], label=name)
        t, err = np.array(record["windows"]).T
        right.plot(t, 100 * err, color=colours[name], marker=".", label=name)
    left.set_title("cumulative error (training examples)")
    right.set_title(f"moving error (non-overlapping windows of {window:,})")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("training examples")
        axis.set_ylabel("error rate (%)")
        axis.grid(True, which="both", alpha=0.3)
    left.legend()
    fig4.tight_layout()
    fig4_path = out / "reproduce_dos_fig4.png"
    fig4.savefig(fig4_path, dpi=110)

    fig5, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for name, record in models.items():
        rows = np.array(record["test"], dtype=float)  # None -> nan
        left.plot(rows[:, 0], 100 * rows[:, 1], color=colours[name], label=name)
        right.plot(rows[:, 0], 100 * rows[:, 2], color=colours[name], label=name)
    left.set_title("test error, live models")
    right.set_title("test error, aligned time-averaged models")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("training examples")
        axis.grid(True, which="both", alpha=0.3)
    left.set_ylabel("test error rate (%), 2,000 clean digits")
    left.legend()
    fig5.tight_layout()
    fig5_path = out / "reproduce_dos_fig5.png"
    fig5.savefig(fig5_path, dpi=110)
    plt.close("all")
    return fig4_path, fig5_path
