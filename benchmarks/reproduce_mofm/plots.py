"""The figures of the Table 2 reproduction: test accuracy along the greedy paths (the paper's
Figure 3) and Figure 2's approximation factors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.reproduce_mofm.selection import row_runs
from benchmarks.reproduce_mofm.specs import CORRECTIVES, PENALTIES


def plot_paths(results, table, specs, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in specs if any(r["dataset"] == s.name for r in results)]
    figure, axes = plt.subplots(2, len(shown), figsize=(4.2 * len(shown), 7), squeeze=False)
    for column, spec in enumerate(shown):
        for row, corrective in enumerate(CORRECTIVES):
            axis = axes[row, column]
            for penalty in PENALTIES:
                entry = table.get((spec.name, corrective, penalty))
                if entry is None:
                    continue
                run = next(
                    r
                    for r in row_runs(results, spec.name, corrective, penalty)
                    if r["tau0"] == entry["tau0"]
                )
                t = [p["t"] for p in run["path"]]
                axis.plot(t, [100 * p["test"] for p in run["path"]], label=penalty)
            kernel = table.get((spec.name, "kernel"))
            if kernel:
                axis.axhline(
                    100 * kernel["test"], color="k", ls="--", lw=0.8, label="quadratic SVC"
                )
            axis.set_title(f"{spec.name}: {corrective} refitting", fontsize=9)
            axis.set_xlabel("basis vectors added (t)")
            axis.set_ylabel("test accuracy (%)")
            low = min(
                100 * p["test"]
                for r in results
                if r["kind"] == "cg" and r["dataset"] == spec.name
                for p in r["path"]
            )
            axis.set_ylim(max(low, 100 * (kernel["test"] if kernel else 0.5) - 25), 100)
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.suptitle("Test accuracy along the greedy path (validation-selected tau)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_figure2(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = [r for r in results if r["kind"] == "figure2"]
    if not entries:
        return
    methods = list(entries[0]["ratios"])
    figure, axis = plt.subplots(figsize=(8.5, 4.2))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        means = [np.mean(e["ratios"][method]) for e in entries]
        lows = [np.mean(e["ratios"][method]) - np.min(e["ratios"][method]) for e in entries]
        highs = [np.max(e["ratios"][method]) - np.mean(e["ratios"][method]) for e in entries]
        positions = np.arange(len(entries)) + (j - (len(methods) - 1) / 2) * width
        axis.bar(positions, means, width, yerr=[lows, highs], capsize=2, label=method)
    axis.set_xticks(np.arange(len(entries)))
    axis.set_xticklabels([f"{e['dataset']} (m = {e['m']})" for e in entries])
    axis.set_ylabel(r"$\hat\nu = f_1(\hat h) / f_1(h^*)$")
    axis.set_ylim(0, 1.05)
    axis.axhline(1.0, color="k", lw=0.6)
    axis.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    axis.set_title(
        "Figure 2: approximation factor of the l1/linf basis selection "
        "(mean, min-max over the first iterations)",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
