"""The live model: norm checks before the log, refused updates replayed the same way, groups
of requests logged together and learned one by one, and the model's story in its state."""

import numpy as np
import pytest

from core.features import batch_from_rows
from core.registry import state_digest
from service.durability.feedback_log import LogUnavailable, decode_record
from service.durability.file_log import FileLog
from service.durability.idempotency import Key, Replayed
from service.durability.journal import Feedback
from service.exceptions import InvalidRequest, ServiceError, Unavailable
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import CreateModel, spec_from_json, spec_to_json
from service.scale import deltas


def _live_with_log(tmp_path, **spec):
    spec = CreateModel.model_validate(
        {"name": "m", "kind": "dos", "params": {"rank": 1}, "input": {"n_features": 2}, **spec}
    )
    checked = plan(spec, Limits(1 << 20, 100, 50_000))
    return LiveModel("m", spec, checked, metrics_window=10, log=FileLog(tmp_path, fsync="none"))


def logged(live):
    return list(live.journal.log.read_after("m", None))


def learned(live) -> int:
    return live.champion.counters.examples_learned


def test_values_whose_norm_overflows_are_refused_before_the_log(tmp_path):
    live = _live_with_log(tmp_path)
    before = state_digest(live.estimator.get_state())
    rows = [(np.array([0, 1]), np.array([1.0, 2.0])), (np.array([0]), np.array([1e200]))]
    with pytest.raises(ServiceError) as refused:
        live.learn(batch_from_rows(rows), np.array([1, 0]))
    assert isinstance(refused.value, InvalidRequest) and "row 1" in refused.value.message
    assert logged(live) == []
    assert state_digest(live.estimator.get_state()) == before and live.version == 0


def test_a_refused_update_is_replayed_the_same_way(tmp_path):
    """A score that overflows float64 is refused by the model after the record is logged: the
    request gets a 422, and replaying the log reproduces the same state and version."""
    live = _live_with_log(tmp_path)
    state = live.estimator.get_state()
    for name in ("live.model.U_", "live.model.V_"):
        state["arrays"][name] = np.array([[1e160, 0.0, 0.0]]) * (name == "live.model.U_")
    live.estimator.set_state(state)
    rows = [(np.array([0, 1]), np.array([1.0, 1.0]))]
    with pytest.raises(ServiceError) as refused:
        live.learn(batch_from_rows(rows), np.array([0]))
    assert refused.value.code == "unlearnable_example"
    live.learn(batch_from_rows([(np.array([1]), np.array([0.5]))]), np.array([1]))
    replayed = _live_with_log(tmp_path)
    replayed.estimator.set_state(state)
    assert replayed.replay(logged(replayed)) == 2
    assert replayed.version == live.version == 2
    assert state_digest(replayed.estimator.get_state()) == state_digest(live.estimator.get_state())


def test_learn_group_appends_together_and_answers_each(tmp_path, monkeypatch):
    """``LiveModel.learn_group``: the records of the valid items go to the log in one append
    before any is learned; each item gets its own outcome (an overflowing one its 422, the
    others their consecutive versions), and the model ends as if they were learned one by
    one. A refused group append answers 503 to each valid item and learns nothing."""
    live = _live_with_log(tmp_path / "a")
    ok = batch_from_rows([(np.array([0]), np.array([1.0]))]), np.array([1])
    other = batch_from_rows([(np.array([1]), np.array([-2.0]))]), np.array([0])
    huge = batch_from_rows([(np.array([0, 1]), np.array([1e200, 1.0]))]), np.array([0])
    appends = []
    original = live.journal.log.append_many

    def counted(model, records, incarnation=None):
        appends.append(len(records))
        return original(model, records, incarnation)

    monkeypatch.setattr(live.journal.log, "append_many", counted)
    outcomes, position = live.learn_group([ok, huge, other])
    assert appends == [2] and position == 2 and live.record.log_position == 2
    assert isinstance(outcomes[1], InvalidRequest)
    assert not outcomes[1].applied
    assert [outcomes[0]["version"], outcomes[2]["version"]] == [1, 2]
    assert learned(live) == 2 and live.record.records_since_snapshot == 2
    reference = _live_with_log(tmp_path / "b")
    for item in (ok, other):
        reference.learn(*item)
    assert state_digest(live.estimator.get_state()) == state_digest(reference.estimator.get_state())
    records = [decode_record(r)[:2] for _, r in logged(live)]
    assert [(b.values.tolist(), t.tolist()) for b, t in records] == [
        (item[0].values.tolist(), item[1].tolist()) for item in (ok, other)
    ]

    def broken(model, records, incarnation=None):
        raise LogUnavailable("disk gone")

    monkeypatch.setattr(live.journal.log, "append_many", broken)
    refused, position = live.learn_group([ok, other])
    assert position is None  # nothing to make durable
    assert all(isinstance(e, Unavailable) for e in refused)
    assert [(e.code, e.applied) for e in refused] == [("log_unavailable", False)] * 2
    assert learned(live) == 2 and live.version == 2


