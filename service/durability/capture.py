"""Snapshot capture: a live model's whole state as one ``get_state``-shaped dict.

The estimator's state is the serving member's (``service.model.member``). Beside it, a
snapshot state carries under ``"service"`` (arrays and scalars named with the prefix
``service.``) what the service keeps about the model: the serving member's refit window
(``service.reservoir.*``), progressive metrics (``service.progressive.*``, and its time
average's ``service.averaged.*``) and counters, the model's identity (``service.model.*``:
creation time, incarnation, examples learned, aggressive updates, predictions, refits),
the answers of its keyed requests (``service.answers.table``,
``service.durability.idempotency``), the group of members (``service.group.state``: who
serves, the policies, comparisons, drift detector and pause, as JSON) and each challenger's
whole state as a nested snapshot blob (``service.members.<name>``). A restart, a crash
(snapshot + log replay) or a replica loading a published version so continues the model's
story.

The arrays are copied into buffers kept from one capture to the next: a fresh allocation
of a large model costs its page faults on every copy, a reused buffer does not.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from core.base import Estimator
from service.durability.record import Marks

RESERVOIR = "service.reservoir."
PROGRESSIVE = "service.progressive."
#: the progressive metrics of a member's time-averaged variant
AVERAGED = "service.averaged."
MODEL = "service.model."
ANSWERS = "service.answers."
#: a model's group of members (``service.model.group``): ``state``, its own state as JSON
GROUP = "service.group."
#: the challengers: ``service.members.<name>``, each one's whole state as a snapshot blob
MEMBERS = "service.members."
SERVICE = "service."
PREFIXES = (RESERVOIR, PROGRESSIVE, AVERAGED, MODEL, ANSWERS, GROUP, MEMBERS)


class Capture(NamedTuple):
    """A consistent view of a model for a snapshot: its state and what the durability
    record said then (``service.durability.record.Marks``)."""

    state: dict
    marks: Marks

    @property
    def version(self) -> int:
        return self.marks.version

    @property
    def log_position(self) -> Any:
        return self.marks.log_position

    @property
    def first_new(self) -> Any:
        return self.marks.first_new


def buffer_for(buffers: dict, name: str, array: np.ndarray) -> tuple[np.ndarray, bool]:
    """The kept buffer of an array, (re)allocated in its layout if it has none of its shape
    and dtype; and whether it is new."""
    buffer = buffers.get(name)
    if buffer is not None and buffer.shape == array.shape and buffer.dtype == array.dtype:
        return buffer, False
    buffer = buffers[name] = np.empty_like(array, order="K")
    return buffer, True


def prepare_buffers(estimator: Estimator, buffers: dict) -> None:
    """Allocate and fault in the buffers a capture will need (before the lock is taken;
    reads only shapes and dtypes: a buffer made stale meanwhile is replaced under it)."""
    for name, array in estimator.arrays():
        buffer, new = buffer_for(buffers, name, array)
        if new:
            np.copyto(buffer, 0)


def estimator_state(estimator: Estimator, buffers: dict | None) -> dict:
    """The estimator's state, its arrays copied into ``buffers``; None: the estimator's own
    arrays, not copied (for a capture written while the model's writer lock is held, which
    nothing changes meanwhile: no copy of a large model on top of the encoding)."""
    if buffers is None:
        return {**estimator.get_state_meta(), "arrays": dict(estimator.arrays())}
    arrays = {}
    for name, array in estimator.arrays():
        buffer, _ = buffer_for(buffers, name, array)
        np.copyto(buffer, array)
        arrays[name] = buffer
    return {**estimator.get_state_meta(), "arrays": arrays}


def with_service(state: dict, service: dict) -> dict:
    """The estimator state plus the service's part under ``"service"``: ``service`` maps
    prefixes (``RESERVOIR``, ``PROGRESSIVE``, ``MODEL``) to ``{"arrays", "scalars"}``."""
    arrays, scalars = {}, {}
    for prefix, part in service.items():
        arrays.update({prefix + k: v for k, v in part.get("arrays", {}).items()})
        scalars.update({prefix + k: v for k, v in part.get("scalars", {}).items()})
    return {**state, "service": {"arrays": arrays, "scalars": scalars}}


def split_service(state: dict) -> tuple[dict, dict]:
    """(estimator state, ``{prefix: {"arrays", "scalars"}}``) of a snapshot state; a prefix
    the snapshot does not carry is missing from the second. (Snapshots of earlier versions
    kept the refit window among the estimator's arrays and scalars, prefixed.)"""
    own = {key: dict(state[key]) for key in ("arrays", "scalars")}
    service = state.get("service", {"arrays": {}, "scalars": {}})
    found: dict[str, dict] = {}
    for key in ("arrays", "scalars"):
        entries = {**service.get(key, {})}
        for name in [n for n in own[key] if n.startswith(SERVICE)]:
            entries[name] = own[key].pop(name)
        for name, value in entries.items():
            for prefix in PREFIXES:
                if name.startswith(prefix):
                    part = found.setdefault(prefix, {"arrays": {}, "scalars": {}})
                    part[key][name[len(prefix) :]] = value
    estimator = {k: v for k, v in state.items() if k != "service"}
    return {**estimator, **own}, found


def reservoir_part(reservoir_state: dict, encode) -> dict:
    """A reservoir's state as a service part; an empty slot's target is NaN."""
    arrays = {name: reservoir_state[name] for name in ("indptr", "indices", "values", "arrival")}
    arrays["targets"] = np.array(
        [math.nan if t is None else encode(t) for t in reservoir_state["targets"]],
        dtype=np.float64,
    )
    return {
        "arrays": arrays,
        "scalars": {"n_seen": reservoir_state["n_seen"], "rng": reservoir_state["rng"]},
    }


def reservoir_state(part: dict, decode) -> dict:
    """The reservoir state of a service part (``reservoir_part``'s inverse)."""
    state = {**part["arrays"], **part["scalars"]}
    state["targets"] = [decode(float(t)) for t in part["arrays"]["targets"]]
    return state
