"""A model's members as a group, without HTTP: the comparisons against what serves, the
policies, drift challengers, and the group's state."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.features import as_batch
from service.model.group import DRIFT, DRIFT_AGAIN, Drift, Group, Policy, Promotion, dumps, loads
from service.model.kinds import Limits, plan
from service.model.member import Member
from service.model.spec import CreateModel

N = 4


def member(name: str = "original", **spec) -> Member:
    spec = CreateModel.model_validate(
        {"name": "m", "kind": "linear-pa", "input": {"n_features": N}, **spec}
    )
    return Member(spec, plan(spec, Limits(1 << 20, 100, 50_000)), 100, name)


def fresh(champion: Member, name: str) -> Member:
    return member(name, kind=champion.spec.kind, params=champion.spec.params)


def copied(original: Member) -> Member:
    """A member of the same spec loaded with the original's whole state."""
    copy = Member(original.spec, original.plan, 100, original.name)
    copy.set_state(original.estimator.get_state(), original.service_parts())
    return copy


def stream(n: int, seed: int, flip: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return as_batch(X, N), (1 - y) if flip else y


def test_a_second_drift_while_a_drift_member_serves_keeps_the_champion():
    """Labels flip twice: the first detection starts ``drift``, which is promoted; the second
    starts ``drift-2`` beside it, never replacing the member that serves."""
    policy = Policy(
        Promotion(auto=True, confidence=0.95, min_examples=100),
        drift=Drift("adwin", {}, "challenger"),
    )
    slow = {"mode": "pa1", "C": 0.002}
    group = Group(member(params=slow), policy, lambda m, name: member(name, params=slow))
    for k in range(6):
        group.learn(*stream(500, k))
    assert group.detections == 0
    for k in range(6):
        group.learn(*stream(500, 10 + k, flip=True))
    assert group.champion.name == DRIFT and group.detections == 1
    for k in range(8):
        group.learn(*stream(500, 20 + k))
    assert group.detections >= 2
    assert DRIFT in group.names() and DRIFT_AGAIN in group.names()
    assert group.champion.name in (DRIFT, DRIFT_AGAIN)
    assert group.drift_name() != group.champion.name


def test_promotion_restarts_the_comparisons_and_checkpoints_undo_it():
    group = Group(member(averaging={"interval": 10}), Policy(), fresh)
    group.add(member("c1", kind="dos"))
    group.learn(*stream(300, 1))
    assert group.comparison("c1", "live")["examples"] == 300
    checkpoint = group.checkpoint()
    group.promote("c1")
    assert group.champion.name == "c1" and group.promotions == 1
    assert group.comparison("original", "live")["examples"] == 0
    group.rollback(checkpoint)
    assert group.champion.name == "original" and group.promotions == 0
    assert group.comparison("c1", "live")["examples"] == 300
    with pytest.raises(ValueError):
        group.remove("original")
    with pytest.raises(KeyError):
        group.promote("nope")


def test_the_state_round_trips_through_json():
    policy = Policy(Promotion(confidence=0.9), "best", Drift("page_hinkley", {"threshold": 5.0}))
    group = Group(member(averaging={"interval": 10}), policy, fresh)
    group.add(member("c1", kind="dos"))
    group.learn(*stream(400, 2))
    state = loads(dumps(group.get_state()))
    assert json.loads(json.dumps(state)) == state
    again = Group(member(averaging={"interval": 10}), Policy(), fresh)
    again.set_state(state, {m.name: copied(m) for m in group.members()})
    assert again.get_state() == group.get_state()
    batch, y = stream(100, 3)
    group.learn(batch, y)
    again.learn(batch, y)  # (copies of the same members: the comparisons go on identically)
    assert again.comparison("c1", "live") == group.comparison("c1", "live")
