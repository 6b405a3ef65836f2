"""One hot model in the service learned by k = 2 learners (``parallel``, issue 30) against one
learner on the same stream, over real HTTP, real processes and a real Redis on this machine:
throughput, test error, and the freshness of the merged model at an api replica.

One fleet for both configurations: Redis (no persistence), two learners and one api replica
(``LORENTZTRON_ROLE``), publication every 0.2 s. The model: one-vs-one DoS of rank 4 over the
784 pixels, classes 0 to 9, no calibration (``benchmarks.data_parallel``'s model); k = 1 is
created without ``parallel`` (its one learner learns it), k = 2 with ``{"learners": 2,
"interval": N}``. A warm-up model learned by both learners and predicted by the replica
comes first (the kernels compiled), then:

1. **Throughput** (``--repeats`` runs of each configuration, alternating, a new model
   each): the model's learning paused on
   the learner that owns it, the whole MNIST deformation stream (seed 0, pixels rounded to
   1/1000) posted to the replica as svmlight bodies of ``--batch`` examples (logged in
   Redis: not timed), then learning resumed and the clock run until the replica serves a
   version that learned every example. Throughput = examples / those seconds: the learning,
   the merges, the publications and the replica's loads (k = 1: the resume request learns
   the backlog itself, so the clock starts before it is sent). Then the served model's
   error on the 2,000 clean MNIST test digits the stream never draws from, predicted by the
   replica, beside the library's in-process figure for the same stream
   (``core.parallel.DataParallel`` with the parallel merge; k = 1 a single learner).
2. **Freshness**: a new model (k = 2 merged every ``--freshness-interval`` examples),
   feedback posted to the replica at ``--rate`` examples/s in requests of
   ``--freshness-batch`` for ``--duration`` s (open loop), until the replica serves every
   example; its ``lorentztron_freshness_seconds`` for the model (per loaded version, the
   delay of its oldest new record) counted over that phase. A merged version cannot be
   fresher than its round: interval / rate seconds for its oldest record.

    python -m benchmarks.parallel_service         # writes a section of docs/scaling.md (+ json)
    python -m benchmarks.parallel_service --quick # seconds, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import redis

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from benchmarks.servers import RedisServer, ServiceProcess, start_all, stop_all
from benchmarks.service_durability.freshness import histogram, quantile
from core.datasets import DeformationStream, mnist_split
from core.dos import DoSClassifier
from core.one_vs_one import OneVsOne
from core.parallel import DataParallel
from service.scale.keys import RedisKeys

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMAND = "python -m benchmarks.parallel_service"
BEGIN, END = "<!-- parallel-service:begin -->", "<!-- parallel-service:end -->"
HEADER = "# Scaling out\n"
SVMLIGHT = {"content-type": "text/x-svmlight"}
#: the freshness histogram's model (``freshness.histogram`` reads model="m")
FRESH = "m"


# -- the stream -------------------------------------------------------------------------------
def stream(examples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, y) of the MNIST deformation stream (seed 0), pixels rounded to 1/1000 (the svmlight
    text then carries them exactly: the library's reference learns the same floats), and
    the clean test digits (X, y)."""
    (source_images, source_labels), (test_images, test_labels) = mnist_split()
    X, y = DeformationStream(source_images, source_labels, seed=0).take(examples)
    X = np.rint(X * 1000) / 1000
    test = test_images.reshape(test_images.shape[0], -1).astype(np.float64) / 255.0
    return X, y, test, test_labels


def svmlight(X: np.ndarray, y: np.ndarray) -> bytes:
    """An svmlight body (1-based indices) of the rows, values in at most 3 decimals."""
    text = {}
    lines = []
    for row, label in zip(X, y, strict=True):
        (nonzero,) = np.nonzero(row)
        thousandths = np.rint(row[nonzero] * 1000).astype(int).tolist()
        tokens = []
        for i, m in zip(nonzero.tolist(), thousandths, strict=True):
            value = text.get(m) or text.setdefault(m, repr(m / 1000))
            tokens.append(f"{i + 1}:{value}")
        lines.append(f"{int(label)} " + " ".join(tokens))
    return ("\n".join(lines) + "\n").encode()


