"""Figures of the scale-out issue (sharded learners, delta publication), over real HTTP and
a real Redis on this machine.

1. Freshness with delta publication: one learner and one api replica, feedback posted to
   the replica at ``--feedback-rate`` single-example requests/s (open loop) for
   ``--freshness-duration`` s, on the 134 MB model (DoS rank 16 over 2^18 hashed features
   with its time average); publication of whole versions (``FULL_SNAPSHOT_EVERY=1``, as
   before deltas) against deltas (the default, a full snapshot every 40 publications);
   the replica's ``lorentztron_freshness_seconds`` histogram and how it loaded versions.
2. Takeover time: three learners share ``--models`` models under feedback; one is
   SIGKILLed; the time from the kill until each of its models is owned (restored, learning)
   by another learner, for two lease TTLs; and the takers' ``lorentztron_takeover_seconds``
   (from the dead lease's deadline to the model restored).

    python -m benchmarks.scale_out            # writes docs/scaling.md (+ scaling.json)
    python -m benchmarks.scale_out --parts freshness   # re-measures one part, keeps the other
    python -m benchmarks.scale_out --parts freshness --deltas-only --freshness-repeats 3
    python -m benchmarks.scale_out --render --note "..."   # re-renders, with notes
    python -m benchmarks.scale_out --quick    # seconds, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import redis

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from benchmarks.servers import RedisServer, start_all
from benchmarks.service_durability.freshness import histogram, quantile
from benchmarks.service_durability.processes import learner_and_replica, loadgen, service
from service.scale.keys import RedisKeys

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BEGIN, END = "<!-- scale-out:begin -->", "<!-- scale-out:end -->"
HEADER = "# Scaling out\n"
BIG = {"rank": 16, "n_features": 1 << 18, "label": "DoS rank 16 over 2^18 hashed (134 MB)"}


def freshness(args, tmp: Path) -> list[dict]:
    rows = []
    model = (
        {"rank": 2, "n_features": 1 << 10, "label": "DoS rank 2 over 2^10 (quick)"}
        if args.quick
        else BIG
    )
    publications = [("whole versions", "1"), ("deltas", str(args.full_every))]
    runs = [
        (label, every, run)
        for label, every in (publications if not args.deltas_only else publications[1:])
        for run in range(args.freshness_repeats)
    ]
    for label, every, run in runs:
        directory = tmp / f"freshness-{every}-{run}"
        directory.mkdir()
        load_before = round(os.getloadavg()[0], 2)
        env = {"LORENTZTRON_FULL_SNAPSHOT_EVERY": every}
        logs = args.logs / f"freshness-{every}-{run}" if args.logs else None
        if logs:
            logs.mkdir(parents=True, exist_ok=True)
        with learner_and_replica(directory, model["rank"], model["n_features"], env, logs) as urls:
            api_url, redis_url = urls[1], urls[2]
            options = [
                "--model", "m", "--keep-model",
                "--rank", str(model["rank"]), "--n-features", str(model["n_features"]),
            ]  # fmt: skip
            before = follow(api_url, options, full=every == "1")
            text = httpx.get(f"{api_url}/metrics").text
            lag_before, holds_before = loop_lag(text), holds(text)
            redis_before = redis_persistence(redis_url)
            predictions: dict = {}
            probe = threading.Thread(  # predictions beside the feedback, answered meanwhile
                target=lambda found, url, extra: found.update(
                    loadgen(url, "predict", args.freshness_duration, extra)
                ),
                args=(predictions, api_url, ["--rate", str(args.predict_rate), *options]),
            )
            probe.start()
            summary = loadgen(
                api_url,
                "feedback",
                args.freshness_duration,
                ["--rate", str(args.feedback_rate), *options],
            )
            probe.join()
            time.sleep(3)  # the last publications land
            text = httpx.get(f"{api_url}/metrics").text
            after, lag = replica_figures(text), loop_lag(text, lag_before)
            held, redis_after = holds(text), redis_persistence(redis_url)
        collections = {
            g: highest([(le, n - dict(holds_before["gc"][g]).get(le, 0.0)) for le, n in found])
            for g, found in held["gc"].items()
        }
        buckets, total, count, loads, served = since(after, before)
        rows.append(
            {
                "model": model["label"],
                "publication": label,
                "run": run,
                "load_before": load_before,
                "load_after": round(os.getloadavg()[0], 2),
                "feedback_per_s": summary["throughput_rps"],
                "requests": summary.get("requests"),
                "errors": summary["errors"],
                "error_kinds": summary.get("error_kinds"),
                "p99_ms": summary["latency_ms"]["p99"],
                "predict_per_s": predictions.get("throughput_rps"),
                "predict_errors": predictions.get("errors"),
                "predict_p99_ms": predictions.get("latency_ms", {}).get("p99"),
                # the replica's own time for a feedback request (its latency histogram: the
                # bucket bound holding the p99), beside the load generator's p99 above
                "served_p99_le_ms": 1000 * quantile(served, 0.99) if served else None,
                # how late the replica's event loop ran a task due (a request waits that
                # long before it is even read): the bucket bounds of its p99 and its maximum
                "loop_lag_p99_le_ms": 1000 * quantile(lag, 0.99) if lag else None,
                "loop_lag_max_le_ms": 1000 * highest(lag) if lag else None,
                # holds of the loop over LOOP_STALL (logged with their stacks), and the
                # longest garbage collection of each generation (to a bucket bound)
                "loop_stalls": held["stalls"] - holds_before["stalls"],
                "gc_max_le_ms": {g: 1000 * top for g, top in collections.items()},
                # Redis's append-only-file rewrites (and forks) during the measurement
                "aof_rewrites": redis_after["aof_rewrites"] - redis_before["aof_rewrites"],
                "redis_forks": redis_after["total_forks"] - redis_before["total_forks"],
                "latest_fork_ms": redis_after["latest_fork_usec"] / 1000,
                # how late the load generator itself sent requests (counted in its p99)
                "send_lag_p99_ms": summary.get("send_lag_ms", {}).get("p99"),
                "versions_loaded": count,
                "loads": loads,
                "mean_s": total / count if count else None,
                "over_1s": count - dict(buckets).get(1.0, 0.0),
                "buckets": buckets,
                "p50_le_s": quantile(buckets, 0.5) if count else None,
                "p99_le_s": quantile(buckets, 0.99) if count else None,
                "p99_s": interpolated(buckets, 0.99) if count else None,
            }
        )
        print(rows[-1], flush=True)
    return rows


def replica_figures(text: str) -> tuple:
    """(freshness buckets, sum, count, version loads by kind) of a replica's /metrics."""
    buckets, total, count = [], 0.0, 0.0
    if 'lorentztron_freshness_seconds_count{model="m"}' in text:  # (once a version is loaded)
        buckets, total, count = histogram(text, "lorentztron_freshness_seconds")
    loads = re.findall(r'lorentztron_version_loads_total\{kind="(\w+)"\} (\S+)', text)
    served = re.findall(
        r'lorentztron_http_request_duration_seconds_bucket\{endpoint="/v1/models/\{name\}/'
        r'feedback",le="([^"]+)",method="POST"\} (\S+)',
        text,
    )
    served = [(float(le), float(n)) for le, n in served]
    return buckets, total, count, {kind: float(n) for kind, n in loads}, served


