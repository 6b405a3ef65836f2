"""Evidence for a model's members (issue 27): recovery from an abrupt concept change, no false
alarms on stationary streams, and the cost of challengers.

1. **Concept change.** (a) the a9a training stream with its labels flipped after 16,000
   examples; (b) the MNIST deformation stream (``core.datasets.DeformationStream``) with two
   digit classes swapped halfway. Each stream feeds, through the HTTP API in-process
   (``TestClient`` on ``create_app``), the same model three times: with ``drift: {adwin,
   on_drift: challenger}`` and ``promotion: {auto: true}``; without policies; with ``serve:
   best`` (the averaged variant serves once it is better); and River's
   ``drift.DriftRetrainingClassifier`` wraps a comparable River PA model on the same stream.
   The served error of each batch is counted from the feedback answers (``results``: the
   champion's live prediction before the update) when the live variant serves, and from the
   difference of the serving variant's progressive counts (``GET /v1/models/{name}``) when
   the averaged one does; the recent error is over the last ``WINDOW`` examples.
2. **No false alarms.** Seeds of a stationary stream (a random order of a9a's training and
   test sets, 48,842 examples), each with an A/A challenger (the champion's DoS spec with
   another ``seed``) and a worse one (a tiny ``C``), auto promotion at 0.99 and ADWIN with
   ``on_drift: challenger``: promotions and drift detections counted.
3. **Cost.** Feedback throughput of a model with 0, 1 and 3 challengers over real HTTP
   (``benchmarks.servers.ServiceProcess``), bulk and single-example requests, and predict
   throughput with and without challengers: the server's CPU time per example against the
   model's own learning time (``core``).

    python -m benchmarks.experiments                 # everything: docs/experiments.{md,json}
    python -m benchmarks.experiments --part change   # or false_alarms, cost
    python -m benchmarks.experiments --quick         # a few thousand examples, 3 seeds
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from benchmarks.servers import ROOT, ServiceProcess
from benchmarks.timing import timed

DOCS = ROOT / "docs"
PAGE = DOCS / "experiments.md"
RESULTS = DOCS / "experiments.json"
HEADER = "# Experiments: a model's members (issue 27)\n"

#: examples per feedback request, and of the recent-error window (a multiple of it)
BATCH = 250
WINDOW = 1000
#: the served error counts as recovered within this much of its level before the change
TOLERANCE = 0.01
A9A_CHANGE = 16_000
MNIST_SWAP = (4, 9)
#: the policies of the "drift" model
DRIFT = {"detector": "adwin", "on_drift": "challenger"}
PROMOTION = {"auto": True, "confidence": 0.99, "min_examples": 1000}
#: the linear model of the concept-change streams (service and River)
PA_C = 0.01
#: and a PA-I slow to unlearn (a small C: small steps once the weights are large)
PA_C_SLOW = 1e-4
AVERAGING = {"interval": 500}
#: the stationary streams' champion and its worse challenger
DOS = {"rank": 4, "mode": "pa1", "C": 0.01}
DOS_WORSE = {"rank": 4, "mode": "pa1", "C": 1e-5}


# -- data ---------------------------------------------------------------------------------
def a9a_flipped(n: int | None = None, change: int = A9A_CHANGE):
    """a9a's training stream, dense (123 columns), labels -1 / +1 flipped from ``change`` on."""
    from core.datasets import data_dir, load_svmlight

    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    X, y = X[:n].toarray(), y[:n].astype(np.int64)
    y[change:] = -y[change:]
    return X, y


def mnist_swapped(n: int, seed: int = 0, swap: tuple[int, int] = MNIST_SWAP):
    """``n`` deformed MNIST digits (pixels rounded to 2 decimals, for short JSON), the labels
    of the classes ``swap`` exchanged in the second half."""
    from core.datasets import DeformationStream, mnist_split

    (images, labels), _ = mnist_split()
    X, y = DeformationStream(images, labels, seed=seed).take(n)
    X = X.round(2)
    a, b = swap
    half = y[n // 2 :]
    y[n // 2 :] = np.where(half == a, b, np.where(half == b, a, half))
    return X, y


# -- the service in-process ---------------------------------------------------------------
@contextlib.contextmanager
def service() -> Iterator:
    """A TestClient on a fresh app over a temporary snapshot directory."""
    from fastapi.testclient import TestClient

    from service.config import Settings
    from service.main import create_app

    with tempfile.TemporaryDirectory(prefix="experiments-") as directory:
        settings = Settings(snapshot_dir=Path(directory), snapshot_interval=3600)
        with TestClient(create_app(settings)) as client:
            yield client


def _ok(response, status: int = 200) -> dict:
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.url} answered {response.status_code}: {response.text}"
        )
    return response.json() if response.content else {}