def bodies(X: np.ndarray, y: np.ndarray, batch: int) -> list[bytes]:
    return [svmlight(X[i : i + batch], y[i : i + batch]) for i in range(0, len(y), batch)]


def spec(name: str, rank: int, interval: int | None) -> dict:
    body = {
        "name": name,
        "kind": "dos",
        "params": {"rank": rank, "seed": 0},
        "input": {"n_features": 784},
        "classes": list(range(10)),
        "calibration": "none",
    }
    if interval is not None:
        body["parallel"] = {"learners": 2, "interval": interval}
    return body


def template(rank: int) -> OneVsOne:
    return OneVsOne(base=DoSClassifier(n_features=784, rank=rank, seed=0), classes=list(range(10)))


def library_errors(X, y, test_X, test_y, rank: int, interval: int) -> dict[int, float]:
    """The library's test error on the same stream, in-process: k = 1 a single learner,
    k = 2 ``DataParallel`` with the parallel merge (the service's)."""
    single = template(rank)
    single.learn_many(X, y)
    parallel = DataParallel(template(rank), 2, interval, merge="parallel")
    parallel.learn_many(X, y)
    return {
        1: float(np.mean(single.predict_many(test_X) != test_y)),
        2: float(np.mean(parallel.model_.predict_many(test_X) != test_y)),
    }


# -- the fleet --------------------------------------------------------------------------------
@contextmanager
def fleet(directory: Path):
    """Redis, two learners and an api replica: (api url, learners, Redis client)."""
    directory.mkdir(parents=True, exist_ok=True)
    server = RedisServer(directory).start()
    common = {
        "LORENTZTRON_REDIS_URL": server.url,
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.3",
        "LORENTZTRON_LEASE_TTL": "5",
    }
    learners = [
        ServiceProcess({**common, "LORENTZTRON_ROLE": "learner"}, directory / f"learner{i}.log")
        for i in range(2)
    ]
    api = ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, directory / "api.log")
    client = redis.Redis.from_url(server.url)
    try:
        start_all((*learners, api))
        yield api.url, learners, client
    finally:
        client.close()
        stop_all((api, *learners))
        server.stop()