def loop_lag(
    text: str, before: list | None = None, name: str = "event_loop_lag_seconds", labels: str = ""
) -> list[tuple[float, float]]:
    """The replica's ``lorentztron_event_loop_lag_seconds`` buckets (or ``name``'s with
    ``labels``, e.g. 'generation="2",') as (le, count), less ``before``'s."""
    pattern = rf'lorentztron_{name}_bucket\{{{labels}le="([^"]+)"\}} (\S+)'
    start = dict(before or [])
    found = re.findall(pattern, text)
    return [(float(le), float(n) - start.get(float(le), 0.0)) for le, n in found]


def holds(text: str) -> dict:
    """What may hold a replica's event loop, from its /metrics: its stalls (count) and its
    garbage collections (buckets of each generation)."""
    stalls = re.search(r"^lorentztron_event_loop_stalls_total (\S+)$", text, re.M)
    return {
        "stalls": float(stalls.group(1)) if stalls else 0.0,
        "gc": {g: loop_lag(text, None, "gc_seconds", f'generation="{g}",') for g in "012"},
    }


def redis_persistence(url: str) -> dict:
    """Redis's append-only-file rewrites and forks so far (INFO)."""
    client = redis.Redis.from_url(url)
    try:
        info = {**client.info("persistence"), **client.info("stats")}
    finally:
        client.close()
    return {key: info.get(key) for key in ("aof_rewrites", "total_forks", "latest_fork_usec")}


