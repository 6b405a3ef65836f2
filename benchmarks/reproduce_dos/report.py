"""``results.md`` of the section-4 reproduction: setup, figures, final error rates and the
paper's claims checked against the numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def percent(value) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{100 * value:.2f}"


def roughness(record: dict, column: int) -> float:
    """Scatter of the test error about its trend, in points of %: the RMS residual of a
    straight-line fit against log(examples) over the second half of the evaluations (all of
    them when there are fewer than 6). A smooth curve scores ~0 however fast it falls."""
    rows = np.array([(row[0], row[column]) for row in record["test"]], dtype=float)
    if len(rows) >= 6:
        rows = rows[len(rows) // 2 :]
    rows = rows[np.isfinite(rows[:, 1])]
    if len(rows) < 3:
        return float("nan")
    x, values = np.log(rows[:, 0]), 100 * rows[:, 1]
    residuals = values - np.polyval(np.polyfit(x, values, 1), x)
    return float(np.sqrt(np.mean(residuals**2)))


def comparisons(result: dict) -> list[str]:
    """The paper's claims, checked against these numbers."""
    models = result["models"]
    linear = models["linear"]
    dos = {m["rank"]: m for m in models.values() if m["rank"] is not None}
    ranks = sorted(dos)
    top, low = dos[ranks[-1]], dos[ranks[0]]
    lines = []

    def verdict(ok: bool) -> str:
        return "**agrees**" if ok else "**differs**"

    ok = top["final_moving_error"] < linear["final_moving_error"]
    lines.append(
        f"- Paper: DoS models of higher rank learn much more accurate classifiers than the "
        f"linear model. Here: final moving error {percent(top['final_moving_error'])}% "
        f"(d={ranks[-1]}) vs {percent(linear['final_moving_error'])}% (linear); final averaged "
        f"test error {percent(top['final_test_error_averaged'])}% vs "
        f"{percent(linear['final_test_error_averaged'])}%: {verdict(ok)}."
    )
    errors = [dos[r]["final_moving_error"] for r in ranks]
    monotone = all(a >= b for a, b in zip(errors, errors[1:], strict=False))
    lines.append(
        f"- Paper: the error decreases with the rank. Here the final moving errors by rank "
        f"{ranks} are {', '.join(percent(e) + '%' for e in errors)}: "
        f"{verdict(monotone)}{'' if monotone else ' (not monotone)'}."
    )
    if ranks[0] == 1:
        ok = linear["final_cumulative_error"] <= low["final_cumulative_error"]
        lines.append(
            f"- Paper: the linear model slightly outperforms DoS d=1. Here: cumulative "
            f"{percent(linear['final_cumulative_error'])}% (linear) vs "
            f"{percent(low['final_cumulative_error'])}% (d=1), moving "
            f"{percent(linear['final_moving_error'])}% vs {percent(low['final_moving_error'])}%: "
            f"{verdict(ok)}."
        )
    better = [
        name
        for name, m in models.items()
        if m["final_test_error_averaged"] is not None
        and m["final_test_error_averaged"] < m["final_test_error_live"]
    ]
    lines.append(
        f"- Paper: averaged models generalise better than live ones. Here the final averaged "
        f"test error is lower for {len(better)} of {len(models)} models"
        f" ({', '.join(better) or 'none'}): {verdict(len(better) == len(models))}"
        f"{'' if len(better) == len(models) else ' in part'}."
    )
    stable = [
        name
        for name, m in models.items()
        if roughness(m, 2) < roughness(m, 1)  # nan compares False
    ]
    lines.append(
        "- Paper: the test errors of live models are extremely variable, those of averaged "
        "models stabilise quickly. Here the scatter of the test error about its trend (RMS "
        "residual of a fit against log examples over the second half of the run; live -> "
        "averaged, points of %): "
        + ", ".join(
            f"{name} {roughness(m, 1):.2f} -> {roughness(m, 2):.2f}" for name, m in models.items()
        )
        + f": {verdict(len(stable) == len(models))}"
        + ("" if len(stable) == len(models) else " in part")
        + "."
    )
    return lines


