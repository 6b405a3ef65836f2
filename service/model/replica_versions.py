"""An api replica's loading of the versions a learner publishes (``service.scale.roles``),
as methods of ``LiveModel`` (``service.model.live``): ``load_version`` (a full snapshot)
and ``load_delta`` (the rows changed since the version served, ``service.scale.deltas``).

Predictions must not wait while a large model loads: the next version is written into a
standby copy of the serving estimator, outside the lock (nobody reads it), and swapped in
under one short writer-lock hold with the service's part and the version, so that a
prediction sees the version before or this one, whole. The estimator served until then
becomes the standby; a delta is written into it as well, so the next delta finds a copy at
the version served without copying the whole model again. Whole copies go in slices
(``COPY_SLICE``) so that the event loop never waits long for the GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from core.base import Estimator
from service.durability.record import Position
from service.model import state
from service.ops import failpoints


class _Standby(NamedTuple):
    """An api replica's second copy of the serving estimator ``twin``: its ``estimator``
    holds the state of ``version`` when ``synced`` (else anything: it is overwritten whole
    before use)."""

    estimator: Estimator
    twin: Estimator
    version: int | None
    synced: bool


#: the bytes of one slice of ``copy_arrays`` (each copy holds the GIL for about as long)
COPY_SLICE = 4 << 20


def copy_arrays(target: Estimator, source: Estimator) -> None:
    """Copy ``source``'s arrays into ``target``'s (same kind and shapes), a slice of about
    ``COPY_SLICE`` bytes at a time along each array's longest axis, so that the event loop
    never waits long for the GIL (a copy of a large model takes tens of milliseconds)."""
    for (name, out), (_, array) in zip(target.arrays(), source.arrays(), strict=True):
        if out.shape != array.shape:
            raise ValueError(f"array {name!r}: shape {array.shape}, expected {out.shape}")
        if array.ndim == 0:
            out[...] = array
            continue
        axis = int(np.argmax(array.shape))
        out_rows, rows = np.moveaxis(out, axis, 0), np.moveaxis(array, axis, 0)
        step = max(1, COPY_SLICE // max(1, array.nbytes // max(1, array.shape[axis])))
        for start in range(0, array.shape[axis], step):
            out_rows[start : start + step] = rows[start : start + step]


class ReplicaVersions:
    """``LiveModel``'s loading of published versions (module docstring) and its standby
    copy (which ``LiveModel._load`` drops when a state is loaded otherwise); it uses the
    model's ``champion``, ``lock``, ``record`` and ``_load``."""

    #: an api replica's second copy of the serving estimator, which the next published
    #: version is written into before it is swapped in (``_Standby``; None: none yet)
    _standby: _Standby | None = None

    def load_version(self, snapshot: dict, version: int, position: Position) -> None:
        """Serve a published version (api replicas): its state, version and log position.
        The serving estimator's state is checked and copied into the standby copy before
        the writer lock is taken (``_swap_in``); a snapshot of another serving member or
        of other hyperparameters is loaded under the lock, as by ``recover``."""
        built = None
        if state.serving_member(snapshot) == self.champion.name:
            standby = self._standby_estimator(synced=False)
            try:  # (nobody reads the standby: checked and written outside the lock)
                standby.set_state(state.estimator_part(snapshot))
                built = standby
            except ValueError:
                self._standby = None  # (written in part, maybe)
        self._swap_in(snapshot, version, position, built, written=False)

    def load_delta(
        self, write: Callable[[Estimator], None], snapshot: dict, version: int, position: Position
    ) -> None:
        """Serve a published version from a delta (api replicas, ``service.scale.deltas``):
        ``write`` changes an estimator's arrays in place, ``snapshot`` (without arrays)
        gives the estimator's scalars and the service's part. Written into the standby copy
        of the serving estimator, swapped in (``_swap_in``), then into the estimator served
        until then, which is the standby of the next version."""
        standby = self._standby_estimator(synced=True)
        scalars = state.estimator_part(snapshot)["scalars"]
        try:
            write(standby)  # (a promotion is published whole, never a delta)
            standby.set_scalars(scalars)
        except BaseException:
            self._standby = None
            raise
        previous = self._swap_in(snapshot, version, position, standby, written=True)
        if previous is None:
            return
        try:  # (no prediction reads it any more: the swap waited for the last one)
            write(previous)
            previous.set_scalars(scalars)
        except BaseException:
            self._standby = None
            raise
        self._standby = _Standby(previous, standby, version, synced=True)

    def _swap_in(self, snapshot, version, position, built, written: bool) -> Estimator | None:
        """Serve a published version whose serving estimator is ``built`` aside (None: load
        it under the lock): one writer-lock hold for the swap, the service's part and the
        version, so that a prediction sees the version before or this one, whole, and waits
        for no more than that. Returns the estimator served until then if ``built`` took
        its place (it becomes the standby, not yet at this version)."""
        failpoints.reach("replica.swap")
        with self.lock.write():
            previous = self.champion.estimator
            self._load(snapshot, estimator_written=written, built=built)
            self.record.loaded(version, position)
            served = self.champion.estimator
        if built is None or served is not built:
            self._standby = None
            return None
        self._standby = _Standby(previous, built, version, synced=False)
        return previous

    def _standby_estimator(self, synced: bool) -> Estimator:
        """The standby copy of the serving estimator (an api replica's): the kept one, a
        fresh one the first time; with ``synced``, holding the state served (copied from
        the serving one under the read lock, which predictions share, if it does not)."""
        serving = self.champion.estimator
        standby = self._standby
        if standby is None or standby.twin is not serving:
            standby = self._standby = _Standby(serving.clone(), serving, None, synced=False)
        if synced and not (standby.synced and standby.version == self.record.version):
            with self.lock.read():
                copy_arrays(standby.estimator, serving)
                standby.estimator.set_scalars(serving.get_state_meta()["scalars"])
                version = self.record.version
            self._standby = standby = _Standby(standby.estimator, serving, version, synced=True)
        return standby.estimator

    def _standby_nbytes(self) -> int:
        """The bytes the standby copy's arrays hold (0: none; ``LiveModel.memory``)."""
        standby = self._standby
        return 0 if standby is None else sum(a.nbytes for _, a in standby.estimator.arrays())