def highest(buckets: list[tuple[float, float]]) -> float:
    """The upper bound of the highest bucket that gained a count (the maximum, to a bucket)."""
    previous, top = 0.0, 0.0
    for le, count in buckets:
        if count > previous:
            top = le
        previous = count
    return top


def since(after: tuple, before: tuple) -> tuple:
    """The replica's figures of the measurement: ``after`` less ``before`` (the warm-up)."""
    start = dict(before[0])
    buckets = [(le, n - start.get(le, 0.0)) for le, n in after[0]]
    loads = {kind: n - before[3].get(kind, 0.0) for kind, n in after[3].items()}
    served = dict(before[4])
    served = [(le, n - served.get(le, 0.0)) for le, n in after[4]]
    return buckets, after[1] - before[1], after[2] - before[2], loads, served


def follow(api_url: str, options: list[str], full: bool, timeout: float = 180.0) -> tuple:
    """Warm up: a little feedback, until the replica has loaded a version published after
    it (with deltas: a delta, i.e. it follows the chain; its first load of the 134 MB
    state is a start-up, not the freshness of feedback). The replica's figures then."""
    kind = "full" if full else "delta"
    deadline = time.monotonic() + timeout
    while True:
        loadgen(api_url, "feedback", 1.0, ["--rate", "50", "--warmup", "0", *options])
        for _ in range(20):
            figures = replica_figures(httpx.get(f"{api_url}/metrics").text)
            if figures[2] and figures[3].get(kind, 0.0) >= 1 + full:
                return figures
            time.sleep(0.5)
        if time.monotonic() > deadline:
            raise RuntimeError("the replica loaded no published version")


def interpolated(buckets: list[tuple[float, float]], q: float) -> float:
    """Quantile q interpolated linearly inside its bucket (as Prometheus's
    ``histogram_quantile``): the bucket bounds say where it is to a bucket's width only."""
    total, lower, below = buckets[-1][1], 0.0, 0.0
    for le, count in buckets:
        if count >= q * total:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (q * total - below) / max(count - below, 1e-12)
        lower, below = le, count
    return float("inf")


def _feedback(url: str, names: list[str], stop: threading.Event) -> None:
    rng = np.random.default_rng(0)
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            name = names[rng.integers(len(names))]
            body = {"examples": [{"x": rng.standard_normal(4).tolist(), "label": 1}]}
            try:
                client.post(f"{url}/v1/models/{name}/feedback", json=body)
            except httpx.HTTPError:
                pass
            time.sleep(0.01)


def _owners(client, keys: RedisKeys, names: list[str]) -> list[str | None]:
    values = [client.get(keys.lease(name)) for name in names]
    return [v.decode().rsplit(" ", 1)[0] if v else None for v in values]


