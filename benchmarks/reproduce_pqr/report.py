"""The PQR reproduction's outputs: the results tables of ``pqr.md`` (with the paper's Tables
3 and 4 beside), the speed section of ``benchmarks.md`` and the figure."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.environment import run_line
from benchmarks.markdown import replace_section
from benchmarks.peers import available

#: The paper's Table 3 (ML100K row) and Table 4 (Avazu), quoted beside our numbers.
PAPER_TABLE3_ML100K = {
    "LR": 1.0429,
    "FM": 1.0316,
    "CFM": 1.0326,
    "DiFacto": 1.0312,
    "PQR (k=500)": 1.0225,
    "PQR (k=1000)": 1.0215,
    "PQR (k=2000)": 1.0215,
}
PAPER_TABLE4_AVAZU = {
    "LR": (0.7562, 0.3939, 1.0, "16.37K"),
    "FM": (0.7752, 0.3840, 58.5, "1.17M"),
    "PQR (k=2000)": (0.7757, 0.3830, 3.3, "0.68M"),
    "PQR (k=4000)": (0.7777, 0.3818, 3.6, "1.32M"),
    "PQR (k=8000)": (0.7785, 0.3812, 3.8, "1.97M"),
}


def _size(n: int) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.2f}K"
    return str(n)


def results_markdown(result: dict) -> str:
    a9a = result.get("a9a")
    lines = []
    if a9a:
        lines += [
            f"One pass over a9a ({a9a['n_train']} examples, file order), tested on a9a.t "
            f"({a9a['n_test']} examples). Training time: the median over "
            f"{result['settings']['repeats']} interleaved rounds of the model's time per example "
            "over LR's in the same round (see the speed table in benchmarks.md; River and VW "
            "--lrq learn a prefix of the file).",
            "",
            "| a9a | AUC | LogLoss | Training time | Model size | hyperparameters |",
            "|---|---|---|---|---|---|",
        ]
        for row in a9a["rows"]:
            params = ", ".join(f"{k}={v:g}" for k, v in row["params"].items())
            lines.append(
                f"| {row['model']} | {row['auc']:.4f} | {row['log_loss']:.4f} | "
                f"{row['time_vs_lr']:.1f}x | {_size(row['model_size'])} | {params} |"
            )
        lines += [
            "",
            "The paper's Table 4 on Avazu (d = 1M) for comparison:",
            "",
            "| Avazu (paper) | AUC | LogLoss | Training time | Model size |",
            "|---|---|---|---|---|",
        ]
        for name, (auc_, loss, ratio, size) in PAPER_TABLE4_AVAZU.items():
            lines.append(f"| {name} | {auc_:.4f} | {loss:.4f} | {ratio:.1f}x | {size} |")
    movielens = result.get("movielens")
    if movielens:
        lines += [
            "",
            f"MovieLens ({movielens['n_ratings']} ratings, {movielens['n_features']} one-hot "
            "features), test RMSE after one pass on 80%:",
            "",
            "| model | test RMSE | validation RMSE | model size |",
            "|---|---|---|---|",
        ]
        for row in movielens["rows"]:
            lines.append(
                f"| {row['model']} | {row['test_rmse']:.4f} | {row['valid_rmse']:.4f} | "
                f"{_size(row['model_size'])} |"
            )
        paper = ", ".join(f"{k} {v:.4f}" for k, v in PAPER_TABLE3_ML100K.items())
        lines += ["", f"The paper's Table 3 (ML100K): {paper}."]
    return "\n".join(lines)


def speed_markdown(result: dict) -> str:
    speed = result["speed"]
    lines = [
        "## PQR: examples per second of learning",
        "",
        f"Written by `{result['command']}` ({result['settings']['mode']} run, "
        f"{run_line(result)}, a machine shared with other jobs). "
        "Ours: `learn_many` on a CSR matrix (input validation included); VW: its own parser and"
        " learner on a text file (a Workspace built with `-d`, minus the time to build an empty"
        " one; parsing included); River: `learn_one` on dicts. Models are timed in interleaved "
        "rounds; `examples/s` is the median over rounds, `time vs LR` the median over rounds of"
        " the model's time per example over LR's in the same round; `rows` is the length of the"
        " timed prefix; `h` is the mean number of a row's features in H. On a9a the "
        "hyperparameters are those tuned for the accuracy table; on the hashed stream they are "
        "fixed (PQR/LR: alpha 0.05, H the top-k of the stream).",
        "",
        "| stream | model | examples/s | time vs LR | rows | nnz / row | h |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in speed["rows"]:
        h = f"{row['h']:.1f}" if "h" in row else ""
        lines.append(
            f"| {row['stream']} | {row['model']} | {row['examples_per_second']:,.0f} | "
            f"{row['vs_lr']:.2f}x | {row['rows']:,} | {row['nnz']:.1f} | {h} |"
        )
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["a9a"]["rows"] if "k" in r and "warm-up" not in r["model"]]
    ks = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(ks, [r["auc"] for r in rows], "o-", label="PQR (k = 0: LR)")
    for r in result["a9a"]["rows"]:
        if "k" not in r:
            left.axhline(r["auc"], linestyle=":", color="grey")
            left.annotate(r["model"], (ks[-1], r["auc"]), fontsize=7, ha="right", va="bottom")
    left.set_xlabel("k (order of PQR)")
    left.set_ylabel("test AUC on a9a.t")
    left.legend(fontsize=8)
    right.plot(ks, [r["time_vs_lr"] for r in rows], "o-", label="PQR training time / LR")
    right.axhline(4.0, color="red", linestyle="--", label="target 4x")
    right.set_xlabel("k (order of PQR)")
    right.set_ylabel("training time relative to LR")
    right.legend(fontsize=8)
    fig.suptitle("PQR on a9a: one online pass (FTRL-Proximal, tuned on a validation split)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(result: dict, out: Path) -> None:
    """``reproduce_pqr.json``, the results section of ``pqr.md`` and, with a9a, the figure and
    the speed section of ``benchmarks.md``; text outside the sections is kept."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "reproduce_pqr.json").write_text(json.dumps(result, indent=1, default=float))
    replace_section(
        out / "pqr.md",
        "<!-- pqr-results:begin -->",
        "<!-- pqr-results:end -->",
        results_markdown(result),
        "# Projective quadratic regression (PQR)\n",
    )
    if "a9a" in result:
        if available("matplotlib"):
            plot(result, out / "reproduce_pqr.png")
        else:
            print("matplotlib is not installed: no figure", flush=True)
        replace_section(
            out / "benchmarks.md",
            "<!-- pqr:begin -->",
            "<!-- pqr:end -->",
            speed_markdown(result),
            "# Benchmarks\n",
        )
