"""DELETE under concurrent feedback, with SIGKILL and restart: nothing acknowledged is lost,
nothing deleted comes back.

Each iteration creates the model ``t`` (linear PA over 5 inputs) on a real service process,
starts three threads posting feedback (1 to 3 examples per request), sends ``DELETE`` after
about 0.4 s, and then SIGKILLs the service: after the DELETE's answer on even iterations, a
0 to 60 ms after sending it (mid-deletion) on odd ones. After the restart:

- if the DELETE answered 204, the model is gone (404) and none of its files are left, and no
  feedback request sent after that answer was acknowledged;
- if it answered something else (a refusal), the model is there with every acknowledged
  example learned (``examples_learned`` and the version at least what the
  acknowledgements add up to);
- with no answer (killed mid-deletion), it is either gone, or there with every
  acknowledged example learned.

A model still there is deleted before the next iteration.

    python -m benchmarks.delete_under_feedback --iterations 50            # file log
    python -m benchmarks.delete_under_feedback --iterations 50 --redis    # Redis log

Prints one JSON line per iteration and a summary; exits 1 on a violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from benchmarks.servers import RedisServer, ServiceProcess

SPEC = {"name": "t", "kind": "linear-pa", "input": {"n_features": 5}}


@dataclass
class Feedback:
    """Threads posting feedback to ``t`` until stopped; what was acknowledged, and when."""

    url: str
    acked: list[tuple[int, int]] = field(default_factory=list)  # (examples, version)
    late: list[tuple[float, int]] = field(default_factory=list)  # (sent at, status)
    unexpected: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        with httpx.Client(timeout=10) as client:
            while not self.stop.is_set():
                n = int(rng.integers(1, 4))
                X = rng.standard_normal((n, 5))
                body = {"examples": [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]}
                sent = time.monotonic()
                try:
                    response = client.post(f"{self.url}/v1/models/t/feedback", json=body)
                except httpx.HTTPError:
                    time.sleep(0.01)  # the service is gone (killed)
                    continue
                self.late.append((sent, response.status_code))
                if response.status_code == 200:
                    self.acked.append((n, response.json()["version"]))
                elif response.status_code != 404:
                    self.unexpected.append(f"{response.status_code} {response.text[:200]}")


def leftovers(snapshots: Path) -> list[str]:
    """Files of ``t`` left in the local store, its log or the tombstones."""
    found = []
    for path in (snapshots / "t", snapshots / ".log" / "t", snapshots / ".tombstones" / "t"):
        if path.exists():
            found.append(str(path.relative_to(snapshots)))
    return found


def iteration(
    service: ServiceProcess, number: int, rng: random.Random, snapshots: Path | None
) -> dict:
    created = httpx.post(f"{service.url}/v1/models", json=SPEC, timeout=30)
    if created.status_code != 201:
        raise RuntimeError(f"create answered {created.status_code}: {created.text}")
    feedback = Feedback(service.url)
    threads = [threading.Thread(target=feedback.run, args=(number * 10 + k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.4 + rng.uniform(0.0, 0.1))
    mid_deletion = number % 2 == 1
    status, answered_at = None, None
    if mid_deletion:  # SIGKILL a few milliseconds into the deletion
        request = threading.Thread(target=_delete, args=(service.url, []), daemon=True)
        request.start()
        time.sleep(rng.uniform(0.0, 0.06))
    else:
        answer: list = []
        _delete(service.url, answer)
        status, answered_at = answer[0] if answer else (None, None)
        time.sleep(0.1)  # feedback goes on against the deleted model
    service.kill()
    feedback.stop.set()
    for thread in threads:
        thread.join()
    examples = sum(n for n, _ in feedback.acked)
    version = max((v for _, v in feedback.acked), default=0)
    after = [s for sent, s in feedback.late if answered_at is not None and sent > answered_at]
    service.start()
    info = httpx.get(f"{service.url}/v1/models/t", timeout=10)
    result = {
        "iteration": number,
        "delete": status,
        "mid_deletion": mid_deletion,
        "acked_requests": len(feedback.acked),
        "acked_examples": examples,
        "acked_after_delete": sum(s == 200 for s in after),
        "unexpected": feedback.unexpected[:3],
        "present_after_restart": info.status_code == 200,
        "lost_examples": 0,
        "leftovers": [],
    }
    if info.status_code == 200:
        model = info.json()
        result["lost_examples"] = max(0, examples - model["examples_learned"])
        result["version_behind"] = model["version"] < version
        deleted = httpx.delete(f"{service.url}/v1/models/t", timeout=30)
        if deleted.status_code != 204:
            raise RuntimeError(f"delete after restart answered {deleted.status_code}")
    elif snapshots is not None:
        result["leftovers"] = leftovers(snapshots)
    return result


def _delete(url: str, answer: list) -> None:
    try:
        response = httpx.delete(f"{url}/v1/models/t", timeout=30)
        answer.append((response.status_code, time.monotonic()))
    except httpx.HTTPError:
        pass


def violations(result: dict) -> list[str]:
    found = []
    if result["lost_examples"] or result.get("version_behind"):
        found.append("acknowledged examples lost")
    if result["delete"] == 204 and result["present_after_restart"]:
        found.append("a deleted model came back")
    if result["delete"] not in (None, 204) and not result["present_after_restart"]:
        found.append("a model whose deletion was refused is gone, with what it acknowledged")
    if result["acked_after_delete"]:
        found.append("feedback acknowledged after the deletion")
    if result["unexpected"]:
        found.append(f"unexpected answers {result['unexpected']}")
    if result["leftovers"]:
        found.append(f"files left {result['leftovers']}")
    return found


def run(iterations: int, redis_url: str | None, seed: int = 0) -> dict:
    """The loop on a fresh store; returns the per-iteration results and a summary."""
    rng = random.Random(seed)
    directory = Path(tempfile.mkdtemp(prefix="delete-under-feedback-"))
    env = {
        "LORENTZTRON_SNAPSHOT_DIR": str(directory / "snapshots"),
        "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
        "LORENTZTRON_LOG_LEVEL": "warning",
    }
    if redis_url:
        env |= {"LORENTZTRON_REDIS_URL": redis_url, "LORENTZTRON_REDIS_PREFIX": f"d{seed}"}
    service = ServiceProcess(env)
    results = []
    try:
        service.start()
        for number in range(iterations):
            result = iteration(service, number, rng, None if redis_url else directory / "snapshots")
            result["violations"] = violations(result)
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        service.kill()
        shutil.rmtree(directory, ignore_errors=True)
    statuses: dict[str, int] = {}
    for result in results:
        key = str(result["delete"]) if result["delete"] is not None else "killed mid-deletion"
        statuses[key] = statuses.get(key, 0) + 1
    return {
        "iterations": len(results),
        "store": "redis" if redis_url else "file",
        "delete_answers": statuses,
        "restarts": len(results),
        "acked_examples": sum(r["acked_examples"] for r in results),
        "lost_examples": sum(r["lost_examples"] for r in results),
        "present_after_restart": sum(r["present_after_restart"] for r in results),
        "resurrected": sum(r["delete"] == 204 and r["present_after_restart"] for r in results),
        "acked_after_delete": sum(r["acked_after_delete"] for r in results),
        "violations": [v for r in results for v in r["violations"]],
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--redis", action="store_true", help="start a redis-server and use it")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    redis_url = None
    with contextlib.ExitStack() as stack:
        if args.redis:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="delete-redis-"))
            redis_server = stack.enter_context(RedisServer(Path(directory), appendfsync="always"))
            redis_url = redis_server.start().url
        summary = run(args.iterations, redis_url, args.seed)
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}, indent=2))
    sys.exit(1 if summary["violations"] else 0)


if __name__ == "__main__":
    main()
