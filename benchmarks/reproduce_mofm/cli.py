"""The entry of the Table 2 / Figure 2 reproduction: ``python -m benchmarks.reproduce_mofm
[--quick] [--datasets ...] [--from-json ...]``."""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from benchmarks import reproduce_mofm
from benchmarks.environment import ROOT, environment
from benchmarks.reproduce_mofm.data import load
from benchmarks.reproduce_mofm.plots import plot_figure2, plot_paths
from benchmarks.reproduce_mofm.report import COMMAND, page, speed_markdown, write_section
from benchmarks.reproduce_mofm.schedule import execute
from benchmarks.reproduce_mofm.selection import select, split_study, targets
from benchmarks.reproduce_mofm.specs import (
    FULL_SPECS,
    QUICK_SPECS,
    STUDY_SEEDS_FULL,
    STUDY_SEEDS_QUICK,
)

#: the results of the repeated-split study's other splits, beside ``reproduce_mofm.json``
SPLITS_FILE = "reproduce_mofm_splits.json.gz"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=reproduce_mofm.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="two small data sets, tiny paths")
    parser.add_argument("--out", default=str(ROOT / "docs"), help="output directory")
    parser.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    parser.add_argument(
        "--from-json",
        help="rebuild the tables and figures from a saved reproduce_mofm.json (no fitting)",
    )
    parser.add_argument(
        "--split-seeds",
        type=int,
        help=f"splits of the repeated-split study, seed 0 included (default "
        f"{STUDY_SEEDS_FULL}, quick {STUDY_SEEDS_QUICK}; 1 skips it)",
    )
    parser.add_argument(
        "--datasets", nargs="+", metavar="NAME", help="only these data sets (e.g. satimage)"
    )
    parser.add_argument(
        "--refit-iter",
        nargs=2,
        type=int,
        metavar=("OUTPUT", "FULL"),
        help="corrective iterations per Algorithm 1 iteration (output / full refitting) for "
        "the data sets run, instead of each data set's own",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        args.quick = saved["config"]["mode"] == "quick"
        args.jobs = saved["config"]["jobs"]
        args.datasets = saved["config"].get("datasets")
        args.refit_iter = saved["config"].get("refit_iter")
        results, pilot_choice = saved["results"], saved["config"]["pilot_tau0"]
        wall = saved["config"]["wall_seconds"]
        splits = Path(args.from_json).with_name(SPLITS_FILE)
        if splits.exists():
            results = results + json.loads(gzip.decompress(splits.read_bytes()))
    specs = QUICK_SPECS if args.quick else FULL_SPECS
    if args.datasets:
        unknown = set(args.datasets) - {s.name for s in specs}
        if unknown:
            parser.error(f"unknown data sets {sorted(unknown)}: {[s.name for s in specs]}")
        specs = tuple(s for s in specs if s.name in args.datasets)
    if args.refit_iter:
        output, full = args.refit_iter
        specs = tuple(replace(s, refit_iter=output, refit_iter_full=full) for s in specs)
    if not args.from_json:
        wall = time.perf_counter()
        log = lambda line: print(line, flush=True)  # noqa: E731
        seeds = args.split_seeds or (STUDY_SEEDS_QUICK if args.quick else STUDY_SEEDS_FULL)
        results, pilot_choice = execute(specs, args.quick, args.jobs, log, seeds)
        wall = time.perf_counter() - wall
    study = split_study(results, specs)
    results_by_seed = results
    results = [r for r in results if r.get("split_seed", 0) == 0]  # the main run
    other_splits = [r for r in results_by_seed if r.get("split_seed", 0) != 0]
    table = select(results, specs)
    for spec in specs:
        data = load(spec, args.quick)
        for key, entry in table.items():
            if key[0] == spec.name:
                entry["n_train"] = len(data["train"][1])
                entry["m"] = len(data["classes"])
    checks, verdicts = targets(results, specs)
    cpu_total = sum(r.get("fit_cpu_seconds", 0.0) for r in results_by_seed)
    config = dict(
        mode="quick" if args.quick else "full",
        jobs=args.jobs,
        wall_seconds=wall,
        fit_cpu_seconds=cpu_total,
        pilot_tau0=pilot_choice,
        datasets=args.datasets,
        refit_iter=args.refit_iter,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        environment=environment(),
    )
    if args.from_json:  # what the saved run cost, ran on, and when
        kept = ("fit_cpu_seconds", "date", "environment", "machine")
        config = {k: v for k, v in config.items() if k not in kept}
        config |= {k: v for k, v in saved["config"].items() if k in kept}
    main_specs = [s for s in specs if not s.name.endswith("(pooled)")]
    plot_figure2(results, out / "mofm_fig2.png")
    plot_paths(results, table, main_specs, out / "mofm_paths.png")
    (out / "mofm_results.md").write_text(
        page(config, table, specs, checks, verdicts, study, results)
    )
    write_section(out / "benchmarks.md", speed_markdown(results, table, main_specs))
    serialisable = {" / ".join(k): v for k, v in table.items()}
    (out / "reproduce_mofm.json").write_text(
        json.dumps(
            dict(
                config=config,
                table=serialisable,
                verdicts=verdicts,
                split_study=study,
                results=results,
            ),
            indent=1,
            default=float,
        )
    )
    # the study's other splits (tens of thousands of path points) go to a compressed file
    # beside the JSON; --from-json reads it back
    compact = json.dumps(other_splits, separators=(",", ":"), default=float).encode()
    (out / SPLITS_FILE).write_bytes(gzip.compress(compact, mtime=0))
    met_on_mean = {name: entry["met_on_mean"] for name, entry in study.items()}
    print(
        f"done in {wall:.0f} s wall, {cpu_total:.0f} s fit CPU; targets met: {verdicts}; "
        f"on the mean of the repeated splits: {met_on_mean}"
    )
    return dict(config=config, table=table, verdicts=verdicts, split_study=study, results=results)
