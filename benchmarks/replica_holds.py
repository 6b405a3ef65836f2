"""How long an api replica holds its model's writer lock to serve a published version (what
a prediction may wait for), in process: a learner's and a replica's ``LiveModel`` of the
134 MB model of docs/scaling.md (DoS rank 16 over 2^18 hashed features, time-averaged), the
replica loading deltas of ``--examples`` examples of 30 non-zeros each (a quarter second
at 1,000 feedback/s), then whole versions. Prints the median and the longest hold of each.

    python -m benchmarks.replica_holds
    python -m benchmarks.replica_holds --deltas 12 --versions 3 --examples 250
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from core.features import batch_from_rows
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import CreateModel, spec_from_json, spec_to_json
from service.scale import deltas

SPEC = {"name": "m", "kind": "dos", "params": {"rank": 16}, "input": {"hashed": 1 << 18}}


def timed(lock, holds: list[float]) -> None:
    """Record every hold of ``lock``'s writer side in ``holds`` (seconds)."""
    acquire, release = lock.acquire_write, lock.release_write

    def acquire_write(blocking: bool = True) -> bool:
        held = acquire(blocking)
        holds.append(time.perf_counter())
        return held

    def release_write() -> None:
        release()
        holds[-1] = time.perf_counter() - holds[-1]

    lock.acquire_write, lock.release_write = acquire_write, release_write


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=12)
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--examples", type=int, default=250, help="examples per version")
    args = parser.parse_args(argv)
    spec = spec_from_json(spec_to_json(CreateModel.model_validate(SPEC)))
    checked = plan(spec, Limits(1 << 31, 100, 50_000))
    learner = LiveModel("m", spec, checked, metrics_window=10)
    replica = LiveModel("m", spec, checked, metrics_window=10, learns=False)
    replica.load_version(learner.snapshot_state().state, 0, None)
    holds: list[float] = []
    timed(replica.lock, holds)
    n = learner.n_features
    axes = deltas.local_axes(learner.estimator, n)
    learner.track_changes()
    rng = np.random.default_rng(0)

    def learn() -> None:
        rows = [
            (np.sort(rng.choice(n, 30, replace=False)), rng.standard_normal(30) * 0.1)
            for _ in range(args.examples)
        ]
        learner.learn(batch_from_rows(rows), rng.integers(0, 2, size=args.examples))

    for kind, count in (("delta", args.deltas), ("whole version", args.versions)):
        holds.clear()
        for _ in range(count + 1):
            learn()
            if kind == "delta":
                capture, arrays = learner.publication_state(
                    False,
                    lambda live: deltas.gather(live.estimator, axes, live.take_changes(), None),
                )
                replica.load_delta(
                    lambda estimator, arrays=arrays: deltas.apply(estimator, axes, arrays),
                    capture.state,
                    learner.version,
                    None,
                )
            else:
                replica.load_version(learner.snapshot_state().state, learner.version, None)
        ms = [1000 * hold for hold in holds[1:]]  # (the first one of each kind: a warm-up)
        print(
            f"{kind}: writer lock held {statistics.median(ms):.2f} ms (median), "
            f"{max(ms):.2f} ms (longest) over {len(ms)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
