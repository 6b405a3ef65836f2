"""Evidence for a model's members (issue 27): recovery from an abrupt concept change, no false
alarms on stationary streams, and the cost of challengers.

1. **Concept change.** (a) the a9a training stream with its labels flipped after 16,000
   examples (PA-I C = 0.01, and C = 0.0001, slow to unlearn); (b) the MNIST deformation
   stream (``core.datasets.DeformationStream``) with two digit classes swapped halfway,
   chosen by a pilot (``MNIST_PILOT``: pairs and models tried in-process). Each stream, with
   3 seeds (``CHANGE_SEEDS``), feeds through the HTTP API in-process (``TestClient`` on
   ``create_app``) the same model three times: with ``drift: {adwin, on_drift: challenger}``
   and ``promotion: {auto: true}``; without policies; with ``serve: best``; and River's
   ``drift.DriftRetrainingClassifier`` wraps a comparable River PA model on the same stream.
   The served error of each batch is counted from the feedback answers (``results``: the
   champion's live prediction before the update) when the live variant serves, and from the
   difference of the serving variant's progressive counts (``GET /v1/models/{name}``) when
   the averaged one does; the recent error is over the last ``WINDOW`` examples; "recovered
   after" is reported per seed and as the median and range over the seeds.
2. **No false alarms.** (a) 50 seeds of a stationary stream (a random order of a9a's training
   and test sets, 48,842 examples) through the HTTP API, each with an A/A challenger (the
   champion's DoS spec with another ``seed``) and a worse one (a tiny ``C``), auto promotion
   at 0.99 and ADWIN with ``on_drift: challenger``; (b) ``SHORT_SEEDS`` streams of
   ``SHORT_EXAMPLES`` with an A/A challenger, at confidence 0.99 and 0.95, driven in-process
   (``in_process``: the service's ``LiveModel`` without HTTP or log). Promotions (with their
   Clopper-Pearson interval) and drift detections counted.
3. **Cost.** (a) In-process: ``live.learn`` time per example with 0, 1 and 3 challengers,
   requests of 1 and of 100 examples, against a challenger's own ``Member.learn``
   (``time.perf_counter``, medians of 5); (b) feedback and predict throughput of a model
   with 0, 1 and 3 challengers over real HTTP (``benchmarks.servers.ServiceProcess``): the
   server's CPU time per example.

    .venv/bin/python -m benchmarks.experiments                 # everything: docs/experiments.*
    .venv/bin/python -m benchmarks.experiments --part change   # or false_alarms, cost
    .venv/bin/python -m benchmarks.experiments --quick         # tiny streams; nothing written
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
#: the level it is compared with: the error over this many examples before the change
BEFORE = 4000
A9A_CHANGE = 16_000
#: two frequent, well-learned digits (the pilot: a change that matters), and the model's C
MNIST_SWAP = (0, 1)
MNIST_C = 1e-3
#: the seeds of each change stream (a9a: 0 the file's order, others a permutation; MNIST:
#: the deformation stream's seed)
CHANGE_SEEDS = (0, 1, 2)
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
#: the many short stationary streams (in-process)
SHORT_SEEDS = 1000
SHORT_EXAMPLES = 20_000


# -- data ---------------------------------------------------------------------------------
def a9a_flipped(n: int | None = None, change: int = A9A_CHANGE, seed: int = 0):
    """a9a's training stream, dense (123 columns), labels -1 / +1 flipped from ``change`` on;
    seed 0 in the file's order, another seed in a random order of its own."""
    from core.datasets import data_dir, load_svmlight

    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    if seed:
        order = np.random.default_rng(seed).permutation(X.shape[0])
        X, y = X[order], y[order]
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


# -- the service's model in-process (no HTTP, no log) ---------------------------------
#: the limits of an in-process model: no memory limit to speak of, the service's defaults
IN_PROCESS_LIMITS = (1 << 40, 5000, 50_000)


def in_process(body: dict, challengers: tuple[dict, ...] = (), metrics_window: int = 1000):
    """A ``service.model.live.LiveModel`` built as ``POST /v1/models`` builds it (``body``:
    the create request; policies included) with ``challengers`` (``POST .../challengers``
    bodies) added, without a log: what the service's feedback does after parsing and before
    logging, driven directly."""
    from service.model.group import policy_of
    from service.model.kinds import Limits, plan
    from service.model.live import LiveModel
    from service.model.spec import ChallengerSpec, CreateModel, member_spec

    limits = Limits(*IN_PROCESS_LIMITS)
    spec = CreateModel.model_validate({"name": "m", **body})
    policy = policy_of(spec)
    spec = member_spec(spec)
    live = LiveModel("m", spec, plan(spec, limits), metrics_window, policy=policy)
    for challenger in challengers:
        member = ChallengerSpec.model_validate(challenger)
        own = member.of(spec)
        live.group.add(live.new_member(own, plan(own, limits), member.name))
    return live