def _errors_of(info: dict, variant: str) -> int:
    """Errors a variant made so far (its progressive accuracy times its examples)."""
    metrics = info["variants"][variant]["metrics"]
    return round(metrics["examples"] * (1.0 - (metrics["accuracy"] or 0.0)))


class Served:
    """One service model fed batch by batch: the errors of what served each batch."""

    def __init__(self, client, name: str, spec: dict):
        self.client, self.name = client, name
        self.info = _ok(client.post("/v1/models", json={"name": name, **spec}), 201)
        self.errors: list[int] = []  # served errors per batch
        self.averaged_errors: list[int] = []  # the champion's averaged variant's, per batch
        self.members: list[str] = []  # the member that served each batch
        self.variants: list[str] = []

    def feed(self, X: np.ndarray, y: np.ndarray) -> None:
        member, variant = self.info["member"], self.info["variant"]
        examples = [{"x": x.tolist(), "label": int(label)} for x, label in zip(X, y, strict=True)]
        answer = _ok(
            self.client.post(f"/v1/models/{self.name}/feedback", json={"examples": examples})
        )
        after = _ok(self.client.get(f"/v1/models/{self.name}"))
        same = after["member"] == member
        averaged = [_errors_of(i, "averaged") for i in (self.info, after)] if same else None
        if variant == "live":
            predicted = [r["predicted"] for r in answer["results"]]
            self.errors.append(int(sum(p != int(t) for p, t in zip(predicted, y, strict=True))))
        else:  # (the averaged variant served: its progressive count moved by its errors)
            if averaged is None:
                raise RuntimeError("the averaged variant served across a change of member")
            self.errors.append(averaged[1] - averaged[0])
        self.averaged_errors.append(averaged[1] - averaged[0] if averaged else -1)
        self.members.append(member)
        self.variants.append(variant)
        self.info = after


def river_errors(
    X: np.ndarray, y: np.ndarray, detector: str, multiclass: bool, C: float = PA_C
) -> list[int]:
    """River's DriftRetrainingClassifier around a PA-I classifier (one-vs-one for digits),
    progressive: errors per batch of ``BATCH``. ``detector``: ``ddm`` (River's default,
    with a background model trained on warnings) or ``adwin`` (reset on a drift)."""
    from river import drift, linear_model
    from river import multiclass as reductions

    base = linear_model.PAClassifier(C=C, mode=1)
    model = reductions.OneVsOneClassifier(base) if multiclass else base
    if detector == "adwin":
        wrapped = drift.DriftRetrainingClassifier(model, drift.ADWIN(), train_in_background=False)
    else:
        wrapped = drift.DriftRetrainingClassifier(model)
    errors, wrong = [], 0
    for i, (x, target) in enumerate(zip(X, y, strict=True)):
        features = {int(j): float(x[j]) for j in np.flatnonzero(x)}  # (zeros change nothing)
        label = int(target) if multiclass else bool(target > 0)
        # (the model it serves: OneVsOneClassifier has no predict_proba_one, which the
        # wrapper's own predict_one goes through)
        wrong += wrapped.model.predict_one(features) != label
        wrapped.learn_one(features, label)
        if (i + 1) % BATCH == 0:
            errors.append(int(wrong))
            wrong = 0
    return errors


# -- 1. concept change --------------------------------------------------------------------
def recent(errors: list[int]) -> np.ndarray:
    """The recent error after each batch: over the last WINDOW examples (fewer at first)."""
    k = WINDOW // BATCH
    counts = np.cumsum([0, *errors])
    ends = np.arange(1, len(errors) + 1)
    starts = np.maximum(ends - k, 0)
    return (counts[ends] - counts[starts]) / ((ends - starts) * BATCH)


