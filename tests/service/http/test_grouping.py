"""Feedback learned on the event loop (``service.http.grouping``): a small request of a free model
is learned there and answered once an fsync shared with the requests learned meanwhile has
made it durable; each answer is the one it would get alone. (The groups that handler
threads learn: ``tests/service/http/test_fastpath.py``.)"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

from core.registry import state_digest
from service.config import Settings
from service.durability.feedback_log import LogUnavailable, decode_record
from service.http import grouping
from service.http.errors import status_of
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for


def bodies(n: int, seed: int = 0) -> list[tuple[bytes, int]]:
    """Feedback bodies and their expected statuses: every fourth has an unknown label."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = rng.standard_normal(4).round(3).tolist()
        label = "z" if i % 4 == 3 else ("a" if rng.random() < 0.5 else "b")
        out.append(
            (
                json.dumps({"examples": [{"x": x, "label": label}]}).encode(),
                422 if label == "z" else 200,
            )
        )
    return out


@pytest.fixture
def clients(tmp_path):
    made = [
        TestClient(create_app(Settings(snapshot_dir=tmp_path / name, snapshot_interval=3600)))
        for name in ("a", "b")
    ]
    with made[0], made[1]:
        for client in made:
            create(client, n_features=4, params={"rank": 2, "seed": 1}, classes=["a", "b"])
            first = bodies(1, seed=99)[0][0]  # (opens the log's segment, in a thread)
            assert client.post("/v1/models/m/feedback", content=first).status_code == 200
        yield made


def burst(client, payloads: list[bytes]) -> list:
    """The outcomes of feedback requests submitted together on the app's event loop."""
    components = client.app.state.components
    live = components.models.get("m")

    async def submit_all():
        return await asyncio.gather(
            *(components.groups.submit(live, "application/json", p) for p in payloads),
            return_exceptions=True,
        )

    return client.portal.call(submit_all)


def status(outcome) -> int:
    return 200 if isinstance(outcome, dict) else status_of(outcome.code)


class Syncs:
    """Counts the log's syncs and the threads they run in."""

    def __init__(self, monkeypatch, live, fail: bool = False):
        self.threads: list[int] = []
        original = live.journal.log.sync

        def sync(model, position):
            self.threads.append(threading.get_ident())
            if fail:
                raise LogUnavailable("disk gone")
            return original(model, position)

        monkeypatch.setattr(live.journal.log, "sync", sync)


def loop_thread(client) -> int:
    return client.portal.call(lambda: threading.get_ident())


def test_a_burst_is_learned_on_the_loop_with_one_fsync_and_answered_as_alone(clients, monkeypatch):
    """16 requests submitted together: learned on the loop (no handler thread), made
    durable by one fsync there; each answered as alone (the invalid ones their 422, the
    valid ones consecutive versions), the model as the same examples learned one by one,
    one log record per valid request in that order."""
    client, reference = clients
    live = client.app.state.components.models.get("m")
    syncs = Syncs(monkeypatch, live)
    hops = []
    executor = client.app.state.components.executor
    submit = executor.submit
    monkeypatch.setattr(executor, "submit", lambda *a, **k: (hops.append(a), submit(*a, **k))[1])
    sent = bodies(16)
    outcomes = burst(client, [body for body, _ in sent])
    assert [status(o) for o in outcomes] == [expected for _, expected in sent]
    assert hops == [] and syncs.threads == [loop_thread(client)]  # one fsync, on the loop
    versions = [o["version"] for o in outcomes if isinstance(o, dict)]
    assert versions == list(range(versions[0], versions[0] + len(versions)))
    valid = [body for body, expected in sent if expected == 200]
    for body in valid:
        assert reference.post("/v1/models/m/feedback", content=body).status_code == 200
    other = reference.app.state.components.models.get("m")
    assert (
        live.champion.counters.examples_learned
        == other.champion.counters.examples_learned
        == len(valid) + 1
    )
    assert state_digest(live.estimator.get_state()) == state_digest(other.estimator.get_state())
    records = [decode_record(r) for _, r in live.journal.log.read_after("m", 0)]
    assert [b.values.tolist() for b, _, _ in records[1:]] == [
        [v for v in json.loads(body)["examples"][0]["x"] if v != 0] for body in valid
    ]
    assert live.journal.log._state("m").synced == len(valid) + 1  # durable before answered
    queue = client.app.state.components.groups._queues[live.incarnation]
    assert queue.commit.waiting == [] and queue.idle()


def test_a_failed_fsync_on_the_loop_refuses_every_request_it_was_to_make_durable(
    clients, monkeypatch
):
    client, _ = clients
    live = client.app.state.components.models.get("m")
    Syncs(monkeypatch, live, fail=True)
    sent = bodies(4)  # valid, valid, valid, unknown label
    outcomes = burst(client, [body for body, _ in sent])
    assert [(status(o), getattr(o, "code", None)) for o in outcomes] == [
        (503, "log_unavailable")
    ] * 3 + [(422, "unknown_label")]
    # learned and logged (the log and the model agree), but not acknowledged
    assert (
        live.champion.counters.examples_learned == 4
        and len(list(live.journal.log.read_after("m", 0))) == 4
    )


