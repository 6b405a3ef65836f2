"""The snapshot writer of a learner publishing by deltas (``service.durability.snapshots``): the
worker's periodic full snapshot of a chained model never waits for, nor holds back, the
publications; the next publication writes it in the background, digest included; a
hand-over's snapshot is still written before it returns. And a snapshot written after a
newer one (the worker's and the route's at once) loses nothing across a crash."""

from __future__ import annotations

import shutil
import threading

import numpy as np

from core.features import batch_from_rows
from service.durability.redis_store import RedisStore
from service.durability.snapshots import SnapshotWriter
from service.durability.store import decode, read_header
from service.http.views import model_info
from service.main import create_app
from service.model import changes
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import CreateModel
from service.ops.metrics import Metrics
from service.scale import deltas
from tests.service.conftest import TestClient, create, wait_for

N_FEATURES = 64


def chained(redis_server) -> tuple[LiveModel, SnapshotWriter, RedisStore]:
    """A model created and published once: its chain started by a full snapshot."""
    spec = CreateModel.model_validate(
        {"name": "m", "kind": "dos", "params": {"rank": 2}, "input": {"n_features": N_FEATURES}}
    )
    checked = plan(spec, Limits(1 << 20, 100, 50_000))
    live = LiveModel("m", spec, checked, metrics_window=10)
    store = RedisStore(redis_server.url, prefix="t")
    writer = SnapshotWriter(store, Metrics(), retention=3, full_every=1000)
    changes.save_held(live, lambda capture: writer.write(live, capture, create=True), model_info)
    learn(live, 0)
    writer.publish(live)  # the chain starts with a full snapshot
    assert isinstance(live.record.publication, deltas.Chain)
    return live, writer, store


def learn(live: LiveModel, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = [(rng.choice(N_FEATURES, 3, replace=False), rng.standard_normal(3)) for _ in range(4)]
    live.learn(batch_from_rows(rows), rng.integers(0, 2, size=4))


def returns_at_once(function) -> bool:
    """Whether ``function()`` returns within 5 s while the caller holds a lock it would
    need (run in a thread: a lock taken twice in one thread never returns)."""
    thread = threading.Thread(target=function, daemon=True)
    thread.start()
    thread.join(5)
    return not thread.is_alive()


def test_the_workers_snapshot_is_written_by_the_next_publication(redis_server):
    live, writer, store = chained(redis_server)
    first = store.latest("m")
    learn(live, 1)
    writer.publish(live)  # a delta
    learn(live, 2)
    # the worker asks while a publication holds the model's snapshot lock: it does not wait
    with live.snapshot_lock:
        assert returns_at_once(lambda: writer.snapshot(live, wait=False))
    assert live.record.publication.full_due and store.latest("m") == first
    writer.publish(live)  # the delta of this version, and the full snapshot in the background
    wait_for(lambda: store.latest("m") == live.version)
    assert not live.record.publication.full_due
    header, state = decode(store.load("m"))
    digest = deltas.RowDigest(live.record.publication.digest.axes)
    assert (
        digest.reset(state["arrays"])
        == int(header["digest"])
        == live.record.publication.digest.total
    )
    assert store.head("m") == live.version  # its delta too: the chain goes on through it


def test_a_full_snapshot_asked_for_once_the_version_is_published(redis_server):
    """Nothing learned since the last delta: the publication writes the full snapshot only."""
    live, writer, store = chained(redis_server)
    learn(live, 1)
    writer.publish(live)
    writer.snapshot(live, wait=False)
    deltas_before = store.deltas_after("m", 0)
    assert writer.publish(live) is not None
    wait_for(lambda: store.latest("m") == live.version)
    assert store.deltas_after("m", 0) == deltas_before
    assert writer.publish(live) is None  # then nothing is due


def test_a_waited_for_snapshot_is_written_before_it_returns(redis_server):
    live, writer, store = chained(redis_server)
    learn(live, 1)
    meta = writer.snapshot(live)  # a hand-over's, a shutdown's
    assert meta is not None and meta.version == live.version == store.latest("m")
    assert "digest" in read_header(store.load("m"))


def test_a_snapshot_written_after_a_newer_one_loses_nothing(settings):
    """Two snapshots of one model written at once (the worker's and the snapshot route's)
    may finish in either order. The newer one trims the log up to its position; the older,
    finishing last, must not become the one a restart loads: that snapshot plus the log
    left would lack the records in between (acknowledged feedback lost)."""

    def feed(client, x):
        body = {"examples": [{"x": x, "label": 1}, {"x": [-v for v in x], "label": -1}]}
        assert client.post("/v1/models/m/feedback", json=body).status_code == 200

    def capture(live, writer):
        with live.snapshot_lock:
            state = live.snapshot_state()
            return state, writer.encode(live, state)

    with TestClient(create_app(settings)) as client:
        create(client)
        models = client.app.state.components.models
        live, writer = models.get("m"), models.writer
        feed(client, [1.0, 0.5, -0.25])
        older = capture(live, writer)
        feed(client, [0.3, -1.0, 2.0])
        newer = capture(live, writer)
        writer.write(live, *newer)  # finishes first: the log is trimmed up to it
        writer.write(live, *older)  # finishes last
        feed(client, [-0.7, 0.2, 1.5])
        expected = client.get("/v1/models/m").json()
        scores = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]})
        # a crash now: what is on disk is all a restart has
        crashed = settings.snapshot_dir.parent / "crashed"
        shutil.copytree(settings.snapshot_dir, crashed)
    with TestClient(create_app(settings.model_copy(update={"snapshot_dir": crashed}))) as client:
        restored = client.get("/v1/models/m").json()
        assert restored["version"] == expected["version"]
        assert restored["examples_learned"] == expected["examples_learned"] == 6
        again = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 2, 3]}]})
        assert again.json()["predictions"][0]["score"] == scores.json()["predictions"][0]["score"]