def takeover(args, tmp: Path) -> list[dict]:
    rows = []
    keys = RedisKeys("takeover")
    names = [f"t{i:02d}" for i in range(args.models)]
    for ttl in args.ttls:
        times, histogram = [], []
        for repeat in range(args.repeats):
            directory = tmp / f"takeover-{ttl}-{repeat}"
            directory.mkdir()
            with RedisServer(directory, appendfsync="everysec").start() as redis_server:
                redis_url = redis_server.url
                env = {
                    "LORENTZTRON_REDIS_URL": redis_url,
                    "LORENTZTRON_REDIS_PREFIX": "takeover",
                    "LORENTZTRON_LEASE_TTL": str(ttl),
                    "LORENTZTRON_POLL_INTERVAL": "0.5",
                }
                learners = [service({**env, "LORENTZTRON_ROLE": "learner"}) for _ in range(3)]
                api = service({**env, "LORENTZTRON_ROLE": "api"})
                client = redis.Redis.from_url(redis_url)
                with api, learners[0], learners[1], learners[2]:
                    start_all((*learners, api))
                    api_url = api.url
                    for name in names:
                        spec = {"name": name, "kind": "dos", "input": {"n_features": 4}}
                        httpx.post(f"{api_url}/v1/models", json=spec, timeout=30)

                    def owners(client=client):
                        return _owners(client, keys, names)

                    deadline = time.monotonic() + 60
                    while None in owners() or len(set(owners())) < 3:
                        assert time.monotonic() < deadline, "models not placed"
                        time.sleep(0.1)
                    stop = threading.Event()
                    load = threading.Thread(target=_feedback, args=(api_url, names, stop))
                    load.start()
                    time.sleep(1)
                    victim = learners[0].process
                    mine = {
                        n for n, o in zip(names, owners(), strict=True) if f"-{victim.pid}-" in o
                    }
                    victim.kill()
                    victim.wait()
                    killed = time.monotonic()
                    taken: dict[str, float] = {}
                    while len(taken) < len(mine):
                        for name, owner in zip(names, owners(), strict=True):
                            if (
                                name in mine
                                and name not in taken
                                and owner
                                and (f"-{victim.pid}-" not in owner)
                            ):
                                taken[name] = time.monotonic() - killed
                        assert time.monotonic() - killed < 10 * ttl, "no takeover"
                        time.sleep(0.02)
                    stop.set()
                    load.join()
                    for learner in learners[1:]:
                        text = httpx.get(f"{learner.url}/metrics").text
                        found = re.search(r"^lorentztron_takeover_seconds_sum (\S+)$", text, re.M)
                        n = re.search(r"^lorentztron_takeover_seconds_count (\S+)$", text, re.M)
                        if n and float(n.group(1)):
                            histogram.append((float(found.group(1)), float(n.group(1))))
                times += list(taken.values())
                client.close()
        total = sum(s for s, _ in histogram)
        count = sum(n for _, n in histogram)
        rows.append(
            {
                "ttl_s": ttl,
                "models_taken": len(times),
                "median_s": statistics.median(times),
                "max_s": max(times),
                "metric_mean_s": total / count if count else None,
            }
        )
        print(rows[-1], flush=True)
    return rows


def predicted(runs: list[dict]) -> str:
    """The median predict p99 of runs that measured it, as a clause."""
    found = [row["predict_p99_ms"] for row in runs if row.get("predict_p99_ms") is not None]
    return f", predict p99 {statistics.median(found):.0f} ms" if found else ""


def medians(rows: list[dict]) -> list[str]:
    """A line per publication measured more than once: the medians over its runs."""
    lines = []
    for publication in dict.fromkeys(row["publication"] for row in rows):
        runs = [row for row in rows if row["publication"] == publication and row["versions_loaded"]]
        if len(runs) < 2:
            continue

        def median(key, runs=runs):
            return statistics.median(row[key] for row in runs)

        over = statistics.median(row["over_1s"] / row["versions_loaded"] for row in runs)
        lines += [
            "",
            f"Median of the {len(runs)} runs with {publication}: {median('feedback_per_s'):,.0f} "
            f"feedback/s, feedback p99 {median('p99_ms'):.0f} ms{predicted(runs)}, freshness mean "
            f"{median('mean_s'):.3f} s, p99 <= {median('p99_le_s')} s (interpolated "
            f"{median('p99_s'):.2f} s), {100 * over:.1f}% of the versions over 1 s.",
        ]
    return lines


def holds_figures(row: dict) -> str:
    """A row's stalls and longest collection, and Redis's rewrites and last fork (``-`` /
    ``-``: a run before they were measured)."""
    if "loop_stalls" not in row:
        return "- | -"
    return (
        f"{row['loop_stalls']:.0f} / {max(row['gc_max_le_ms'].values()):g} | "
        f"{row['aof_rewrites']} / {row['latest_fork_ms']:.1f}"
    )


