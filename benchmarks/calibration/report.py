"""The calibration study's outputs: the tables of ``calibration.md``, the reliability curves of
``calibration.png`` and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.markdown import replace_section

HEADER = "# Calibrated probabilities\n\nWritten by `python -m benchmarks.calibration`.\n"


def table(study: dict) -> str:
    lines = [
        "| model | accuracy | log loss | Brier | ECE |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in study["models"].items():
        lines.append(
            f"| {name} | {100 * r['accuracy']:.2f}% | {r['log_loss']:.4f} | {r['brier']:.4f} "
            f"| {r['ece']:.4f} |"
        )
    return "\n".join(lines)


def render(results: dict, command: str) -> str:
    a9a, mnist = results["a9a"], results["mnist"]
    return "\n\n".join(
        [
            f"Command: `{command}` (seeded: the same figures on every run; training seconds, "
            "in the JSON, are not).",
            f"**a9a**: {a9a['n_train']:,} training examples in one pass, {a9a['n_test']:,} "
            "test examples; probability of the positive class (>50K).",
            table(a9a),
            f"**MNIST**: {mnist['n_train']:,} examples ({mnist['epochs']} shuffled passes over "
            f"the 8,000 source digits, seed {mnist['seed']}), {mnist['n_test']:,} held-out "
            "test digits; the ECE and curve are of the top class's probability.",
            table(mnist),
            "ECE: expected calibration error over 10 equal-width bins. The reliability "
            "curves are in `calibration.png` (predicted probability against observed "
            "frequency; the diagonal is perfect calibration).",
        ]
    )


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 5))
    for axis, (title, study) in zip(
        axes,
        (("a9a: P(>50K)", results["a9a"]), ("MNIST: top class", results["mnist"])),
        strict=True,
    ):
        axis.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        for name, r in study["models"].items():
            curve = r["reliability"]
            axis.plot(
                curve["mean_probability"], curve["frequency"], marker="o", markersize=3, label=name
            )
        axis.set_title(title)
        axis.set_xlabel("predicted probability")
        axis.set_ylabel("observed frequency")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_outputs(results: dict, command: str, out: Path) -> None:
    """``calibration.json``, ``calibration.png`` and the section of ``calibration.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, out / "calibration.png")
    replace_section(
        out / "calibration.md",
        "<!-- calibration:begin -->",
        "<!-- calibration:end -->",
        render(results, command),
        header=HEADER,
    )