def write_markdown(result: dict, out: Path, fig4: Path, fig5: Path, note: str = "") -> Path:
    config, timing, models = result["config"], result["timing"], result["models"]
    deformation = config["deformation"]
    quick = config["mode"] == "quick"
    lines = ["# Results", "", "## Reproduction of Saul 2021, section 4 (Figs 4-5)", ""]
    if note:
        lines += [f"> {note}", ""]
    if quick:
        lines += [
            f"> **Quick mode** ({config['examples']:,} examples, ranks {list(config['ranks'])}): "
            "a smoke test of the pipeline, not the reproduction. The full run "
            "(`.venv/bin/python -m benchmarks.reproduce_dos --full`, or `make reproduce`) "
            "overwrites this file, the figures and `reproduce_dos.json`.",
            "",
        ]
    lines += [
        "Regenerate: `.venv/bin/python -m benchmarks.reproduce_dos "
        + ("--quick" if quick else f"--full --examples {config['examples']}")
        + "` (writes this file, `reproduce_dos_fig4.png`, `reproduce_dos_fig5.png` and "
        "`reproduce_dos.json`).",
        "",
        "### Setup",
        "",
        "- Task: ten-way digit classification by the majority vote of 45 one-vs-one binary "
        "classifiers (ties broken by the summed signed scores, as `core.one_vs_one.OneVsOne`); "
        "pair (i, j) learns only from digits i (+1) and j (-1).",
        "- Models: linear PA (eq 2, zero start) and DoS PA (eqs 17-20, hard margin) of rank "
        f"d in {list(config['ranks'])}, U and V drawn from N(0, 1 / (d * 785)) "
        f"(`DoSClassifier(seed={config['init_seed']})`, the same start for all 45 pairs as "
        "`OneVsOne` clones its base). Inputs: the 784 grey levels scaled to [0, 1] plus the "
        "bias.",
        f"- Stream: {config['examples']:,} examples of `core.datasets.DeformationStream` "
        f"(seed {config['stream_seed']}) over the first 8,000 MNIST test digits, drawn "
        "uniformly at random: elastic distortions (Simard et al. 2003) with Gaussian-smoothed "
        f"displacement fields, sigma = {deformation['sigma']} px, alpha = "
        f"{deformation['alpha']} px ({deformation['field_components']} x "
        f"{deformation['field_components']} field components), plus affine jitter up to "
        f"{deformation['max_rotation']} degrees of rotation, {deformation['max_scale']:.0%} "
        f"scaling, shear {deformation['max_shear']} and {deformation['max_shift']} px shifts; "
        "bilinear resampling. Every model sees the same examples in the same order.",
        "- Test set: the last 2,000 MNIST test digits, clean (never deformed, never learned).",
        f"- Metrics: cumulative error on training examples (progressive validation: predicted "
        f"before learned); moving error on non-overlapping windows of {config['window']:,} "
        f"examples; every {config['eval_every']:,} examples the test error of the live models "
        f"and of the aligned time-averaged models (a snapshot folded in every "
        f"{config['average_every']:,} examples by `core.align.running_average`: min-norm "
        "Lorentz boost + Procrustes rotations, eq 28, per pair; plain mean for linear weights).",
        "",
        "### Figures",
        "",
        f"![Fig 4: cumulative and moving error]({fig4.name})",
        "",
        f"![Fig 5: test error of live and averaged models]({fig5.name})",
        "",
        "### Final error rates (%)",
        "",
        "| model | cumulative | moving (last window) | test, live | test, averaged | "
        "training examples/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, m in models.items():
        lines.append(
            f"| {name} | {percent(m['final_cumulative_error'])} "
            f"| {percent(m['final_moving_error'])} | {percent(m['final_test_error_live'])} "
            f"| {percent(m['final_test_error_averaged'])} | {m['examples_per_second']:,.0f} |"
        )
    lines += [
        "",
        f"Timing: {timing['seconds_total']:.0f} s in all "
        f"({timing['microseconds_per_example_all_models']:.1f} us per example for the "
        f"{len(models)} models), generator {timing['images_per_second_generator']:,.0f} "
        f"images/s, test evaluations {timing['seconds_evaluating']:.0f} s; "
        f"{timing['threads']} thread(s) learning families in parallel, numba "
        f"{result['environment']['versions']['numba']}. Examples/s per model count the "
        "prediction (45 scores) and the 9 updates of each example.",
        "",
        "### Comparison with the paper",
        "",
        *comparisons(result),
        "",
        "Differences of setup that matter for the comparison:",
        "",
        f"- {config['examples']:,} examples instead of 100M; the paper's largest models were "
        "still improving after 100M, so ours are earlier on their curves, and the gaps between "
        "ranks are expected to be smaller.",
        "- The stream deforms 8,000 MNIST *test* digits (the 60,000 training images are not "
        "available here) with our own generator, not INFIMNIST's; fewer distinct sources make "
        "the stream easier to memorise, and our deformations have different statistics.",
        "- Our stream is probably harder than INFIMNIST: the paper notes that most digit "
        "pairs stay linearly separable up to ~500K INFIMNIST examples, while here the linear "
        "model's moving error levels off near 29 %. Measured once (seed 0, windows of 10,000, "
        "60,000 examples, linear / DoS d=4 moving error in the last window): the undeformed "
        "8,000 sources 3.4 % / 3.0 %, affine jitter only 11.6 % / 10.7 %, elastic only "
        "(sigma 6, alpha 30) 16.0 % / 14.5 %, the default stream 29.2 % / 25.8 %. Error levels "
        "are therefore not comparable with the paper's; the orderings and trends are.",
        "- The test set is 2,000 clean digits (the paper: the 10,000 MNIST test digits), so "
        "one test error point is +-0.2-0.7 % (binomial standard error) by itself.",
        "",
    ]
    path = out / "results.md"
    path.write_text("\n".join(lines))
    return path
