"""The entry of the section-4 reproduction: ``python -m benchmarks.reproduce_dos [--quick |
--full] [--examples N]``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import reproduce_dos
from benchmarks.environment import ROOT
from benchmarks.reproduce_dos.experiment import QUICK, Config, run
from benchmarks.reproduce_dos.figures import plot
from benchmarks.reproduce_dos.report import percent, write_markdown


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reproduce_dos",
        description=reproduce_dos.__doc__.split("\n\n")[0],
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="the 5M-example run (the default)")
    mode.add_argument("--quick", action="store_true", help="a few thousand examples, ranks 1, 4")
    parser.add_argument("--examples", type=int, help="number of training examples")
    parser.add_argument("--ranks", type=int, nargs="+", help="DoS ranks")
    parser.add_argument("--window", type=int, help="moving-error window (examples)")
    parser.add_argument("--eval-every", type=int, help="test-set evaluation interval")
    parser.add_argument("--average-every", type=int, help="averaging snapshot interval")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stream and the init")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="output directory")
    parser.add_argument("--note", default="", help="a paragraph for the top of results.md")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="families learned in parallel (the kernels release the GIL)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=250_000,
        help="write partial outputs every this many examples (0: never)",
    )
    args = parser.parse_args(argv)

    config = Config(**QUICK, mode="quick") if args.quick else Config()
    for name in ("examples", "window", "eval_every", "average_every"):
        if getattr(args, name) is not None:
            setattr(config, name, getattr(args, name))
    if args.ranks:
        config.ranks = tuple(args.ranks)
    config.stream_seed = config.init_seed = args.seed
    for name in ("examples", "window", "eval_every", "average_every"):
        if getattr(config, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if config.examples < config.eval_every:
        parser.error("--examples must be at least --eval-every")

    print(f"reproduce_dos: {config}, threads={args.threads}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)

    def write(result: dict) -> None:
        done = result["examples_done"]
        note = args.note
        if done < config.examples:
            note = (
                f"Partial run: {done:,} of {config.examples:,} examples (these files were "
                "written while the run was going; the figures and tables cover the "
                "examples seen so far). " + note
            ).strip()
        (args.out / "reproduce_dos.json").write_text(json.dumps(result, indent=1))
        fig4, fig5 = plot(result, args.out)
        write_markdown(result, args.out, fig4, fig5, note)

    result = run(
        config, threads=args.threads, checkpoint=write, checkpoint_every=args.checkpoint_every
    )
    write(result)
    timing = result["timing"]
    print(
        f"done: {config.examples:,} examples in {timing['seconds_total']:.1f} s, "
        f"{timing['microseconds_per_example_all_models']:.1f} us per example (all models); "
        f"generator {timing['images_per_second_generator']:,.0f} images/s",
        flush=True,
    )
    for name, m in result["models"].items():
        print(
            f"  {name:>9}: {m['examples_per_second']:9,.0f} examples/s  "
            f"cumulative {percent(m['final_cumulative_error'])}%  "
            f"moving {percent(m['final_moving_error'])}%  "
            f"test live {percent(m['final_test_error_live'])}%  "
            f"averaged {percent(m['final_test_error_averaged'])}%",
            flush=True,
        )
    print(f"wrote {args.out}/results.md, figures and reproduce_dos.json", flush=True)
    return result
