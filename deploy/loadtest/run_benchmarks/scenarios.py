"""The scenarios: one load configuration each, their descriptions and their targets."""

from __future__ import annotations

import argparse

from deploy.loadtest.loadgen.config import LoadConfig

SCENARIOS = (
    "predict_open",
    "predict_open_low",
    "predict_closed",
    "feedback_closed",
    "bulk",
    "mixed_closed",
)


DESCRIPTIONS = {
    "predict_open": "predict, 1 instance, open loop at {rate:g} req/s",
    "predict_open_low": "predict, 1 instance, open loop at {low_rate:g} req/s",
    "predict_closed": "predict, 1 instance, closed loop",
    "feedback_closed": "feedback, 1 example (JSON), closed loop",
    "bulk": "bulk feedback, svmlight bodies of {batch:,} examples",
    "mixed_closed": "mixed 80% predict / 20% feedback by id, closed loop",
}


def scenario_configs(args: argparse.Namespace, url: str) -> dict[str, LoadConfig]:
    """The load of each scenario against the server at ``url``, as ``args`` set it."""
    common = dict(
        url=url,
        duration=args.duration,
        warmup=args.warmup,
        drain_timeout=args.drain_timeout,
        kind=args.kind,
        rank=args.rank,
        n_features=args.n_features,
        nnz=args.nnz,
        seed=args.seed,
        averaging_interval=args.averaging_interval,
        client=args.client,
        key=getattr(args, "key", None),
    )
    return {
        "predict_open": LoadConfig(
            mode="predict", rate=args.predict_rate, concurrency=args.open_connections, **common
        ),
        "predict_open_low": LoadConfig(
            mode="predict", rate=args.low_rate, concurrency=args.open_connections, **common
        ),
        "predict_closed": LoadConfig(mode="predict", concurrency=args.concurrency, **common),
        "feedback_closed": LoadConfig(mode="feedback", concurrency=args.concurrency, **common),
        "bulk": LoadConfig(
            mode="bulk", concurrency=args.bulk_concurrency, batch=args.batch, **common
        ),
        "mixed_closed": LoadConfig(
            mode="mixed", concurrency=args.concurrency, feedback_fraction=0.2, **common
        ),
    }


#: the scenarios measured against the bare FastAPI app too (``bare_app.py``), and the
#: least ratio of the service's throughput to the bare app's, measured in the same run
BASELINE_RATIOS = {"predict_closed": 0.8, "feedback_closed": 0.65}


def targets_of(name: str, args: argparse.Namespace) -> list[dict]:
    """The targets of scenario ``name`` (metric, comparison, value)."""
    targets = []
    if name == "predict_open":
        targets.append({"metric": "p99_ms", "op": "<", "value": 5.0, "rate": args.predict_rate})
    if name == "feedback_closed":
        targets.append({"metric": "throughput_rps", "op": ">=", "value": 2000.0})
    if name == "bulk":
        targets.append({"metric": "examples_per_s", "op": ">=", "value": 100_000.0})
    if name in BASELINE_RATIOS and args.baseline:
        targets.append({"metric": "ratio_to_bare", "op": ">=", "value": BASELINE_RATIOS[name]})
    return targets
