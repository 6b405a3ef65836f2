"""Examples per second of learning on a9a (every model of the accuracy table, tuned) and on
the hashed stream (fixed hyperparameters), in interleaved rounds (:mod:`benchmarks.timing`).
Ours: ``learn_many`` on a CSR matrix; VW: its own parser over a text file; River:
``learn_one`` on dicts. VW ``--lrq`` and River, 10-1000x slower, learn a prefix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.learners import OnePass
from benchmarks.peers import available
from benchmarks.peers.river import RiverFM
from benchmarks.peers.vw import VowpalWabbit
from benchmarks.reproduce_pqr.learners import OurPQR, top_k_of
from benchmarks.reproduce_pqr.settings import Settings
from benchmarks.streams import Stream, hashed_stream, load_a9a
from benchmarks.timing import interleaved


def timing_rounds(learners: dict, repeats: int) -> tuple[dict, dict]:
    """Seconds per example of one training pass, in interleaved rounds.

    ``learners`` maps a name to ``(make, data, rounds)``; round r times every learner with
    ``rounds > r`` one after the other, so that each model's ratio to LR (which comes first)
    compares passes made under the same machine load. Returns per name the examples per
    second (median over rounds) and the median over rounds of its time / LR's time, and the
    last learner of each name.
    """
    per_example: dict[str, list[float]] = {name: [] for name in learners}
    last = {}

    def task(name: str) -> Callable[[], None]:
        make, data, rounds = learners[name]

        def run():
            if len(per_example[name]) < rounds:
                learner = make()
                per_example[name].append(learner.fit(data) / data.n_rows)
                learner.close()
                last[name] = learner

        return run

    interleaved(repeats, [task(name) for name in learners])
    lr = per_example["LR"]
    timings = {
        name: {
            "examples_per_second": 1.0 / float(np.median(times)),
            "vs_lr": float(np.median([t / lr[r] for r, t in enumerate(times)])),
            "rounds": len(times),
            "rows": learners[name][1].n_rows,
        }
        for name, times in per_example.items()
    }
    return timings, last


def run_speed(settings: Settings, workdir: Path, a9a_makers: dict) -> dict:
    """Examples per second of learning on a9a (every model of the accuracy table, tuned) and on
    the hashed stream (fixed hyperparameters), in interleaved rounds (``timing_rounds``). VW
    --lrq and River, 10-1000x slower, learn a prefix of the stream (River: one round). VW
    writes its text files into ``workdir``."""
    a9a = Stream("speed_a9a", *load_a9a("a9a", settings.train_rows))
    hashed = hashed_stream(settings.hashed_rows, seed=settings.seed)

    def plan(name: str, make: Callable[[], OnePass], data: Stream) -> tuple:
        if name.startswith("River"):
            return make, data.prefix(settings.river_speed_rows), 1
        if name.startswith("VW --lrq"):
            return make, data.prefix(settings.slow_rows), settings.repeats
        return make, data, settings.repeats

    streams = {"a9a": (a9a, {name: plan(name, m, a9a) for name, m in a9a_makers.items()})}
    fixed = {"alpha": 0.05, "beta": 1.0, "l1": 0.0, "l2": 0.0}
    makers: dict[str, Callable[[], OnePass]] = {}
    for k in (0, 20) if settings.quick else (0, 20, 100):
        model = OurPQR(k, fixed, top_k_of(k))
        makers[model.name] = lambda k=k: OurPQR(k, fixed, top_k_of(k))
    if available("vowpalwabbit"):
        makers["VW --ftrl"] = lambda: VowpalWabbit(
            "ftrl", {"ftrl_alpha": 0.1, "ftrl_beta": 1.0, "l1": 0.0}, workdir, bits=20
        )
        makers["VW --lrq (rank 8)"] = lambda: VowpalWabbit(
            "lrq", {"rank": 8, "learning_rate": 0.5, "l2": 0.0}, workdir, bits=20
        )
    if available("river"):
        makers["River FM"] = lambda: RiverFM({"n_factors": 8, "learning_rate": 0.01})
    streams["hashed 2^20"] = (hashed, {name: plan(name, m, hashed) for name, m in makers.items()})

    table = []
    for stream, (data, learners) in streams.items():
        timings, last = timing_rounds(learners, settings.repeats)
        for name, timing in timings.items():
            row = {"stream": stream, "model": name, **timing, "nnz": data.mean_nnz}
            if isinstance(last[name], OurPQR):
                members = last[name].model.members_
                in_h = np.isin(data.csr.indices, members[members >= 0])
                row["h"] = float(np.count_nonzero(in_h)) / data.n_rows
            table.append(row)
        print(f"  speed on {stream}: done", flush=True)
    return {"rows": table}
