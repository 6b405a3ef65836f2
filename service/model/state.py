"""A live model's state as a snapshot holds it, and back: the serving member's estimator
and service parts (``service.durability.capture``), the group's own state (members'
specs, what serves, comparisons, detector, policies, pause) and every other member's whole
state as a blob, the keyed answers, and the model's part (creation time, incarnation).
Called by ``service.model.live`` with the model's lock held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from core.base import Estimator
from service.durability import capture
from service.durability.capture import Capture
from service.durability.store import decode, encode
from service.model.group import dumps, loads
from service.model.member import ORIGINAL, Member
from service.model.spec import spec_from_json, spec_to_json

if TYPE_CHECKING:
    from service.model.live import LiveModel


def serving_member(state: dict) -> str:
    """The name of the member whose estimator a snapshot state holds (``capture_of``)."""
    group = capture.split_service(state)[1].get(capture.GROUP)
    return ORIGINAL if group is None else loads(group["arrays"]["state"])["serving"]


def capture_of(live: LiveModel, buffers: dict | None, arrays: bool = True) -> Capture:
    """The model's state and record marks (read or writer lock held): the serving
    estimator's arrays copied into ``buffers``, or (None) the estimator's own, for a capture
    written before the writer lock is released, or none (``arrays`` false: a delta)."""
    champion = live.champion
    estimator = champion.estimator
    if arrays:
        state = capture.estimator_state(estimator, buffers)
    else:
        state = {**estimator.get_state_meta(), "arrays": {}}
    service = champion.service_parts()
    service[capture.MODEL]["scalars"].update(
        created_at=live.created_at, incarnation=live.record.incarnation
    )
    if len(live.answers):
        service[capture.ANSWERS] = {"arrays": {"table": live.answers.get_state()}}
    service[capture.GROUP] = {"arrays": {"state": dumps(live.group.get_state())}}
    challengers = live.group.challengers()
    if challengers:
        service[capture.MEMBERS] = {"arrays": {m.name: _blob(live, m) for m in challengers}}
    # (read lock: the one snapshot writer takes it; ``SnapshotWriter`` gives the marks'
    # first new record back if the write fails)
    return Capture(capture.with_service(state, service), live.record.capture())


def _blob(live: LiveModel, member: Member) -> np.ndarray:
    """A challenger's whole state (estimator and service parts) as a snapshot blob."""
    state = capture.with_service(member.estimator.get_state(order="K"), member.service_parts())
    blob = encode(live.name, live.record.version, spec_to_json(member.spec), state)
    return np.frombuffer(blob, dtype=np.uint8)


def load(
    live: LiveModel,
    snapshot: dict,
    estimator_written: bool = False,
    built: Estimator | None = None,
) -> float | None:
    """Load a ``snapshot``'s state (writer lock held): the group and its members (each kept if
    its name and spec are the same, rebuilt otherwise), the serving member's estimator
    (unless ``estimator_written``: a delta wrote its arrays already, ``state`` gives its
    scalars; or ``built``: an estimator holding it already, built aside by an api replica,
    swapped in if the serving member is kept) and the keyed answers. Returns the model's
    creation time the snapshot holds (None: none), for the model to keep."""
    estimator_state, service = capture.split_service(snapshot)
    group = service.get(capture.GROUP)
    written = _Written(estimator_written, built, live.champion)
    if group is None:  # (a snapshot of a model of one member)
        _load_serving(live.champion, estimator_state, service, written)
    else:
        group_state = loads(group["arrays"]["state"])
        _load_group(live, group_state, service, estimator_state, written)
    if capture.ANSWERS in service:
        live.answers.set_state(service[capture.ANSWERS]["arrays"]["table"])
    return service.get(capture.MODEL, {}).get("scalars", {}).get("created_at")


def estimator_part(snapshot: dict) -> dict:
    """The serving estimator's state in a snapshot state (``Estimator.set_state``'s)."""
    return capture.split_service(snapshot)[0]


class _Written(NamedTuple):
    """How the serving estimator gets its state: an estimator ``built`` aside for the member
    ``held``, swapped in; else, with ``arrays``, its arrays written already by a delta (its
    scalars loaded); else ``set_state``."""

    arrays: bool
    built: Estimator | None
    held: Member


def _load_serving(member: Member, estimator_state: dict, service: dict, written: _Written) -> None:
    if written.built is not None and member is written.held:
        member.swap(written.built)  # (checked and filled before the lock: one assignment)
        member.set_service(service)
    elif written.arrays:
        member.set_scalars(estimator_state["scalars"], service)
    else:
        member.set_state(estimator_state, service)


def _load_group(
    live: LiveModel, group_state: dict, service: dict, estimator_state: dict, written: _Written
) -> None:
    blobs = service.get(capture.MEMBERS, {}).get("arrays", {})
    members = {}
    for name, spec_json in group_state["members"].items():
        member = _member(live, name, spec_json)
        if name == group_state["serving"]:
            _load_serving(member, estimator_state, service, written)
        else:
            _, saved = decode(blobs[name])
            member.set_state(*capture.split_service(saved))
        members[name] = member
    live.group.set_state(group_state, members)


def _member(live: LiveModel, name: str, spec_json: dict) -> Member:
    """The member ``name`` of a spec read from a snapshot: the one the model holds if its
    spec is the same (loaded in place), else a new one."""
    spec = spec_from_json(spec_json)
    held = live.group.member(name) if name in live.group.names() else None
    if held is not None and held.spec == spec:
        return held
    return live.new_member(spec, live.planner(spec), name)