def figure(row: dict, key: str, form: str = "g") -> str:
    """A row's figure (``-``: not measured, e.g. by a run before it was)."""
    value = row.get(key)
    return "-" if value is None else format(value, form)


def render(result: dict) -> str:
    settings = result["settings"]

    def measured(part: str) -> str:
        run = result["runs"][part]
        return (
            f"Measured on {run['date']} (commit {run['commit']}, {run['cpus']} CPUs: "
            f"{run['cpu']}, load average before {run['load_before']}, after "
            f"{run['load_after']})."
        )

    lines = [
        "## Freshness with delta publication, and takeover time",
        "",
        "Written by `python -m benchmarks.scale_out`. The learner(s), the replica, Redis and "
        "the load generator share this machine's 2 cores with other work (the load averages "
        "say how much): read the figures as orders of magnitude.",
        "",
        "### Freshness: acknowledged feedback to the replica serving it",
        "",
        measured("freshness"),
        "",
        f"One learner, one api replica, Redis (`appendfsync everysec`); single-example "
        f"feedback posted to the replica at {settings['feedback_rate']:,.0f} requests/s (open "
        f"loop, `python -m deploy.loadtest.loadgen --client raw`) for "
        f"{settings['freshness_duration']:g} s, and predictions of one instance at "
        f"{settings.get('predict_rate', 100):,.0f} requests/s beside them (the same load "
        f"generator); publication every 0.25 s, a full snapshot "
        f"every {settings.get('full_every', 40)} publications with deltas. Freshness: the "
        "replica's `lorentztron_freshness_seconds` (per loaded version, the delay of its "
        "oldest new record; buckets of 0.1 s up to 2 s), counted from the end of a warm-up "
        "(a little feedback until the replica has loaded a published version: its first "
        "load of the whole state is its start-up, not the freshness of feedback); "
        "quantiles as the upper bound of their bucket, and the p99 interpolated inside it. "
        "Feedback p99: the load generator's, from each request's scheduled time (8 "
        "connections: a request waits for a free one); served: the bucket bound holding the "
        "p99 of the replica's own `lorentztron_http_request_duration_seconds`; event-loop "
        "lag: the replica's `lorentztron_event_loop_lag_seconds` (how late its loop ran a "
        "task due: what a request waits before it is even read), the bucket bounds holding "
        "its p99 and its maximum; send lag: how late the load generator itself started "
        "requests (its own share of its p99); stalls: the replica's holds of its loop of "
        "`LOOP_STALL` (0.1 s) or more (`lorentztron_event_loop_stalls_total`, each logged "
        "with the loop thread's stack), and its longest garbage collection (the bucket "
        "bound of `lorentztron_gc_seconds`, any generation); Redis: its append-only-file "
        "rewrites during the measurement (INFO `aof_rewrites`) and how long its last fork "
        "held it (`latest_fork_usec`).",
        "",
        "| model | publication | run (load average before / after) | feedback/s reached | "
        "errors | feedback p99 ms | served p99 <= ms | event-loop lag p99 / max <= ms | "
        "stalls / longest collection <= ms | Redis rewrites / last fork ms | "
        "send lag p99 ms | predict p99 ms | versions loaded (deltas / full) | mean s | "
        "p50 <= s | p99 <= s | p99 s (interpolated) | versions over 1 s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["freshness"]:
        loads = row["loads"]
        loaded = (
            f"{row['versions_loaded']:.0f} ({loads.get('delta', 0):.0f} / "
            f"{loads.get('full', 0) + loads.get('missed', 0):.0f})"
        )
        mean = f"{row['mean_s']:.3f}" if row["mean_s"] is not None else "-"
        p99 = f"{row['p99_s']:.2f}" if row.get("p99_s") is not None else "-"
        predict = f"{row['predict_p99_ms']:.1f}" if row.get("predict_p99_ms") is not None else "-"
        run = "-"
        if "run" in row:
            run = f"{row['run'] + 1} ({row['load_before']} / {row['load_after']})"
        lines.append(
            f"| {row['model']} | {row['publication']} | {run} | {row['feedback_per_s']:,.0f} | "
            f"{row['errors']} | {row['p99_ms']:.1f} | {figure(row, 'served_p99_le_ms')} | "
            f"{figure(row, 'loop_lag_p99_le_ms')} / {figure(row, 'loop_lag_max_le_ms')} | "
            f"{holds_figures(row)} | "
            f"{figure(row, 'send_lag_p99_ms', '.1f')} | {predict} | {loaded} | {mean} | "
            f"{row['p50_le_s']} | {row['p99_le_s']} | {p99} | {row['over_1s']:.0f} |"
        )
    lines += medians(result["freshness"])
    lines += [
        "",
        "### Takeover time",
        "",
        measured("takeover"),
        "",
        f"Three learners share {settings['models']} models (DoS on 4 features) under light "
        "feedback through an api replica; one learner is SIGKILLed. Time from the kill until "
        "each of its models is owned by another learner (restored and learning), over "
        f"{settings['repeats']} runs; and the takers' `lorentztron_takeover_seconds` (from "
        "the dead lease's deadline to the model restored). The bound is twice the TTL.",
        "",
        "| lease TTL s | models taken over | median s | max s | bound s | metric mean s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["takeover"]:
        metric = f"{row['metric_mean_s']:.3f}" if row["metric_mean_s"] is not None else "-"
        lines.append(
            f"| {row['ttl_s']:g} | {row['models_taken']} | {row['median_s']:.2f} | "
            f"{row['max_s']:.2f} | {2 * row['ttl_s']:g} | {metric} |"
        )
    for note in result.get("notes", []):
        lines += ["", note]
    lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="freshness,takeover")
    parser.add_argument("--feedback-rate", type=float, default=1000.0)
    parser.add_argument("--freshness-duration", type=float, default=40.0)
    parser.add_argument(
        "--predict-rate", type=float, default=100.0, help="predictions/s beside the feedback"
    )
    parser.add_argument("--full-every", type=int, default=40, help="FULL_SNAPSHOT_EVERY")
    parser.add_argument("--deltas-only", action="store_true", help="skip whole versions")
    parser.add_argument("--freshness-repeats", type=int, default=1, help="runs of each")
    parser.add_argument("--output", type=Path, help="write the results JSON here, not docs/")
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--ttls", type=float, nargs="+", default=[2.0, 10.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the tables")
    parser.add_argument("--quick", action="store_true", help="tiny runs, print only")
    parser.add_argument(
        "--logs", type=Path, help="keep the freshness runs' learner and replica logs here"
    )
    parser.add_argument(
        "--render", action="store_true", help="measure nothing: re-render docs/scaling.json"
    )
    args = parser.parse_args(argv)
    if args.render:
        result = json.loads((DOCS / "scaling.json").read_text())
        result["notes"] = args.note or result.get("notes", [])
        (DOCS / "scaling.json").write_text(json.dumps(result, indent=1) + "\n")
        replace_section(DOCS / "scaling.md", BEGIN, END, render(result), HEADER)
        return 0
    if args.quick:
        args.feedback_rate, args.freshness_duration = 100.0, 2.0
        args.models, args.ttls, args.repeats = 3, [1.0], 1
    parts = args.parts.split(",")
    previous = {}
    if not args.quick and (DOCS / "scaling.json").exists():
        previous = json.loads((DOCS / "scaling.json").read_text())
    result = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("note", "output", "logs")},
        "notes": args.note or previous.get("notes", []),
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="lorentztron-scale-out-") as tmp:
        for name, function in (("freshness", freshness), ("takeover", takeover)):
            if name not in parts and name in previous.get("runs", {}):
                # not measured now: the last run's rows, with their own date and settings
                result[name], result["runs"][name] = previous[name], previous["runs"][name]
                continue
            run = {
                **environment(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "load_before": round(os.getloadavg()[0], 2),
            }
            result[name] = function(args, Path(tmp)) if name in parts else []
            run["load_after"] = round(os.getloadavg()[0], 2)
            result["runs"][name] = run
    if args.quick:
        print(render(result))
        return 0
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
        return 0
    (DOCS / "scaling.json").write_text(json.dumps(result, indent=1) + "\n")
    replace_section(DOCS / "scaling.md", BEGIN, END, render(result), HEADER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
