"""The speed section of ``docs/benchmarks.md``: the tables of medians, ratios of ours to the
closest peers (medians of the same run), the targets on ``sparse150`` and the breakdown read
as sums."""

from __future__ import annotations

from pathlib import Path

from benchmarks.learners import Timed
from benchmarks.markdown import replace_section
from benchmarks.speed_pa.learners import RANKS
from benchmarks.speed_pa.measure import OPS, Measurement
from benchmarks.streams import Stream

BEGIN = "<!-- speed_pa:begin -->"
END = "<!-- speed_pa:end -->"
SECTION_TITLE = "Passive-aggressive learners: per-example cost"


def fmt_us(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def fmt_rate(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{1e6 / us:,.0f}"


def fmt_ratio(ratio: float) -> str:
    if ratio >= 1:
        return f"{ratio:,.1f}x faster" if ratio < 100 else f"{ratio:,.0f}x faster"
    return f"{1 / ratio:,.1f}x slower"


def lookup(results: list[Measurement]) -> dict[tuple[str, str, str], Measurement]:
    return {(m.stream, m.learner, m.op): m for m in results}


def ratio_lines(results: list[Measurement], streams: list[Stream]) -> list[dict]:
    """Ours vs the closest peer, each line a ratio of medians from the same run."""
    table = lookup(results)
    pairs = [
        ("LinearPA", "learn_one", "River PAClassifier", "learn_one"),
        ("LinearPA", "learn_one", "sklearn SGD hinge pa1", "learn_one"),
        ("LinearPA", "learn_one", "VW hinge", "learn_one"),
        ("LinearPA", "batch", "sklearn SGD hinge pa1", "batch"),
    ]
    for k in RANKS:
        pairs += [
            (f"DoS rank {k}", "learn_one", f"River FM rank {k}", "learn_one"),
            (f"DoS rank {k}", "batch", f"River FM rank {k}", "learn_one"),
            (f"DoS rank {k}", "learn_one", f"VW lrq rank {k}", "learn_one"),
            (f"DoS rank {k}", "predict_one", f"River FM rank {k}", "predict_one"),
        ]
    lines = []
    for stream in streams:
        for ours, our_op, peer, peer_op in pairs:
            mine = table.get((stream.name, ours, our_op))
            theirs = table.get((stream.name, peer, peer_op))
            if mine is None or theirs is None:
                continue
            ratio = None
            if mine.median_us is not None and theirs.median_us is not None:
                ratio = theirs.median_us / mine.median_us
            lines.append(
                {
                    "stream": stream.name,
                    "ours": f"{ours} {op_name(our_op, ours)}",
                    "peer": f"{peer} {op_name(peer_op, peer)}",
                    "ratio": ratio,
                    "peer_error": theirs.error,
                }
            )
    return lines


def op_name(op: str, learner: str) -> str:
    if op == "batch":
        return "learn_many" if not learner.startswith("sklearn") else "batch partial_fit"
    return op


def target_checks(results: list[Measurement], breakdown_rows: list[dict]) -> list[dict]:
    """The speed targets on ``sparse150`` (DoS rank 16: learn_many <= 3 us per example,
    learn_one <= 10 us per call, >= 10x River FM rank 16's examples per second), checked on
    CPU time and on wall time; the uniform-id variant of the breakdown is checked too."""
    table = lookup(results)
    parts = {r["part"]: r for r in breakdown_rows if r["model"] == "DoS rank 16"}

    def medians(learner: str, op: str) -> tuple[float | None, float | None]:
        m = table.get(("sparse150", learner, op))
        return (None, None) if m is None else (m.median_us, m.median_wall_us)

    many, one = medians("DoS rank 16", "batch"), medians("DoS rank 16", "learn_one")
    fm = medians("River FM rank 16", "learn_one")
    uniform_many = parts.get("learn_many, uniform feature ids (whole call)", {})
    uniform_one = parts.get("learn_one, uniform feature ids (whole call)", {})
    limits = [
        ("DoS rank 16, ~150 nnz: learn_many <= 3 us per example", many, 3.0),
        ("DoS rank 16, ~150 nnz: learn_one <= 10 us per call", one, 10.0),
        (
            "same rows with uniform feature ids: learn_many <= 3 us",
            (uniform_many.get("median_us"), uniform_many.get("median_wall_us")),
            3.0,
        ),
        (
            "same rows with uniform feature ids: learn_one <= 10 us",
            (uniform_one.get("median_us"), uniform_one.get("median_wall_us")),
            10.0,
        ),
    ]
    checks = []
    for target, (cpu, wall), limit in limits:
        if cpu is not None:
            checks.append(
                {
                    "target": target,
                    "cpu": f"{fmt_us(cpu)} us",
                    "wall": f"{fmt_us(wall)} us",
                    "met": cpu <= limit,
                    "met_wall": wall is not None and wall <= limit,
                }
            )
    for label, ours in (("learn_one", one), ("learn_many", many)):
        if ours[0] is not None and fm[0] is not None:
            cpu, wall = fm[0] / ours[0], fm[1] / ours[1]
            checks.append(
                {
                    "target": f"DoS rank 16 {label} >= 10x River FM rank 16 examples/s",
                    "cpu": f"{cpu:,.0f}x",
                    "wall": f"{wall:,.0f}x",
                    "met": cpu >= 10.0,
                    "met_wall": wall >= 10.0,
                }
            )
    return checks


def breakdown_summary(rows: list[dict]) -> list[str]:
    """The breakdown read as sums: where DoS rank 16's learn_one / learn_many time goes."""
    us = {r["part"]: r["median_us"] for r in rows if r["model"] == "DoS rank 16"}

    def get(part: str) -> float:
        value = us.get(part)
        if value is None:
            raise KeyError(part)
        return value

    try:
        whole, kernel = get("learn_one (whole call)"), get("dos_step kernel alone")
        with_scratch = get("dos_learn_one kernel (scratch allocated inside)")
        validation, label = get("as_row(x) (validation)"), get("check_binary_label(y)")
        floor = get("dos_step on an empty row of a 1-feature model (call floor)")
        folded = get("dos_step kernel alone, ids folded into 2^12 (cache-resident)")
        many, batch_kernel = get("learn_many (whole call)"), get("dos_learn_batch kernel alone")
        batch_validation = get("as_batch(csr) (validation)")
        folded_batch = get("dos_learn_batch kernel alone, ids folded into 2^12 (cache-resident)")
    except KeyError:
        return []
    rest = whole - with_scratch - validation - label
    return [
        f"- DoS rank 16 `learn_one` = {fmt_us(whole)} µs: the `dos_step` call "
        f"{fmt_us(kernel)} µs (of which about {fmt_us(floor)} µs is the call floor) and "
        f"{fmt_us(whole - kernel)} µs of Python around it: `as_row` validation "
        f"{fmt_us(validation)} µs, label check {fmt_us(label)} µs, scratch allocation "
        f"{fmt_us(max(with_scratch - kernel, 0.0))} µs, the `Step` result, counters and method "
        f"calls {fmt_us(max(rest, 0.0))} µs.",
        f"- The same kernel with the parameters in cache takes {fmt_us(folded)} µs: about "
        f"{fmt_us(kernel - folded)} µs per example are memory stalls on the rows of "
        "(n_features + 1) x 2 rank float64 parameters.",
        f"- DoS rank 16 `learn_many` = {fmt_us(many)} µs per example: kernel "
        f"{fmt_us(batch_kernel)} µs, CSR validation {fmt_us(batch_validation)} µs; with the "
        f"parameters in cache the batch kernel takes {fmt_us(folded_batch)} µs per example.",
    ]


def render(
    results: list[Measurement],
    streams: list[Stream],
    learners: list[Timed],
    breakdown_rows: list[dict],
    meta: dict,
) -> str:
    table = lookup(results)
    out = [f"## {SECTION_TITLE}", ""]
    out.append(
        f"Generated by `{meta['command']}` on {meta['date']}: {meta['cpu']}, "
        f"{meta['cpus']} CPUs (shared with other work, so expect noise). Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + "."
    )
    out.append("")
    out.append(
        f"Microseconds of CPU time per example, median of {meta['repeats']} runs (a fresh model "
        "each run, GC off while timing; CPU time of the timing thread because the machine is "
        "shared, wall-clock medians are in `speed_pa.json`); examples/s = 1e6 / median. "
        "One-at-a-time calls include the "
        "Python call and input validation; ours get float64 arrays (dense) or sorted "
        "(int64, float64) tuples (sparse), River dicts of the non-zeros, scikit-learn 1-row "
        "arrays / CSR matrices, VW text lines of the non-zeros, all built before timing. The "
        "batch column is our `learn_many` on the whole CSR matrix (the loop runs in the "
        "kernel) and scikit-learn's `partial_fit` on the same matrix. Numba compilation is "
        "excluded. All linear learners are PA-I with C = 1; River FM and VW `--lrq` are "
        "SGD-trained factorisation machines of the same rank as DoS. Peers slower than "
        f"{meta['budget_seconds']:g} s per run are timed on the first rows of the stream "
        '(column "rows"). n/a: the peer failed or is missing (reason below); '
        "—: no such API."
    )
    out.append("")
    out.append("| stream | rows | features | mean non-zeros | description |")
    out.append("| --- | ---: | ---: | ---: | --- |")
    for s in streams:
        out.append(
            f"| {s.name} | {s.n_rows:,} | {s.n_features:,} | {s.mean_nnz:.1f} | {s.description} |"
        )
    notes: dict[str, str] = {}
    for s in streams:
        out += ["", f"### {s.name}", ""]
        out.append(
            "| learner | learn_one µs | learn_one ex/s | predict_one µs | batch µs | batch ex/s "
            "| rows |"
        )
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for learner in learners:
            learn, predict, batch = (table[s.name, learner.name, op] for op in OPS)
            for m in (learn, predict, batch):
                if m.error and m.error != "not applicable":
                    notes[learner.name] = m.error
            batch_us = "—" if learner.batch_label is None else fmt_us(batch.median_us)
            batch_rate = "—" if learner.batch_label is None else fmt_rate(batch.median_us)
            rows = f"{learn.rows:,}" if learn.rows else "n/a"
            out.append(
                f"| {learner.name} | {fmt_us(learn.median_us)} | {fmt_rate(learn.median_us)} | "
                f"{fmt_us(predict.median_us)} | {batch_us} | {batch_rate} | {rows} |"
            )
    if notes:
        out += ["", "Peers marked n/a:", ""]
        out += [f"- {name}: {why}" for name, why in notes.items()]
    ratios = ratio_lines(results, streams)
    if ratios:
        out += ["", "### Ratios (peer median / our median, same run)", ""]
        out.append("| stream | ours | vs | ratio |")
        out.append("| --- | --- | --- | ---: |")
        for r in ratios:
            value = "n/a" if r["ratio"] is None else fmt_ratio(r["ratio"])
            out.append(f"| {r['stream']} | {r['ours']} | {r['peer']} | {value} |")
    checks = target_checks(results, breakdown_rows)
    if checks:
        out += ["", "### Targets of the issue (stream sparse150)", ""]
        out.append("| target | CPU time | met | wall time | met |")
        out.append("| --- | ---: | :---: | ---: | :---: |")
        for c in checks:
            out.append(
                f"| {c['target']} | {c['cpu']} | {'yes' if c['met'] else 'no'} | {c['wall']} | "
                f"{'yes' if c['met_wall'] else 'no'} |"
            )
    if breakdown_rows:
        out += [
            "",
            f"### Where the time goes ({meta['breakdown_stream']}, µs per example, median)",
            "",
            "Each piece timed alone over the whole stream, repeats interleaved across pieces. "
            "Kernels (the public entries of `core.kernels`) are called directly from Python with "
            "their arguments and scratch built "
            "before timing, so a per-row kernel line is numba's dispatch plus the compiled "
            'work; the batch kernel line is the compiled work alone. "Call floor": the '
            "step kernel on an empty row of a 1-feature model (dispatch and unboxing of its "
            'arguments, plus a bias-only update). "Folded into 2^12": the same rows with '
            'feature ids taken modulo 4096, so the parameters stay in cache; "uniform feature '
            'ids": rows of the same size with ids drawn uniformly from all features.',
            "",
            "| model | part | CPU µs | wall µs |",
            "| --- | --- | ---: | ---: |",
        ]
        out += [
            f"| {r['model']} | {r['part']} | {fmt_us(r['median_us'])} | "
            f"{fmt_us(r['median_wall_us'])} |"
            if r["error"] is None
            else f"| {r['model']} | {r['part']} | n/a ({r['error']}) | n/a |"
            for r in breakdown_rows
        ]
        summary = breakdown_summary(breakdown_rows)
        if summary:
            out += [
                "",
                "Read as sums (CPU time; the pieces are timed apart, so they add up only roughly):",
                "",
            ] + summary
    return "\n".join(out) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's section of ``path`` (created if missing), leave the rest."""
    replace_section(path, BEGIN, END, section)