def recovery(curve: np.ndarray, change: int) -> int | None:
    """Examples after the change until the recent error, over a window wholly after it, is
    back within TOLERANCE of its level over the window before it (None: never)."""
    before = curve[change // BATCH - 1]
    for b in range((change + WINDOW) // BATCH - 1, len(curve)):
        if curve[b] <= before + TOLERANCE:
            return (b + 1) * BATCH - change
    return None


def change_experiment(stream: str, n: int | None = None, log=print, C: float = PA_C) -> dict:
    """One concept-change stream through the three service models and River's wrappers
    (PA-I of aggressiveness ``C`` in both)."""
    if stream == "a9a":
        X, y = a9a_flipped(n)
        change = A9A_CHANGE if n is None else n // 2
        if n is not None:  # (the quick run flips halfway)
            X, y = a9a_flipped(n, change)
        spec = {"kind": "linear-pa", "input": {"n_features": 123}}
        what = f"a9a training stream, labels flipped after {change:,} examples"
    else:
        n = n or 20_000
        X, y = mnist_swapped(n)
        change = n // 2
        spec = {"kind": "linear-pa", "input": {"n_features": 784}, "classes": list(range(10))}
        a, b = MNIST_SWAP
        what = f"MNIST deformation stream, digits {a} and {b} swapped after {change:,} examples"
    n = (len(y) // BATCH) * BATCH
    spec = {**spec, "params": {"mode": "pa1", "C": C}, "averaging": AVERAGING}
    configs = {
        "drift + auto promotion": {**spec, "drift": DRIFT, "promotion": PROMOTION},
        "no policy": spec,
        "serve: best": {**spec, "serve": "best"},
    }
    started = time.perf_counter()
    with service() as client:
        models = {
            label: Served(client, f"m{k}", body) for k, (label, body) in enumerate(configs.items())
        }
        for start in range(0, n, BATCH):
            for model in models.values():
                model.feed(X[start : start + BATCH], y[start : start + BATCH])
        policy = models["drift + auto promotion"]
        final = policy.info
    log(f"  {stream}: service models {time.perf_counter() - started:.0f} s")
    rows = {label: m.errors for label, m in models.items()}
    rows["no policy, its averaged variant"] = models["no policy"].averaged_errors
    multiclass = stream != "a9a"
    for detector in ("ddm", "adwin"):
        started = time.perf_counter()
        rows[f"River DriftRetrainingClassifier ({detector})"] = river_errors(
            X[:n], y[:n], detector, multiclass, C
        )
        log(f"  {stream}: River {detector} {time.perf_counter() - started:.0f} s")
    members = policy.members
    switched = next((k for k, m in enumerate(members) if m != "original"), None)
    curves = {label: recent(errors) for label, errors in rows.items()}
    return {
        "stream": what,
        "examples": n,
        "change": change,
        "batch": BATCH,
        "window": WINDOW,
        "C": C,
        "service_kind": f"linear-pa (pa1, C={C:g}, averaging interval 500)"
        + (", one-vs-one" if multiclass else ""),
        "river_model": f"{'OneVsOneClassifier(' if multiclass else ''}"
        f"PAClassifier(C={C:g}, mode=1){')' if multiclass else ''}",
        "errors_per_batch": rows,
        "recent_error": {label: curve.tolist() for label, curve in curves.items()},
        "recovery_examples": {label: recovery(c, change) for label, c in curves.items()},
        "served_by": {
            "drift + auto promotion": members,
            "serve: best": models["serve: best"].variants,
        },
        "policy": {
            "detections": final["drift"]["detections"],
            "last_detected_at_example": final["drift"]["last_detected_at_example"],
            "promotions": final["promotions"],
            "member_at_end": final["member"],
            "first_batch_served_by_another_member_starts_at": None
            if switched is None
            else switched * BATCH,
        },
    }


# -- 2. no false alarms -------------------------------------------------------------------
def a9a_lines() -> list[bytes]:
    """a9a's training and test sets as svmlight lines (one stationary population)."""
    from core.datasets import data_dir

    lines = []
    for name in ("a9a", "a9a.t"):
        lines += [line for line in (data_dir() / "a9a" / name).read_bytes().splitlines() if line]
    return lines


def false_alarm_experiment(seeds: int, n: int | None = None, batch: int = 1000, log=print) -> dict:
    """Per seed: a random order of a9a (train + test), a DoS champion with ADWIN
    (``on_drift: challenger``) and auto promotion at 0.99, an A/A challenger (another seed)
    and a worse one (tiny C). Promotions and detections counted."""
    from scipy.stats import beta

    lines = a9a_lines()
    n = n or len(lines)
    runs = []
    started = time.perf_counter()
    with service() as client:
        for seed in range(seeds):
            order = np.random.default_rng(seed).permutation(len(lines))[:n]
            name = f"s{seed}"
            _ok(
                client.post(
                    "/v1/models",
                    json={
                        "name": name,
                        "kind": "dos",
                        "input": {"n_features": 123},
                        "params": {**DOS, "seed": seed},
                        "drift": DRIFT,
                        "promotion": PROMOTION,
                    },
                ),
                201,
            )
            for member, params in (("aa", {**DOS, "seed": seed + 100_000}), ("worse", DOS_WORSE)):
                body = {"name": member, "kind": "dos", "params": params}
                _ok(client.post(f"/v1/models/{name}/challengers", json=body), 201)
            served = ["original"]
            for start in range(0, n, batch):
                body = b"\n".join(lines[i] for i in order[start : start + batch]) + b"\n"
                _ok(
                    client.post(
                        f"/v1/models/{name}/feedback",
                        content=body,
                        headers={"content-type": "text/plain"},
                    )
                )
                member = _ok(client.get(f"/v1/models/{name}"))["member"]
                if member != served[-1]:
                    served.append(member)
            info = _ok(client.get(f"/v1/models/{name}"))
            challengers = _ok(client.get(f"/v1/models/{name}/challengers"))["challengers"]
            comparisons = {c["name"]: c["comparison"] for c in challengers}
            runs.append(
                {
                    "seed": seed,
                    "examples": n,
                    "promotions": info["promotions"],
                    "promoted": served[1:],
                    "detections": info["drift"]["detections"],
                    "accuracy": info["metrics"]["accuracy"],
                    "final_comparisons": {
                        k: {f: v[f] for f in ("examples", "mean_difference", "verdict")}
                        for k, v in comparisons.items()
                        if v is not None
                    },
                }
            )
            _ok(client.delete(f"/v1/models/{name}"), 204)
            if (seed + 1) % 10 == 0:
                log(f"  seed {seed + 1}/{seeds}: {time.perf_counter() - started:.0f} s")

    def interval(k: int, trials: int, confidence: float = 0.95) -> list[float]:
        """Clopper-Pearson interval of a binomial proportion."""
        a = (1 - confidence) / 2
        low = 0.0 if k == 0 else float(beta.ppf(a, k, trials - k + 1))
        high = 1.0 if k == trials else float(beta.ppf(1 - a, k + 1, trials - k))
        return [low, high]

    promoted = [r for r in runs if r["promotions"]]
    by_member: dict[str, int] = {}
    for r in runs:
        for member in r["promoted"]:
            by_member[member] = by_member.get(member, 0) + 1
    detections = sum(r["detections"] for r in runs)
    examples = sum(r["examples"] for r in runs)
    return {
        "stream": "a9a training + test sets (48,842 examples), a random order per seed",
        "seeds": seeds,
        "examples_per_seed": n,
        "batch": batch,
        "champion": {"kind": "dos", **DOS, "seed": "the run's seed"},
        "aa_challenger": {"kind": "dos", **DOS, "seed": "the run's seed + 100000"},
        "worse_challenger": {"kind": "dos", **DOS_WORSE},
        "runs_with_a_promotion": len(promoted),
        "runs_with_a_promotion_interval_95": interval(len(promoted), seeds),
        "promotions_by_member": by_member,
        "detections": detections,
        "detections_per_100k_examples": detections / examples * 1e5,
        "runs_with_a_detection": sum(r["detections"] > 0 for r in runs),
        "worse_final_verdicts": _count(
            r["final_comparisons"].get("worse", {}).get("verdict") for r in runs
        ),
        "aa_final_verdicts": _count(
            r["final_comparisons"].get("aa", {}).get("verdict") for r in runs
        ),
        "mean_accuracy": statistics.mean(r["accuracy"] for r in runs),
        "runs": runs,
    }


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


# -- 3. cost ------------------------------------------------------------------------------
COST_PARAMS = {"rank": 16, "mode": "pa1", "C": 0.01}


def own_learn_us(X, y, repeats: int = 5) -> float:
    """Median CPU microseconds per example of the DoS estimator's ``learn_many`` (core)."""
    from scipy.sparse import csr_matrix

    from core.dos import DoSClassifier

    batch = csr_matrix(X)  # (a9a's rows as the service holds them: sparse)
    samples = []
    for repeat in range(repeats + 1):
        model = DoSClassifier(n_features=X.shape[1], **COST_PARAMS, seed=repeat)
        timing = timed(lambda model=model: model.learn_many(batch, y))
        if repeat:  # (the first compiles or loads the kernels)
            samples.append(timing.cpu / len(y))
    return statistics.median(samples) * 1e6


def cost_experiment(
    rounds: int = 5, bulk_examples: int = 4000, singles: int = 300, log=print
) -> dict:
    """Feedback and predict through uvicorn: models with 0, 1 and 3 challengers, rounds
    interleaved; the server's CPU seconds and the wall time per example."""
    from core.datasets import data_dir, load_svmlight

    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    X, y = X.toarray(), y.astype(np.int64)
    groups = {0: "alone", 1: "one", 3: "three"}
    samples: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    rows = [{"x": x.tolist(), "label": int(t)} for x, t in zip(X, y, strict=True)]
    instances = [{"x": x.tolist()} for x in X[:2000]]
    with tempfile.TemporaryDirectory(prefix="experiments-cost-") as directory:
        env = {
            "LORENTZTRON_SNAPSHOT_DIR": directory,
            "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
            "LORENTZTRON_LOG_LEVEL": "warning",
        }
        with (
            ServiceProcess(env).start() as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            for count, name in groups.items():
                body = {"name": name, "kind": "dos", "input": {"n_features": 123},
                        "params": {**COST_PARAMS, "seed": 0}}  # fmt: skip
                _ok(http.post("/v1/models", json=body), 201)
                for k in range(count):
                    challenger = {
                        "name": f"c{k}",
                        "kind": "dos",
                        "params": {**COST_PARAMS, "seed": k + 1},
                    }
                    _ok(http.post(f"/v1/models/{name}/challengers", json=challenger), 201)
                _ok(http.post(f"/v1/models/{name}/feedback", json={"examples": rows[:200]}))
                _ok(http.post(f"/v1/models/{name}/predict", json={"instances": instances[:100]}))
            position = 200
            for repeat in range(rounds):
                for count, name in groups.items():
                    start = position % (len(rows) - bulk_examples - singles)
                    bulk = rows[start : start + bulk_examples]
                    cpu, wall = server.cpu_seconds(), time.perf_counter()
                    for k in range(0, bulk_examples, 100):
                        _ok(
                            http.post(
                                f"/v1/models/{name}/feedback", json={"examples": bulk[k : k + 100]}
                            )
                        )
                    add(f"feedback bulk {count}", (server.cpu_seconds() - cpu) / bulk_examples)
                    add(f"feedback bulk {count} wall", (time.perf_counter() - wall) / bulk_examples)
                    single = rows[start + bulk_examples : start + bulk_examples + singles]
                    cpu, wall = server.cpu_seconds(), time.perf_counter()
                    for example in single:
                        _ok(http.post(f"/v1/models/{name}/feedback", json={"examples": [example]}))
                    add(f"feedback single {count}", (server.cpu_seconds() - cpu) / singles)
                    add(f"feedback single {count} wall", (time.perf_counter() - wall) / singles)
                    if count in (0, 3):
                        cpu, wall = server.cpu_seconds(), time.perf_counter()
                        for k in range(0, 2000, 100):
                            _ok(
                                http.post(
                                    f"/v1/models/{name}/predict",
                                    json={"instances": instances[k : k + 100]},
                                )
                            )
                        add(f"predict bulk {count}", (server.cpu_seconds() - cpu) / 2000)
                        add(f"predict bulk {count} wall", (time.perf_counter() - wall) / 2000)
                        cpu, wall = server.cpu_seconds(), time.perf_counter()
                        for instance in instances[:singles]:
                            _ok(
                                http.post(
                                    f"/v1/models/{name}/predict", json={"instances": [instance]}
                                )
                            )
                        add(f"predict single {count}", (server.cpu_seconds() - cpu) / singles)
                        add(f"predict single {count} wall", (time.perf_counter() - wall) / singles)
                position += bulk_examples + singles
                log(f"  cost round {repeat + 1}/{rounds} done")
    own = own_learn_us(X[:4000], y[:4000])
    medians = {key: statistics.median(values) * 1e6 for key, values in samples.items()}
    return {
        "model": {"kind": "dos", "input": {"n_features": 123}, **COST_PARAMS},
        "challengers": "the same spec, seeds 1, 2, 3",
        "data": "a9a training rows as dense JSON (123 numbers each)",
        "rounds": rounds,
        "bulk": {"examples_per_round": bulk_examples, "per_request": 100},
        "single_requests_per_round": singles,
        "own_learn_us_per_example": own,
        "median_us_per_example": medians,
        "samples_seconds_per_example": samples,
    }


# -- the page -----------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def change_table(result: dict) -> str:
    change, batch = result["change"], result["batch"]
    offsets = [o for o in (250, 1000, 2000, 4000, 8000, 16000) if change + o <= result["examples"]]
    head = ["served by", "before"] + [f"+{o:,}" for o in offsets] + ["end", "recovered after"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, curve in result["recent_error"].items():
        points = [curve[change // batch - 1]] + [curve[(change + o) // batch - 1] for o in offsets]
        points.append(curve[-1])
        back = result["recovery_examples"][label]
        back = "not within the run" if back is None else f"{back:,} examples"
        lines.append(f"| {label} | " + " | ".join(_pct(p) for p in points) + f" | {back} |")
    policy = result["policy"]
    lines.append("")
    lines.append(
        f"Drift policy: {policy['detections']} detection(s), the last at example "
        f"{policy['last_detected_at_example']}; {policy['promotions']} promotion(s); "
        f"serving at the end: `{policy['member_at_end']}`; another member serves from example "
        f"{policy['first_batch_served_by_another_member_starts_at']}. `serve: best` served "
        f"the averaged variant for {result['served_by']['serve: best'].count('averaged')} of "
        f"{len(result['served_by']['serve: best'])} batches."
    )
    return "\n".join(lines)


def false_alarm_table(result: dict) -> str:
    low, high = result["runs_with_a_promotion_interval_95"]
    rows = [
        ("seeds (runs)", f"{result['seeds']}"),
        ("examples per run", f"{result['examples_per_seed']:,}"),
        (
            "runs with a promotion (any member)",
            f"{result['runs_with_a_promotion']} of {result['seeds']}",
        ),
        ("95 % Clopper-Pearson interval of that rate", f"[{100 * low:.1f} %, {100 * high:.1f} %]"),
        ("promotions by member", json.dumps(result["promotions_by_member"]) or "{}"),
        ("drift detections (ADWIN, rises only)", f"{result['detections']}"),
        ("detections per 100,000 examples", f"{result['detections_per_100k_examples']:.2f}"),
        ("runs with a detection", f"{result['runs_with_a_detection']}"),
        ("A/A challenger's final verdict", json.dumps(result["aa_final_verdicts"])),
        ("worse challenger's final verdict", json.dumps(result["worse_final_verdicts"])),
        ("champion's mean progressive accuracy", _pct(result["mean_accuracy"])),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def cost_table(result: dict) -> str:
    m = result["median_us_per_example"]
    own = result["own_learn_us_per_example"]
    lines = [
        "| requests | challengers | server CPU µs / example | ratio to alone "
        "| marginal µs per challenger | marginal / own learn | wall examples / s |",
        "|---|---|---|---|---|---|---|",
    ]
    for what in ("feedback bulk", "feedback single"):
        base = m[f"{what} 0"]
        for count in (0, 1, 3):
            cpu = m[f"{what} {count}"]
            marginal = (cpu - base) / count if count else None
            lines.append(
                f"| {what} | {count} | {cpu:.1f} | {cpu / base:.2f} | "
                f"{'' if marginal is None else f'{marginal:.1f}'} | "
                f"{'' if marginal is None else f'{marginal / own:.1f}'} | "
                f"{1e6 / m[f'{what} {count} wall']:,.0f} |"
            )
    for what in ("predict bulk", "predict single"):
        base = m[f"{what} 0"]
        for count in (0, 3):
            cpu = m[f"{what} {count}"]
            lines.append(
                f"| {what} | {count} | {cpu:.1f} | {cpu / base:.2f} | | | "
                f"{1e6 / m[f'{what} {count} wall']:,.0f} |"
            )
    lines.append("")
    lines.append(
        f"The model's own learning time (core `DoSClassifier.learn_many`, rank "
        f"{result['model']['rank']}, a9a): **{own:.2f} µs per example** (median of 5)."
    )
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    batch = result["batch"]
    for label, curve in result["recent_error"].items():
        axes.plot(np.arange(1, len(curve) + 1) * batch, curve, label=label, linewidth=1)
    axes.axvline(result["change"], color="grey", linestyle=":")
    axes.set_xlabel("examples")
    axes.set_ylabel(f"served error, last {result['window']:,}")
    axes.set_title(result["stream"], fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


COMMAND = "cd /work/wt-bench && python -m benchmarks.experiments"


def write(
    results: dict, page: Path = PAGE, json_path: Path = RESULTS, figures: bool = True
) -> None:
    """The JSON beside the page and each part's section of the page (the rest is prose)."""
    old = json.loads(json_path.read_text()) if json_path.exists() else {}
    merged = {**old, **results, "environment": environment("river", "fastapi")}
    json_path.write_text(json.dumps(merged, indent=1) + "\n")
    for stream in ("a9a", "a9a_slow", "mnist"):
        if stream in results:
            png = page.parent / f"experiments_{stream}.png"
            if figures:
                plot(results[stream], png)
            result = results[stream]
            body = f"```\n{COMMAND} --part change\n```\n\n{result['stream']}; service: "
            body += f"{result['service_kind']}; River: {result['river_model']}.\n\n"
            body += change_table(results[stream])
            if figures:
                body += f"\n\n![{stream}]({png.name})"
            replace_section(
                page,
                f"<!-- change-{stream}:begin -->",
                f"<!-- change-{stream}:end -->",
                body,
                HEADER,
            )
    if "false_alarms" in results:
        body = f"```\n{COMMAND} --part false_alarms\n```\n\n" + false_alarm_table(
            results["false_alarms"]
        )
        replace_section(
            page, "<!-- false-alarms:begin -->", "<!-- false-alarms:end -->", body, HEADER
        )
    if "cost" in results:
        body = f"```\n{COMMAND} --part cost\n```\n\n" + cost_table(results["cost"])
        replace_section(page, "<!-- cost:begin -->", "<!-- cost:end -->", body, HEADER)


def run(parts: list[str], quick: bool = False, seeds: int = 50, log=print) -> dict:
    results: dict = {}
    if "change" in parts:
        results["a9a"] = change_experiment("a9a", 4000 if quick else None, log)
        results["a9a_slow"] = change_experiment("a9a", 6000 if quick else None, log, PA_C_SLOW)
        results["mnist"] = change_experiment("mnist", 3000 if quick else 20_000, log)
    if "false_alarms" in parts:
        results["false_alarms"] = false_alarm_experiment(
            3 if quick else seeds, 3000 if quick else None, log=log
        )
    if "cost" in parts:
        kwargs = {"rounds": 1, "bulk_examples": 200, "singles": 20} if quick else {}
        results["cost"] = cost_experiment(**kwargs, log=log)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=("change", "false_alarms", "cost"))
    parser.add_argument("--quick", action="store_true", help="tiny streams; nothing written")
    parser.add_argument("--seeds", type=int, default=50)
    args = parser.parse_args()
    parts = args.part or ["change", "false_alarms", "cost"]
    started = time.perf_counter()
    results = run(parts, args.quick, args.seeds)
    if args.quick:
        print(
            json.dumps(
                {
                    k: v.get("recovery_examples", v.get("runs_with_a_promotion"))
                    for k, v in results.items()
                    if isinstance(v, dict)
                },
                indent=1,
            )
        )
    else:
        write(results)
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