def test_a_slow_fsync_sends_the_next_ones_to_a_thread_for_a_while(clients, monkeypatch):
    """An fsync on the loop slower than ``SLOW_FSYNC`` sends the next ones to a handler
    thread for ``SLOW_BACKOFF`` seconds (a slow disk must not hold up the loop); then the
    loop syncs again."""
    client, _ = clients
    live = client.app.state.components.models.get("m")
    syncs = Syncs(monkeypatch, live)
    monkeypatch.setattr(grouping, "SLOW_FSYNC", -1.0)  # every fsync is slow
    monkeypatch.setattr(grouping, "SLOW_BACKOFF", 0.5)
    loop = loop_thread(client)
    for round_ in range(3):
        outcomes = burst(client, [body for body, _ in bodies(3, seed=round_)])
        assert [status(o) for o in outcomes] == [200] * 3
    assert syncs.threads[0] == loop and len(syncs.threads) == 3
    assert all(t != loop for t in syncs.threads[1:])  # within the back-off: a thread
    time.sleep(0.6)
    burst(client, [bodies(1, seed=7)[0][0]])
    assert syncs.threads[-1] == loop  # the back-off is over


def test_feedback_to_a_busy_model_waits_in_a_thread_in_arrival_order(clients):
    """A model held by another thread (a snapshot's capture, say): feedback goes to a
    handler thread and waits there, in arrival order, while the loop serves on."""
    client, _ = clients
    live = client.app.state.components.models.get("m")
    answers: dict[int, object] = {}
    sent = [body for body, expected in bodies(8) if expected == 200][:3]

    def post(k):
        answers[k] = client.post("/v1/models/m/feedback", content=sent[k])

    threads = []
    with live.lock.read():
        for k in range(3):
            threads.append(threading.Thread(target=post, args=(k,)))
            threads[-1].start()
            wait_for(lambda k=k: _queued(client, live) >= k)
        assert client.get("/healthz").status_code == 200  # the loop is free
        time.sleep(0.05)
        assert answers == {}  # the feedback waits for the model
    for thread in threads:
        thread.join(timeout=20)
    assert [answers[k].status_code for k in range(3)] == [200] * 3
    versions = [answers[k].json()["version"] for k in range(3)]
    assert versions == [versions[0], versions[0] + 1, versions[0] + 2]


def _queued(client, live) -> int:
    """Requests of the model behind the one in a handler thread (-1: none in a thread)."""
    queue = client.app.state.components.groups._queues.get(live.incarnation)
    return -1 if queue is None or not queue.busy else len(queue.waiting)


def test_a_client_that_goes_away_before_the_fsync_leaves_the_others_answered(clients):
    client, _ = clients
    components = client.app.state.components
    live = components.models.get("m")
    payloads = [body for body, expected in bodies(8) if expected == 200][:3]

    async def one_cancelled():
        tasks = [
            asyncio.ensure_future(components.groups.submit(live, "application/json", p))
            for p in payloads
        ]
        await asyncio.sleep(0)  # each is learned and waits for the fsync
        tasks[1].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    before = live.champion.counters.examples_learned
    outcomes = client.portal.call(one_cancelled)
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert [o["version"] for o in (outcomes[0], outcomes[2])] == [before + 1, before + 3]
    assert (
        live.champion.counters.examples_learned == before + 3
    )  # learned (and durable), only not answered
    queue = components.groups._queues[live.incarnation]
    assert queue.commit.waiting == []


def test_a_keyed_retry_after_a_failed_fsync_is_answered_once(clients, monkeypatch):
    """The file log's 503 (the record appended and learned, its fsync failed): a retry with
    the same key, once the disk works again, gets the first answer (``Idempotent-Replayed``)
    after the record is made durable, and nothing is learned again."""
    client, _ = clients
    live = client.app.state.components.models.get("m")
    body, _ = bodies(1, seed=5)[0]
    headers = {"Idempotency-Key": "fsync-1"}
    with monkeypatch.context() as broken:
        Syncs(broken, live, fail=True)
        failed = client.post("/v1/models/m/feedback", content=body, headers=headers)
    assert failed.status_code == 503 and failed.json()["error"]["code"] == "log_unavailable"
    learned = live.champion.counters.examples_learned
    syncs = Syncs(monkeypatch, live)
    again = client.post("/v1/models/m/feedback", content=body, headers=headers)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["version"] == live.version and syncs.threads  # made durable first
    assert live.champion.counters.examples_learned == learned
    assert len(list(live.journal.log.read_after("m", 0))) == 2