def served_errors(live, batch, targets: np.ndarray) -> np.ndarray:
    """``live.learn(batch, targets)``; the 0/1 errors of the member and variant that served
    when the batch arrived (the step of that member, even if the batch promotes another)."""
    champion, variant = live.group.champion, live.group.variant
    steps = []
    learn = champion.learn

    def recorded(b, t):
        step = learn(b, t)
        steps.append(step)
        return step

    champion.learn = recorded  # (an instance attribute over the method, for this batch)
    try:
        live.learn(batch, targets)
    finally:
        del champion.learn
    return steps[0].errors[variant]


# -- 1. concept change --------------------------------------------------------------------
def recent(errors: list[int]) -> np.ndarray:
    """The recent error after each batch: over the last WINDOW examples (fewer at first)."""
    k = WINDOW // BATCH
    counts = np.cumsum([0, *errors])
    ends = np.arange(1, len(errors) + 1)
    starts = np.maximum(ends - k, 0)
    return (counts[ends] - counts[starts]) / ((ends - starts) * BATCH)


def level_before(curve: np.ndarray, change: int) -> float:
    """The error over the last BEFORE examples before the change (fewer if the stream is
    shorter): the mean of the non-overlapping windows that end there."""
    ends = [change - k * WINDOW for k in range(BEFORE // WINDOW) if change - k * WINDOW >= WINDOW]
    return float(np.mean([curve[end // BATCH - 1] for end in ends]))


def recovery(curve: np.ndarray, change: int) -> int | None:
    """Examples after the change until the recent error, over a window wholly after it, is
    back within TOLERANCE of its level over the BEFORE examples before it (None: never)."""
    before = level_before(curve, change)
    for b in range((change + WINDOW) // BATCH - 1, len(curve)):
        if curve[b] <= before + TOLERANCE:
            return (b + 1) * BATCH - change
    return None


def change_experiment(
    stream: str, n: int | None = None, log=print, C: float = PA_C, seed: int = 0
) -> dict:
    """One concept-change stream (of ``seed``) through the three service models and River's
    wrappers (PA-I of aggressiveness ``C`` in both)."""
    if stream == "a9a":
        change = A9A_CHANGE if n is None else n // 2  # (the quick run flips halfway)
        X, y = a9a_flipped(n, change, seed)
        spec = {"kind": "linear-pa", "input": {"n_features": 123}}
        what = f"a9a training stream, labels flipped after {change:,} examples"
    else:
        n = n or 20_000
        X, y = mnist_swapped(n, seed)
        change = n // 2
        spec = {"kind": "linear-pa", "input": {"n_features": 784}, "classes": list(range(10))}
        a, b = MNIST_SWAP
        what = f"MNIST deformation stream, digits {a} and {b} swapped after {change:,} examples"
    what += f" (seed {seed})"
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
        challengers = _ok(client.get(f"/v1/models/{policy.name}/challengers"))["challengers"]
    log(f"  {stream} seed {seed}: service models {time.perf_counter() - started:.0f} s")
    rows = {label: m.errors for label, m in models.items()}
    rows["no policy, its averaged variant"] = models["no policy"].averaged_errors
    multiclass = stream != "a9a"
    for detector in ("ddm", "adwin"):
        started = time.perf_counter()
        rows[f"River DriftRetrainingClassifier ({detector})"] = river_errors(
            X[:n], y[:n], detector, multiclass, C
        )
        log(f"  {stream} seed {seed}: River {detector} {time.perf_counter() - started:.0f} s")
    members = policy.members
    switched = next((k for k, m in enumerate(members) if m != "original"), None)
    curves = {label: recent(errors) for label, errors in rows.items()}
    return {
        "stream": what,
        "seed": seed,
        "examples": n,
        "change": change,
        "batch": BATCH,
        "window": WINDOW,
        "C": C,
        "service_kind": f"linear-pa (pa1, C={C:g}, averaging interval {AVERAGING['interval']})"
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
            "challengers_at_end": {
                c["name"]: c["comparison"]
                and {k: c["comparison"][k] for k in ("examples", "mean_difference", "verdict")}
                for c in challengers
            },
        },
    }


def _spread(values: list[int | None]) -> dict:
    """Median and range of recoveries (None, never within the run, counts as the longest)."""
    key = sorted(values, key=lambda v: float("inf") if v is None else v)
    return {"median": key[len(key) // 2], "min": key[0], "max": key[-1], "values": values}


def change_seeds(
    stream: str, n: int | None = None, log=print, C: float = PA_C, seeds=CHANGE_SEEDS
) -> dict:
    """``change_experiment`` for each seed: the first seed's run in full (its curves are the
    table's and the figure's), the others' recoveries and policy outcomes, and per row the
    median and range of "recovered after" over the seeds."""
    runs = [change_experiment(stream, n, log, C, seed) for seed in seeds]
    result = dict(runs[0])
    result["seeds"] = list(seeds)
    result["per_seed"] = [
        {
            "seed": r["seed"],
            "recovery_examples": r["recovery_examples"],
            "before": {
                label: level_before(np.asarray(c), r["change"])
                for label, c in r["recent_error"].items()
            },
            "end": {label: c[-1] for label, c in r["recent_error"].items()},
            "policy": r["policy"],
        }
        for r in runs
    ]
    result["recovery_over_seeds"] = {
        label: _spread([r["recovery_examples"][label] for r in runs])
        for label in result["recovery_examples"]
    }
    return result


#: the MNIST variants of the pilot: (label, classes swapped, the model's create request)
MNIST_PILOT = (
    ("linear-pa C=0.01, 4<->9 (first round)", (4, 9), {"kind": "linear-pa", "C": 0.01}),
    ("linear-pa C=0.01, 0<->1", (0, 1), {"kind": "linear-pa", "C": 0.01}),
    ("linear-pa C=0.01, 3<->8", (3, 8), {"kind": "linear-pa", "C": 0.01}),
    ("linear-pa C=1e-3, 0<->1 (chosen)", (0, 1), {"kind": "linear-pa", "C": 1e-3}),
    ("linear-pa C=1e-3, 3<->8", (3, 8), {"kind": "linear-pa", "C": 1e-3}),
    ("linear-pa C=1e-4, 0<->1", (0, 1), {"kind": "linear-pa", "C": 1e-4}),
    ("linear-pa C=1e-4, 3<->8", (3, 8), {"kind": "linear-pa", "C": 1e-4}),
    ("dos rank 4 C=0.01, 0<->1", (0, 1), {"kind": "dos", "C": 0.01, "rank": 4}),
    ("dos rank 4 C=1e-3, 0<->1", (0, 1), {"kind": "dos", "C": 1e-3, "rank": 4}),
    ("dos rank 4 C=1e-4, 0<->1", (0, 1), {"kind": "dos", "C": 1e-4, "rank": 4}),
)


def mnist_body(model: dict) -> dict:
    """The create request of a one-vs-one digit model of the pilot's shorthand."""
    params = {k: v for k, v in model.items() if k != "kind"}
    return {
        "kind": model["kind"],
        "input": {"n_features": 784},
        "classes": list(range(10)),
        "params": {"mode": "pa1", **params},
        "averaging": AVERAGING,
    }


def _at(curve: np.ndarray, example: int) -> float:
    """The recent error after the batch ending at ``example`` (the last one if beyond)."""
    return float(curve[min(example // BATCH, len(curve)) - 1])


def pilot_experiment(n: int = 20_000, log=print, variants=MNIST_PILOT) -> dict:
    """The MNIST variants (``MNIST_PILOT``), seed 0, in-process: each model with the drift
    and promotion policies and without; the recent error around the swap and the policy's
    detections and promotions."""
    from core.features import as_batch

    rows = {}
    for label, swap, model in variants:
        started = time.perf_counter()
        X, y = mnist_swapped(n, 0, swap)
        change = n // 2
        body = mnist_body(model)
        models = {
            "policy": in_process({**body, "drift": DRIFT, "promotion": PROMOTION}),
            "none": in_process(body),
        }
        errors = {k: [] for k in models}
        for start in range(0, n, BATCH):
            batch = as_batch(X[start : start + BATCH], 784)
            for key, live in models.items():
                wrong = served_errors(live, batch, y[start : start + BATCH])
                errors[key].append(int(wrong.sum()))
        curves = {k: recent(v) for k, v in errors.items()}
        group = models["policy"].group
        rows[label] = {
            "swap": list(swap),
            "model": body,
            "before": level_before(curves["none"], change),
            "after_1000": {k: _at(c, change + 1000) for k, c in curves.items()},
            "after_2000": {k: _at(c, change + 2000) for k, c in curves.items()},
            "end": {k: float(c[-1]) for k, c in curves.items()},
            "recovery": {k: recovery(c, change) for k, c in curves.items()},
            "detections": group.detections,
            "first_detection": group.drift()["last_detected_at_example"]
            if group.detections == 1
            else None,
            "promotions": group.promotions,
            "member_at_end": group.champion.name,
            "comparisons_at_end": {
                f"{m}/{v}": {k: c[k] for k in ("examples", "mean_difference", "verdict")}
                for m in group.names()
                for v in group.member(m).variants
                if (c := group.comparison(m, v)) is not None
            },
        }
        log(f"  pilot {label}: {time.perf_counter() - started:.0f} s {rows[label]}")
    return {"examples": n, "change": n // 2, "seed": 0, "variants": rows}


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
        "runs_with_a_promotion_interval_95": clopper_pearson(len(promoted), seeds),
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


def clopper_pearson(k: int, trials: int, confidence: float = 0.95) -> list[float]:
    """The Clopper-Pearson interval of a binomial proportion ``k / trials``."""
    from scipy.stats import beta

    a = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, trials - k + 1))
    high = 1.0 if k == trials else float(beta.ppf(1 - a, k + 1, trials - k))
    return [low, high]


def a9a_all():
    """a9a's training and test sets together: (CSR matrix, labels -1 / +1)."""
    import scipy.sparse as sp

    from core.datasets import data_dir, load_svmlight

    parts = [load_svmlight(data_dir() / "a9a" / name, n_features=123) for name in ("a9a", "a9a.t")]
    X = sp.vstack([X for X, _ in parts]).tocsr()
    return X, np.concatenate([y for _, y in parts]).astype(np.int64)


def short_false_alarms(
    seeds: int, n: int, confidence: float, batch: int = BATCH, log=print
) -> dict:
    """Many short stationary streams, in-process (``in_process``: the service's LiveModel
    without HTTP or log): per seed, ``n`` examples of a random order of a9a (train + test),
    the DoS champion with ADWIN (``on_drift: challenger``) and auto promotion at
    ``confidence`` (``min_examples`` as in PROMOTION), and an A/A challenger (another seed).
    Runs with a promotion counted, with their Clopper-Pearson interval."""
    from core.features import as_batch

    X, y = a9a_all()
    started = time.perf_counter()
    promoted, by_member, detections, verdicts = [], {}, 0, {}
    for seed in range(seeds):
        body = {
            "kind": "dos",
            "input": {"n_features": 123},
            "params": {**DOS, "seed": seed},
            "drift": DRIFT,
            "promotion": {**PROMOTION, "confidence": confidence},
        }
        aa = {"name": "aa", "kind": "dos", "params": {**DOS, "seed": seed + 100_000}}
        live = in_process(body, (aa,))
        targets = {label: live.target(label, "label") for label in (-1, 1)}
        order = np.random.default_rng(seed).permutation(X.shape[0])[:n]
        Xs, ys = X[order], np.array([targets[v] for v in y[order]])
        served = ["original"]
        for start in range(0, n, batch):
            live.learn(as_batch(Xs[start : start + batch], 123), ys[start : start + batch])
            if live.group.champion.name != served[-1]:
                served.append(live.group.champion.name)
        group = live.group
        if group.promotions:
            promoted.append({"seed": seed, "promoted": served[1:]})
        for member in served[1:]:
            by_member[member] = by_member.get(member, 0) + 1
        detections += group.detections
        comparison = group.comparison("aa", "live")
        verdict = "serving" if comparison is None else comparison["verdict"]
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        if (seed + 1) % 100 == 0:
            log(f"  {seed + 1}/{seeds} short streams at {confidence}: "
                f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    return {
        "stream": f"{n:,} examples of a random order of a9a (train + test) per seed",
        "seeds": seeds,
        "examples_per_seed": n,
        "batch": batch,
        "confidence": confidence,
        "min_examples": PROMOTION["min_examples"],
        "runs_with_a_promotion": len(promoted),
        "runs_with_a_promotion_interval_95": clopper_pearson(len(promoted), seeds),
        "promoted": promoted,
        "promotions_by_member": by_member,
        "detections": detections,
        "detections_per_100k_examples": detections / (seeds * n) * 1e5,
        "aa_final_verdicts": verdicts,
        "seconds": time.perf_counter() - started,
    }


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


# -- 3. cost ------------------------------------------------------------------------------
COST_PARAMS = {"rank": 16, "mode": "pa1", "C": 0.01}
COST_AVERAGING = {"interval": 1000}
#: the kinds of the in-process measurement: (create request without seed, seeded?)
COST_KINDS = {
    "dos": {"kind": "dos", "params": COST_PARAMS},
    "linear-pa": {"kind": "linear-pa", "params": {"mode": "pa1", "C": 0.01}},
}


def _seeded(kind: str, seed: int) -> dict:
    """The cost model's params of ``kind`` (DoS: with ``seed``; the linear kind has none)."""
    params = dict(COST_KINDS[kind]["params"])
    if kind == "dos":
        params["seed"] = seed
    return params


def comparison_update_us(repeats: int = 5, calls: int = 20_000) -> dict[str, float]:
    """µs of one paired comparison's ``update_many`` (``service.model.group.comparison``, a
    classifier's, at 0.99): per call of 1 value, and per value in calls of 100 (medians)."""
    from service.model.group import comparison

    out = {}
    for size in (1, 100):
        differences, n = np.zeros(size), calls // size if size > 1 else calls
        samples = []
        for _ in range(repeats + 1):
            test = comparison(False, 0.99)
            began = time.perf_counter()
            for _ in range(n):
                test.update_many(differences)
            samples.append((time.perf_counter() - began) / (n * size))
        out[f"per value, calls of {size}"] = statistics.median(samples[1:]) * 1e6
    return out


def precise_cost(
    repeats: int = 5, singles: int = 3000, bulk_requests: int = 200, log=print
) -> dict:
    """In-process (``in_process``: the LiveModel without HTTP, parse or log), per kind: the
    wall time (``time.perf_counter``) of ``live.learn(batch, targets)`` over requests of 1
    example and of 100, with 0, 1 and 3 challengers of the same spec (other seeds), and of
    ``Member.learn`` of the same batches on a challenger (``c0``) learned alone; a fresh
    model per measurement, the measurements of a repeat interleaved, the first repeat a
    warm-up; medians of ``repeats``. a9a rows as dense rows (123 values each, as the service
    holds a JSON dense row)."""
    import gc

    from core.datasets import data_dir, load_svmlight
    from core.features import batch_from_rows, dense_row

    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    X, y = X.toarray(), y.astype(np.int64)
    rows = [dense_row(x, 123) for x in X]
    sizes = {"single": (1, singles), "bulk": (100, bulk_requests)}
    samples: dict[str, list[float]] = {}
    for kind in COST_KINDS:
        for repeat in range(repeats + 1):
            for size, (per, requests) in sizes.items():
                start = (repeat * 7919) % (len(rows) - per * requests)
                batches = [
                    batch_from_rows(rows[start + k * per : start + (k + 1) * per])
                    for k in range(requests)
                ]
                labels = [y[start + k * per : start + (k + 1) * per] for k in range(requests)]
                for count in (0, 1, 3, "member"):
                    challengers = tuple(
                        {
                            "name": f"c{k}",
                            "kind": COST_KINDS[kind]["kind"],
                            "params": _seeded(kind, k + 1),
                            "averaging": COST_AVERAGING,
                        }
                        for k in range(1 if count == "member" else count)
                    )
                    body = {
                        "kind": COST_KINDS[kind]["kind"],
                        "input": {"n_features": 123},
                        "params": _seeded(kind, 0),
                        "averaging": COST_AVERAGING,
                    }
                    live = in_process(body, challengers)
                    to = {label: live.target(label, "label") for label in (-1, 1)}
                    targets = [np.array([to[v] for v in t]) for t in labels]
                    learn = live.learn if count != "member" else live.group.member("c0").learn
                    gc.collect()
                    began = time.perf_counter()
                    for batch, target in zip(batches, targets, strict=True):
                        learn(batch, target)
                    seconds = time.perf_counter() - began
                    if repeat:  # (the first compiles or loads the kernels)
                        key = f"{kind} {size} {count}"
                        samples.setdefault(key, []).append(seconds / (per * requests))
            log(f"  in-process cost {kind}: repeat {repeat}/{repeats}")
    medians = {key: statistics.median(v) * 1e6 for key, v in samples.items()}
    comparison_us = comparison_update_us()
    return {
        "comparison_update_us": comparison_us,
        "kinds": {
            kind: {**spec, "averaging": COST_AVERAGING, "input": {"n_features": 123}}
            for kind, spec in COST_KINDS.items()
        },
        "challengers": "the same spec, seeds 1, 2, 3 (dos; linear-pa has no seed)",
        "data": "a9a training rows as dense rows (123 values each)",
        "requests": {"single": singles, "bulk": f"{bulk_requests} of 100 examples"},
        "repeats": repeats,
        "median_us_per_example": medians,
        "samples_seconds_per_example": samples,
    }


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
    rounds: int = 5,
    bulk_examples: int = 20_000,
    singles: int = 1500,
    predictions: int = 10_000,
    log=print,
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
    instances = [{"x": x.tolist()} for x in X[:predictions]]
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
                        "params": {**COST_PARAMS, "seed": 0},
                        "averaging": COST_AVERAGING}  # fmt: skip
                _ok(http.post("/v1/models", json=body), 201)
                for k in range(count):
                    challenger = {
                        "name": f"c{k}",
                        "kind": "dos",
                        "params": {**COST_PARAMS, "seed": k + 1},
                        "averaging": COST_AVERAGING,
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
                        for k in range(0, predictions, 100):
                            _ok(
                                http.post(
                                    f"/v1/models/{name}/predict",
                                    json={"instances": instances[k : k + 100]},
                                )
                            )
                        cpu = server.cpu_seconds() - cpu
                        add(f"predict bulk {count}", cpu / predictions)
                        add(
                            f"predict bulk {count} wall", (time.perf_counter() - wall) / predictions
                        )
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
        "model": {
            "kind": "dos",
            "input": {"n_features": 123},
            **COST_PARAMS,
            "averaging": COST_AVERAGING,
        },
        "challengers": "the same spec, seeds 1, 2, 3",
        "data": "a9a training rows as dense JSON (123 numbers each)",
        "rounds": rounds,
        "bulk": {"examples_per_round": bulk_examples, "per_request": 100},
        "predictions_per_round": predictions,
        "single_requests_per_round": singles,
        "own_learn_us_per_example": own,
        "median_us_per_example": medians,
        "samples_seconds_per_example": samples,
    }


# -- the page -----------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _examples(value: int | None) -> str:
    return "never" if value is None else f"{value:,}"


def change_table(result: dict) -> str:
    """The first seed's recent error around the change, per configuration, and the
    recoveries of every seed (median and range)."""
    change, batch = result["change"], result["batch"]
    offsets = [o for o in (250, 1000, 2000, 4000, 8000, 16000) if change + o <= result["examples"]]
    seeds = result.get("seeds", [result.get("seed", 0)])
    head = ["served by", f"before (last {BEFORE:,})"] + [f"+{o:,}" for o in offsets] + ["end"]
    head += [f"recovered after (seed {seeds[0]})", f"median [range], {len(seeds)} seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    spreads = result.get("recovery_over_seeds", {})
    for label, curve in result["recent_error"].items():
        points = [level_before(np.asarray(curve), change)]
        points += [curve[(change + o) // batch - 1] for o in offsets]
        points.append(curve[-1])
        back = _examples(result["recovery_examples"][label])
        spread = spreads.get(label)
        over = (
            f"{_examples(spread['median'])} [{_examples(spread['min'])}, "
            f"{_examples(spread['max'])}]"
            if spread
            else ""
        )
        lines.append(
            f"| {label} | " + " | ".join(_pct(p) for p in points) + f" | {back} | {over} |"
        )
    lines.append("")
    lines.append(
        f"Values: seed {seeds[0]}'s error over the {BEFORE:,} examples before the change, "
        'then its recent error (last 1,000 examples) after it; "recovered after": examples '
        'after the change until a window wholly after it is within 1 point of "before" '
        "(never: not within the run)."
    )
    lines.append("")
    per_seed = result.get("per_seed", [{"seed": seeds[0], "policy": result["policy"]}])
    lines.append(
        "| seed | detections | last at example | promotions | another member serves from "
        "| serving at the end | the other members at the end (live: paired examples, mean "
        "difference, verdict) |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for run in per_seed:
        policy = run["policy"]
        others = policy.get("challengers_at_end", {})
        described = "; ".join(
            f"`{name}`: "
            + (
                "none"
                if c is None
                else (
                    f"{c['examples']:,}, {c['mean_difference']:+.3f}, {c['verdict']}"
                    if c["mean_difference"] is not None
                    else f"{c['examples']:,}, -, {c['verdict']}"
                )
            )
            for name, c in others.items()
        )
        start = policy["first_batch_served_by_another_member_starts_at"]
        lines.append(
            f"| {run['seed']} | {policy['detections']} | "
            f"{_examples(policy['last_detected_at_example']) if policy['detections'] else '-'} | "
            f"{policy['promotions']} | {'-' if start is None else f'{start:,}'} | "
            f"`{policy['member_at_end']}` | {described or '-'} |"
        )
    lines.append("")
    served = result["served_by"]["serve: best"]
    lines.append(
        f"`serve: best` served the averaged variant for {served.count('averaged')} of "
        f"{len(served)} batches (seed {seeds[0]})."
    )
    return "\n".join(lines)


def pilot_table(result: dict) -> str:
    """The MNIST pilot: per variant, the error around the swap and what the policy did."""
    lines = [
        f"| variant | before (last {BEFORE:,}) | +1,000 | +2,000 | end | recovered after "
        "| detections "
        "| promotions | drift challenger at the end (live: paired examples, mean difference, "
        "verdict) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, row in result["variants"].items():
        drift = row["comparisons_at_end"].get("drift/live")
        said = (
            "-"
            if drift is None
            else f"{drift['examples']:,}, {drift['mean_difference']:+.3f}, {drift['verdict']}"
        )
        lines.append(
            f"| {label} | {_pct(row['before'])} | {_pct(row['after_1000']['none'])} | "
            f"{_pct(row['after_2000']['none'])} | {_pct(row['end']['none'])} | "
            f"{_examples(row['recovery']['none'])} | {row['detections']} | {row['promotions']} "
            f"| {said} |"
        )
    lines.append("")
    lines.append(
        "The error columns are the model without policies (the model with them served the same "
        "member throughout, so the same figures whenever no promotion happened)."
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


def short_false_alarm_table(results: dict) -> str:
    """The many short stationary streams, a column per confidence."""
    runs = list(results.values())
    rows = [
        ("seeds (runs)", lambda r: f"{r['seeds']:,}"),
        ("examples per run (batches of)", lambda r: f"{r['examples_per_seed']:,} ({r['batch']})"),
        ("min_examples", lambda r: f"{r['min_examples']:,}"),
        ("runs with a promotion (any member)", lambda r: f"{r['runs_with_a_promotion']}"),
        (
            "95 % Clopper-Pearson interval of that rate",
            lambda r: "[{:.2f} %, {:.2f} %]".format(
                *(100 * v for v in r["runs_with_a_promotion_interval_95"])
            ),
        ),
        ("promotions by member", lambda r: json.dumps(r["promotions_by_member"])),
        (
            "drift detections (per 100,000 examples)",
            lambda r: f"{r['detections']} ({r['detections_per_100k_examples']:.2f})",
        ),  # fmt: skip
        ("A/A challenger's final verdict", lambda r: json.dumps(r["aa_final_verdicts"])),
        ("run time", lambda r: f"{r['seconds']:.0f} s"),
    ]
    head = "| measure | " + " | ".join(f"confidence {r['confidence']}" for r in runs) + " |"
    lines = [head, "|---|" + "---|" * len(runs)]
    lines += [f"| {name} | " + " | ".join(f(r) for r in runs) + " |" for name, f in rows]
    return "\n".join(lines)


def precise_cost_table(result: dict) -> str:
    """In-process learning time per example: alone, with challengers, the marginal cost of
    one challenger and a challenger's own ``Member.learn``."""
    m = result["median_us_per_example"]
    lines = [
        "| kind | request | model alone | with 1 | with 3 | marginal per challenger (1; 3) "
        "| member.learn alone | marginal / member.learn (1; 3) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in result["kinds"]:
        for size, what in (("single", "1 example"), ("bulk", "100 examples")):
            alone, one, three = (m[f"{kind} {size} {c}"] for c in (0, 1, 3))
            member = m[f"{kind} {size} member"]
            first, each = one - alone, (three - alone) / 3
            lines.append(
                f"| {kind} | {what} | {alone:.2f} | {one:.2f} | {three:.2f} | "
                f"{first:.2f}; {each:.2f} | {member:.2f} | "
                f"{first / member:.2f}; {each / member:.2f} |"
            )
    lines.append("")
    comparison = result.get("comparison_update_us", {})
    if comparison:
        lines.append(
            "One paired comparison's `update_many` (a challenger has two, its live and averaged "
            f"variants): {comparison['per value, calls of 1']:.2f} µs for 1 value, "
            f"{comparison['per value, calls of 100']:.3f} µs per value in calls of 100."
        )
        lines.append("")
    lines.append(
        "µs of wall time per example (`time.perf_counter`), median of "
        f"{result['repeats']} repeats; {result['requests']['single']:,} single-example requests "
        f"and {result['requests']['bulk']} per measurement."
    )
    return "\n".join(lines)


def cost_table(result: dict) -> str:
    m = result["median_us_per_example"]
    own = result["own_learn_us_per_example"]
    lines = [
        "| requests | challengers | server CPU µs / example | ratio to alone "
        "| marginal µs per challenger | wall examples / s |",
        "|---|---|---|---|---|---|",
    ]
    for what in ("feedback bulk", "feedback single"):
        base = m[f"{what} 0"]
        for count in (0, 1, 3):
            cpu = m[f"{what} {count}"]
            marginal = (cpu - base) / count if count else None
            lines.append(
                f"| {what} | {count} | {cpu:.1f} | {cpu / base:.2f} | "
                f"{'' if marginal is None else f'{marginal:.1f}'} | "
                f"{1e6 / m[f'{what} {count} wall']:,.0f} |"
            )
    for what in ("predict bulk", "predict single"):
        base = m[f"{what} 0"]
        for count in (0, 3):
            cpu = m[f"{what} {count}"]
            lines.append(
                f"| {what} | {count} | {cpu:.1f} | {cpu / base:.2f} | | "
                f"{1e6 / m[f'{what} {count} wall']:,.0f} |"
            )
    lines.append("")
    lines.append(
        f"For scale: the core estimator's own `DoSClassifier.learn_many` (rank "
        f"{result['model']['rank']}, no averaging, a9a as sparse rows) takes {own:.2f} µs "
        "per example (CPU time, median of 5)."
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


#: what a user runs from the repository root
COMMAND = ".venv/bin/python -m benchmarks.experiments"


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
    if "mnist_pilot" in results:
        body = f"```\n{COMMAND} --part change\n```\n\n" + pilot_table(results["mnist_pilot"])
        replace_section(
            page, "<!-- mnist-pilot:begin -->", "<!-- mnist-pilot:end -->", body, HEADER
        )
    if "false_alarms" in results:
        body = f"```\n{COMMAND} --part false_alarms\n```\n\n" + false_alarm_table(
            results["false_alarms"]
        )
        replace_section(
            page, "<!-- false-alarms:begin -->", "<!-- false-alarms:end -->", body, HEADER
        )
    if "false_alarms_short" in results:
        body = f"```\n{COMMAND} --part false_alarms\n```\n\n"
        body += short_false_alarm_table(results["false_alarms_short"])
        begin, end = "<!-- false-alarms-short:begin -->", "<!-- false-alarms-short:end -->"
        replace_section(page, begin, end, body, HEADER)
    if "cost_in_process" in results:
        body = f"```\n{COMMAND} --part cost\n```\n\n"
        body += precise_cost_table(results["cost_in_process"])
        begin, end = "<!-- cost-in-process:begin -->", "<!-- cost-in-process:end -->"
        replace_section(page, begin, end, body, HEADER)
    if "cost" in results:
        body = f"```\n{COMMAND} --part cost\n```\n\n" + cost_table(results["cost"])
        replace_section(page, "<!-- cost:begin -->", "<!-- cost:end -->", body, HEADER)


def run(parts: list[str], quick: bool = False, seeds: int = 50, log=print) -> dict:
    results: dict = {}
    if "change" in parts:
        seeds = CHANGE_SEEDS[:1] if quick else CHANGE_SEEDS
        results["a9a"] = change_seeds("a9a", 4000 if quick else None, log, PA_C, seeds)
        results["a9a_slow"] = change_seeds("a9a", 6000 if quick else None, log, PA_C_SLOW, seeds)
        results["mnist_pilot"] = pilot_experiment(3000 if quick else 20_000, log)
        results["mnist"] = change_seeds("mnist", 3000 if quick else 20_000, log, MNIST_C, seeds)
    if "false_alarms" in parts:
        results["false_alarms"] = false_alarm_experiment(
            3 if quick else seeds, 3000 if quick else None, log=log
        )
        results["false_alarms_short"] = {
            str(confidence): short_false_alarms(
                20 if quick else SHORT_SEEDS, 3000 if quick else SHORT_EXAMPLES, confidence, log=log
            )
            for confidence in (0.99, 0.95)
        }
    if "cost" in parts:
        quick_precise = {"repeats": 1, "singles": 50, "bulk_requests": 5} if quick else {}
        results["cost_in_process"] = precise_cost(**quick_precise, log=log)
        kwargs = {"rounds": 1, "bulk_examples": 200, "singles": 20, "predictions": 200}
        results["cost"] = cost_experiment(**(kwargs if quick else {}), log=log)
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