def test_learn_group_that_cannot_wait_does_nothing_unless_model_and_log_are_free(tmp_path):
    """``learn_group(blocking=False)`` (the event loop's): None and nothing logged or learned
    while another thread holds the model or its log, before the log's segment is open, or
    while an append's outcome is uncertain; otherwise the same as a blocking one."""
    live = _live_with_log(tmp_path)
    item = batch_from_rows([(np.array([0]), np.array([1.0]))]), np.array([1])
    assert live.learn_group([item], blocking=False) is None  # the log's segment is not open
    live.learn(*item)
    with live.lock.read():  # a snapshot's capture, say
        assert live.learn_group([item], blocking=False) is None
    with live.journal.log._state("m").lock:  # a trim
        assert live.learn_group([item], blocking=False) is None
    assert live.version == 1 and learned(live) == 1 and len(logged(live)) == 1
    [answer], position = live.learn_group([item], blocking=False)
    assert answer["version"] == 2 and position == 2 == live.record.log_position
    assert not live.lock._writer  # released
    reference = _live_with_log(tmp_path / "reference")
    for _ in range(2):
        reference.learn(*item)
    assert state_digest(live.estimator.get_state()) == state_digest(reference.estimator.get_state())
    replica = LiveModel("m", live.spec, live.plan, 10, log=live.journal.log, learns=False)
    assert replica.learn_group([item], blocking=False) is None  # only logs: never on the loop


def _live(n_features: int, **spec) -> LiveModel:
    spec = CreateModel.model_validate({"name": "m", "input": {"n_features": n_features}, **spec})
    checked = plan(spec, Limits(1 << 27, 1000, 50_000))
    return LiveModel("m", spec, checked, metrics_window=10)


def test_quick_bounds_the_work_learned_on_the_event_loop():
    """``quick``: sparse updates count their non-zeros times the floats per input; a kind
    whose update touches its whole state counts all of it per example; an averaging step
    that falls due counts the whole state once more."""
    one = batch_from_rows([(np.array([0, 5]), np.array([1.0, 2.0]))])
    dense = batch_from_rows([(np.arange(50), np.ones(50))])
    dos = _live(1 << 12, kind="dos", params={"rank": 16})  # ~64 floats per input
    assert dos.quick(one) and dos.quick(dense)
    wide = _live(64, kind="dos", params={"rank": 16}, classes=list(range(40)))
    assert wide.quick(one) and not wide.quick(dense)  # 780 one-vs-one models
    ellipsoid = _live(2000, kind="ellipsoid-perceptron")  # (d + 1)(d + 2) floats per update
    assert not ellipsoid.quick(one)
    assert _live(10, kind="ellipsoid-perceptron").quick(one)
    averaged = _live(1 << 14, kind="dos", params={"rank": 16}, averaging={"interval": 3})
    assert averaged.quick(one)
    averaged.learn(one, np.array([1]))
    averaged.learn(one, np.array([0]))
    assert not averaged.quick(one)  # the third example folds 2^14 x 64 floats
    averaged.learn(one, np.array([1]))
    assert averaged.quick(one)
    replica = LiveModel("m", dos.spec, dos.plan, 10, learns=False)
    assert not replica.quick(one)


class LostReplies:
    """A file log whose next ``lose`` appends land but answer as a Redis log does when its
    reply is lost (``maybe_written``)."""

    def __init__(self, log: FileLog):
        self.log = log
        self.lose = 0

    def __getattr__(self, name):
        return getattr(self.log, name)

    def append_many(self, model, records, incarnation=None):
        positions = self.log.append_many(model, records, incarnation)
        if self.lose:
            self.lose -= 1
            raise LogUnavailable("Timeout reading from socket", maybe_written=True)
        return positions

    def try_append(self, model, records):
        return None  # (a Redis log never appends without waiting)