def wait(condition, timeout: float, what: str, period: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(period)


def owner(client, learners, name: str) -> str:
    """The url of the learner holding the model's lease (its pid is in the lease value),
    once it has the model (a lease is taken before the model is restored)."""

    def found():
        value = client.get(RedisKeys().lease(name))
        if value is None:
            return None
        pid = value.decode().rsplit(" ", 1)[0].rsplit("-", 2)[1]  # (host-pid-random)
        url = next((p.url for p in learners if str(p.process.pid) == pid), None)
        if url is None or httpx.get(f"{url}/v1/models/{name}").status_code != 200:
            return None
        return url

    return wait(found, 60, f"a learner to own {name}")


def settle(client, learners, name: str, k: int) -> str:
    """The owner's url (``owner``) once the model and its shares all have a learner, each
    share a learner of its own (else the two shares are learned one after the other)."""
    keys = RedisKeys()
    units = [name, *(f"{name}/{share}" for share in range(k if k > 1 else 0))]

    def placed():
        values = [client.get(keys.lease(unit)) for unit in units]
        if None in values:
            return False
        holders = [value.decode().rsplit(" ", 1)[0] for value in values]
        return len(set(holders[1:])) == len(holders[1:])

    wait(placed, 60, f"{name} placed, each share on a learner of its own")
    return owner(client, learners, name)


def learning(http, client, learners, name: str, paused: bool) -> None:
    """Pause or resume the model's learning on its owner (found again if it moved)."""
    for _ in range(10):
        at = owner(client, learners, name)
        response = http.post(
            f"{at}/v1/models/{name}/learning", json={"paused": paused}, timeout=600
        )
        if response.status_code != 404:
            response.raise_for_status()
            return
    raise RuntimeError(f"no learner kept {name} long enough to change its learning")


def backlog(http, client, learners, name: str) -> int:
    response = http.get(f"{owner(client, learners, name)}/v1/models/{name}")
    return response.json()["learning"]["backlog"] if response.status_code == 200 else 0


def info(http: httpx.Client, url: str, name: str) -> dict:
    response = http.get(f"{url}/v1/models/{name}")
    response.raise_for_status()
    return response.json()


def post(http: httpx.Client, url: str, name: str, body: bytes) -> None:
    response = http.post(f"{url}/v1/models/{name}/feedback", content=body, headers=SVMLIGHT)
    if response.status_code != 200:
        raise RuntimeError(f"feedback refused: {response.status_code} {response.text[:300]}")


def served(http: httpx.Client, url: str, name: str, examples: int, timeout: float) -> dict:
    """The replica's info once it serves a version that learned ``examples``."""
    return wait(
        lambda: (lambda i: i if i["examples_learned"] >= examples else None)(info(http, url, name)),
        timeout,
        f"the replica to serve {examples} examples of {name}",
        period=0.02,
    )


def create(http: httpx.Client, url: str, body: dict) -> None:
    response = http.post(f"{url}/v1/models", json=body)
    if response.status_code != 201:
        raise RuntimeError(f"create refused: {response.status_code} {response.text[:300]}")


def delete(http: httpx.Client, url: str, name: str) -> None:
    http.delete(f"{url}/v1/models/{name}").raise_for_status()


def test_error(http: httpx.Client, url: str, name: str, X: np.ndarray, y: np.ndarray) -> float:
    """The served model's error on (X, y), predicted by the replica in batches of 500."""
    wrong = 0
    for start in range(0, len(y), 500):
        instances = []
        for row in X[start : start + 500]:
            (nonzero,) = np.nonzero(row)
            instances.append({"indices": nonzero.tolist(), "values": row[nonzero].tolist()})
        response = http.post(f"{url}/v1/models/{name}/predict", json={"instances": instances})
        response.raise_for_status()
        labels = [p["label"] for p in response.json()["predictions"]]
        wrong += int(np.sum(np.asarray(labels) != y[start : start + 500]))
    return wrong / len(y)


def warm_up(http, url: str, learners, client, rank: int, X, y) -> None:
    """A k = 2 model learned by both learners, merged, served and predicted (every kernel
    compiled before anything is timed), then deleted."""
    create(http, url, spec("warm-up", rank, 100))
    settle(client, learners, "warm-up", 2)
    for body in bodies(X[:400], y[:400], 100):
        post(http, url, "warm-up", body)
    served(http, url, "warm-up", 400, 120)
    test_error(http, url, "warm-up", X[:50], y[:50])
    delete(http, url, "warm-up")


# -- the measurements -------------------------------------------------------------------------
def throughput(http, url: str, learners, client, name: str, body: dict, stream_bodies, n) -> dict:
    """One run (module docstring, 1)."""
    create(http, url, body)
    settle(client, learners, name, body.get("parallel", {}).get("learners", 1))
    learning(http, client, learners, name, paused=True)
    logged = time.perf_counter()
    for part in stream_bodies:
        post(http, url, name, part)
    logged = time.perf_counter() - logged
    wait(lambda: backlog(http, client, learners, name) > 0, 60, "the backlog at the owner")
    started = time.perf_counter()
    learning(http, client, learners, name, paused=False)
    found = served(http, url, name, n, 600)
    seconds = time.perf_counter() - started
    shares = (found.get("parallel") or {}).get("shares", [])
    return {
        "seconds": seconds,
        "examples_per_s": n / seconds,
        "logged_per_s": n / logged,
        "examples_learned": found["examples_learned"],
        "version": found["version"],
        "share_learners": [s["learner"] for s in shares],
    }


def freshness(http, url: str, learners, client, body: dict, X, y, args) -> dict:
    """The freshness phase (module docstring, 2)."""
    create(http, url, body)
    settle(client, learners, FRESH, body.get("parallel", {}).get("learners", 1))
    interval, batch = args.freshness_interval, args.freshness_batch
    rounds = max(1, round(args.rate * args.duration / interval))
    total = rounds * interval
    parts = bodies(*cycle(X, y, interval + total), batch)
    for part in parts[: interval // batch]:  # warm-up: a first version served
        post(http, url, FRESH, part)
    served(http, url, FRESH, interval, 120)
    before = histogram(http.get(f"{url}/metrics").text, "lorentztron_freshness_seconds")
    load_before = os.getloadavg()[0]
    period = batch / args.rate
    started = time.perf_counter()
    for i, part in enumerate(parts[interval // batch :]):
        delay = started + i * period - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        post(http, url, FRESH, part)
    posted = time.perf_counter() - started
    found = served(http, url, FRESH, interval + total, 120)
    after = histogram(http.get(f"{url}/metrics").text, "lorentztron_freshness_seconds")
    start = dict(before[0])
    buckets = [(le, n - start.get(le, 0.0)) for le, n in after[0]]
    count = after[2] - before[2]
    return {
        "examples": total,
        "examples_per_s": total / posted,
        "examples_learned": found["examples_learned"],
        "versions_loaded": count,
        "mean_s": (after[1] - before[1]) / count if count else None,
        "p50_le_s": quantile(buckets, 0.5) if count else None,
        "p99_le_s": quantile(buckets, 0.99) if count else None,
        "max_le_s": quantile(buckets, 1.0) if count else None,
        "buckets": buckets,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def cycle(X: np.ndarray, y: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(n) % len(y)
    return X[rows], y[rows]


def measure(args) -> dict:
    """Both configurations in one fleet, their throughput runs alternating (each first in
    turn), then each one's freshness phase."""
    X, y, test_X, test_y = stream(args.examples)
    n = args.examples
    stream_bodies = bodies(X, y, args.batch)
    reference = library_errors(X, y, test_X, test_y, args.rank, args.interval)
    rows = {k: {"learners": k, "runs": [], "test_errors": [], "loads": []} for k in (1, 2)}
    tmp = tempfile.mkdtemp(prefix="lorentztron-parallel-service-")  # (kept if a run fails)
    try:
        with fleet(Path(tmp)) as (url, learners, client), httpx.Client(timeout=120) as http:
            warm_up(http, url, learners, client, args.rank, X, y)
            for repeat in range(args.repeats):
                for k in (1, 2) if repeat % 2 == 0 else (2, 1):
                    name = f"t{repeat}-{k}"
                    body = spec(name, args.rank, args.interval if k > 1 else None)
                    load = os.getloadavg()[0]
                    run = throughput(http, url, learners, client, name, body, stream_bodies, n)
                    run["loads"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                    run["test_error"] = test_error(http, url, name, test_X, test_y)
                    delete(http, url, name)
                    rows[k]["runs"].append(run)
                    print({"learners": k, "run": repeat, **run}, flush=True)
            for k in (1, 2):
                body = spec(FRESH, args.rank, args.freshness_interval if k > 1 else None)
                rows[k]["freshness"] = freshness(http, url, learners, client, body, X, y, args)
                delete(http, url, FRESH)
                print({"learners": k, "freshness": rows[k]["freshness"]}, flush=True)
    except BaseException:
        print(f"the servers' logs are kept in {tmp}", file=sys.stderr)
        raise
    shutil.rmtree(tmp)
    for k, row in rows.items():
        runs = row["runs"]
        row.update(
            examples_per_s=statistics.median(r["examples_per_s"] for r in runs),
            seconds=statistics.median(r["seconds"] for r in runs),
            logged_per_s=statistics.median(r["logged_per_s"] for r in runs),
            examples_learned=[r["examples_learned"] for r in runs],
            share_learners=[r["share_learners"] for r in runs],
            test_error=statistics.median(r["test_error"] for r in runs),
            test_errors=[r["test_error"] for r in runs],
            library_error=reference[k],
            load_before=min(r["loads"][0] for r in runs),
            load_after=max(r["loads"][1] for r in runs),
        )
        del row["loads"]
    rows = list(rows.values())
    return {
        "environment": {
            **environment(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        "settings": {key: v for key, v in vars(args).items() if key != "quick"},
        "rows": rows,
    }


# -- the table --------------------------------------------------------------------------------
def render(result: dict) -> str:
    env, settings, rows = result["environment"], result["settings"], result["rows"]
    single = rows[0]
    interval, fresh = settings["interval"], settings["freshness_interval"]
    lines = [
        "## One model on two learners (`parallel`) against one",
        "",
        f"Written by `{result.get('command', COMMAND)}` on {env['date']} (commit "
        f"{env['commit']}, {env['cpus']} CPUs: {env['cpu']}, {env['machine']}). Redis, two "
        "learners and one api replica on this machine, one fleet for both configurations "
        "(the load averages say what else ran: the lowest before and the highest after the "
        "throughput runs, then before / after the freshness phase). One-vs-one DoS of rank "
        f"{settings['rank']} over the 784 pixels, classes 0-9; k = 1: one learner learns it; "
        f'k = 2: `"parallel": {{"learners": 2, "interval": {interval:,}}}`. Throughput: '
        f"the MNIST deformation stream, {settings['examples']:,} examples (seed 0) logged "
        f"through the replica in svmlight bodies of {settings['batch']:,} while the model's "
        "learning is paused, then resumed: examples / seconds from the resume request until "
        "the replica serves a version that learned them all (learning, merges, "
        f"publications, loads), median of {settings['repeats']} runs, the two configurations "
        "alternating. Test error: the served "
        "model on the 2,000 clean MNIST test digits (predicted by the replica), beside the "
        "library's in-process figure on the same stream (`DataParallel`, parallel merge; "
        "k = 1 a single learner). Freshness: a new model (k = 2 merged every "
        f"{fresh:,} examples), feedback at {settings['rate']:,.0f} examples/s in requests of "
        f"{settings['freshness_batch']} for {settings['duration']:g} s; the replica's "
        "`lorentztron_freshness_seconds` (per loaded version, the delay of its oldest new "
        "record), quantiles as the upper bound of their bucket. A merged version is at "
        f"least a round old for its oldest record: {fresh / settings['rate']:.2f} s here.",
        "",
        "| learners k | examples/s | vs k = 1 | seconds | test error | library, in-process | "
        "fresh: feedback/s | fresh: versions | fresh: mean s | fresh: p50 <= s | "
        "fresh: p99 <= s | load: throughput | load: freshness |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        f = row["freshness"]
        mean = f"{f['mean_s']:.3f}" if f["mean_s"] is not None else "-"
        lines.append(
            f"| {row['learners']} | {row['examples_per_s']:,.0f} | "
            f"{row['examples_per_s'] / single['examples_per_s']:.2f}x | {row['seconds']:.2f} | "
            f"{100 * row['test_error']:.2f}% | {100 * row['library_error']:.2f}% | "
            f"{f['examples_per_s']:,.0f} | {f['versions_loaded']:.0f} | {mean} | "
            f"{f['p50_le_s']} | {f['p99_le_s']} | {row['load_before']} / {row['load_after']} | "
            f"{f['load_before']} / {f['load_after']} |"
        )
    lines.append("")
    return "\n".join(lines) + "\n"


def run(argv=None) -> dict:
    """Parse the arguments and measure: the result (``main`` prints and writes it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--interval", type=int, default=10_000, help="k = 2: merge interval")
    parser.add_argument("--batch", type=int, default=1_000, help="examples per request")
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=1_000.0, help="freshness: examples/s")
    parser.add_argument("--duration", type=float, default=30.0, help="freshness: seconds")
    parser.add_argument("--freshness-interval", type=int, default=1_000)
    parser.add_argument("--freshness-batch", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="tiny runs, print only")
    args = parser.parse_args(argv)
    if args.quick:
        args.examples, args.interval, args.batch, args.repeats = 2_000, 500, 100, 1
        args.rate, args.duration, args.freshness_interval = 200.0, 3.0, 100
    for what, size, of in (
        ("--batch", args.batch, args.interval),
        ("--interval", args.interval, args.examples),
        ("--freshness-batch", args.freshness_batch, args.freshness_interval),
    ):
        if of % size:  # (a round ends with the record at which it reaches its interval)
            parser.error(f"{what} must divide {of}: every round complete, every example merged")
    result = measure(args)
    result["command"] = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    result["quick"] = args.quick
    return result


def main(argv=None) -> int:
    result = run(argv)
    print(render(result))
    if not result["quick"]:
        (DOCS / "parallel_service.json").write_text(json.dumps(result, indent=1) + "\n")
        replace_section(DOCS / "scaling.md", BEGIN, END, render(result), HEADER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