@pytest.mark.parametrize("between", [False, True])
def test_a_keyed_retry_after_a_lost_reply_is_learned_once(tmp_path, between):
    """An append whose reply was lost answers 503 saying the examples may have been logged;
    the retry with the same key gets the first outcome (``Replayed``) and the record is
    learned exactly once, whether the retry comes first or another request comes between
    (its append learns the lost record first)."""
    log = LostReplies(FileLog(tmp_path, fsync="none"))
    spec = CreateModel.model_validate(
        {"name": "m", "kind": "dos", "params": {"rank": 1}, "input": {"n_features": 2}}
    )
    live = LiveModel("m", spec, plan(spec, Limits(1 << 20, 100, 50_000)), 10, log=log)
    batch = batch_from_rows([(np.array([0]), np.array([1.0]))])
    key = Key("once-1", "f" * 32)
    item = Feedback(batch, np.array([1]), True, key)
    log.lose = 1
    [lost], _ = live.learn_group([item])
    assert isinstance(lost, Unavailable) and lost.code == "log_unavailable" and lost.applied
    assert "may have been logged" in lost.message and "nothing was learned" not in lost.message
    assert learned(live) == 0 and live.journal.uncertain
    if between:
        other = Feedback(batch_from_rows([(np.array([1]), np.array([2.0]))]), np.array([0]))
        [answer], _ = live.learn_group([other])
        assert answer["version"] == 2 and learned(live) == 2
        assert live.claim(key).replay(key)["version"] == 1  # answered before it is learned
        return
    assert live.claim(key) is None  # the lost record is not learned yet: the key is new
    [again], _ = live.learn_group([item])
    live.answers.release(key)
    assert isinstance(again, Replayed) and again["version"] == 1 and again["learned"] == 1
    assert learned(live) == 1 and live.version == 1 and len(logged(live)) == 1
    assert not live.journal.uncertain
    with pytest.raises(InvalidRequest, match="another request"):  # the key, another body
        live.claim(key).replay(Key("once-1", "0" * 32))


def _replica_pair():
    """A learner's live model and a replica's of one spec (as snapshots hold it)."""
    spec = CreateModel.model_validate(
        {
            "name": "m",
            "kind": "dos",
            "params": {"rank": 2, "seed": 3},
            "input": {"n_features": 6},
            "averaging": {"interval": 4},
        }
    )
    spec = spec_from_json(spec_to_json(spec))
    checked = plan(spec, Limits(1 << 20, 100, 50_000))
    learner = LiveModel("m", spec, checked, metrics_window=10)
    replica = LiveModel("m", spec, checked, metrics_window=10, learns=False)
    return learner, replica


def test_a_replica_builds_each_version_aside_and_swaps_it_in():
    """A delta is written into a copy of the served estimator, never into the one that
    predictions read; after the swap the replica holds the learner's state bit for bit,
    version after version (averaging steps included), and the whole version too."""
    learner, replica = _replica_pair()
    axes = deltas.local_axes(learner.estimator, learner.n_features)
    learner.track_changes()
    rng = np.random.default_rng(4)
    for _ in range(6):
        rows = [(np.sort(rng.choice(6, 2, replace=False)), rng.standard_normal(2))]
        learner.learn(batch_from_rows(rows), rng.integers(0, 2, size=1))
        capture, arrays = learner.publication_state(
            False, lambda live: deltas.gather(live.estimator, axes, live.take_changes(), None)
        )
        served = replica.estimator
        before = state_digest(served.get_state())
        written = []

        def write(estimator, arrays=arrays, written=written, served=served, before=before):
            written.append(estimator)
            if len(written) == 1:  # the new version, built while the old one serves
                assert replica.estimator is served
                assert state_digest(served.get_state()) == before
            deltas.apply(estimator, axes, arrays)

        replica.load_delta(write, capture.state, learner.version, None)
        assert written[0] is not served and written[1] is served  # (then the standby)
        assert replica.estimator is written[0] and replica.version == learner.version
        assert state_digest(replica.estimator.get_state()) == state_digest(
            learner.estimator.get_state()
        )
    learner.learn(batch_from_rows([(np.array([1]), np.array([0.5]))]), np.array([1]))
    served = replica.estimator
    replica.load_version(learner.snapshot_state().state, learner.version, None)
    assert replica.estimator is not served and replica.version == learner.version
    assert state_digest(replica.estimator.get_state()) == state_digest(
        learner.estimator.get_state()
    )
