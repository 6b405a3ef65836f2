"""Changes of a live model outside its log (``service.model.live``): a new model's first
snapshot, a refit, a restore, a change of its group (a challenger, a promotion, policies, a
pause) and the resumption of learning. Each is the model's next version, applied under the
writer lock and saved as a snapshot before anyone sees it, so that recovery never replays
later feedback onto the wrong base; if the save fails, everything comes back as it was.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from core.base import Estimator
from service.durability.capture import Capture, split_service
from service.durability.idempotency import Key
from service.model import state
from service.model.member import Member

if TYPE_CHECKING:
    from service.model.live import Change, LiveModel, View

log = logging.getLogger("lorentztron")


def save_held(
    live: LiveModel, save: Callable[[Capture], Any], view: View, key: Key | None = None
) -> dict:
    """``save`` the current state under the writer lock (a new model's first snapshot);
    the model's ``view`` as it is once saved, kept as ``key``'s answer when given."""
    with live.lock.write():
        answer = _saved_answer(live, view, key)
        try:
            save(state.capture_of(live, None))
        except BaseException:
            live.answers.forget(key)
            raise
        return answer


def _saved_answer(live: LiveModel, view: View, key: Key | None) -> dict:
    """The model's ``view`` once the current version is saved (writer lock held), kept
    in ``answers`` for ``key`` so that the snapshot being written carries it."""
    answer = {**view(live), "last_snapshot_version": live.record.version}
    if key is not None:
        live.answers.record(key, time.time(), body=answer)
    return answer


def refit(live: LiveModel, save: Callable[[Capture], Any]) -> bool:
    """Refit on the window (Algorithm 1 warm-started from the live basis; a batch kind is
    fitted from scratch): the data are read under the lock, the fit runs without it
    (the model keeps serving and learning), then under the writer lock the new model
    learns what arrived meanwhile, replaces the old one and is saved before anyone sees
    it (a refit is not in the log). False if skipped."""
    member = live.champion
    with live.lock.read():
        current, X, y, mark = member.refit_input()
    if X.shape[0] == 0:
        return False
    batch = member.plan.family == "batch"
    try:
        if batch:
            new = current.clone()
            new.fit(X, np.asarray(y, dtype=np.float64))
        else:
            new = current.refit(X, y)
    except ValueError as error:  # e.g. one class only in the window so far
        log.warning("fit of %s skipped: %s", live.name, error)
        with live.lock.write():
            member.skip_refit()
        return False
    with live.lock.write():
        if member.estimator is not current:  # restored or replaced meanwhile
            return False
        try:
            X_new, y_new = member.window_since(mark)
        except ValueError as error:  # more arrived than the window holds
            log.warning("refit of %s skipped: %s", live.name, error)
            member.skip_refit()
            return False
        if X_new.shape[0] and not batch:  # a batch model takes them at its next fit
            new.learn_many(X_new, y_new)
        _commit(live, lambda: _swap(member, new, refit=True), save)
    return True


def restore(
    live: LiveModel,
    snapshot: dict,
    save: Callable[[Capture], Any],
    view: View,
    key: Key | None = None,
) -> dict:
    """Serve an earlier snapshot's estimator state from the next version on, saved
    before anyone sees it (so recovery never replays later feedback onto the wrong base);
    ValueError if the ``snapshot`` does not fit this model. The counters, metrics and refit
    window go on: they tell the model's story, which the restore is part of. Returns the
    model's ``view`` (kept as ``key``'s answer when given)."""
    member = live.champion
    new = member.estimator.clone()
    new.set_state(split_service(snapshot)[0])
    with live.lock.write():
        if live.champion is not member:  # promoted meanwhile: the state is not its
            raise ValueError("the champion changed while the snapshot was read")
        return _commit(live, lambda: _swap(member, new), save, view, key)


def _swap(member: Member, new: Estimator, refit: bool = False):
    undo = member.swap(new, refit)
    return lambda: member.undo(undo)


def change(
    live: LiveModel,
    apply: Change,
    save: Callable[[Capture], Any],
    view: View,
    key: Key | None = None,
) -> dict:
    """A change outside the log (of the group: a challenger, a promotion, policies, a
    pause; ``apply()`` applies it and returns what undoes it), as the next version,
    saved before anyone sees it; the model's ``view`` once saved (kept for ``key``)."""
    with live.lock.write():
        return _commit(live, apply, save, view, key)


def _commit(
    live: LiveModel,
    change: Change,
    save: Callable[[Capture], Any],
    view: View | None = None,
    key: Key | None = None,
) -> dict | None:
    """Apply ``change`` as the next version and save it (writer lock held); on failure
    everything comes back as it was. Returns the model's ``view`` once saved."""
    undo = change()
    version = live.record.version
    live.record.advance()
    live.mark_all_changed()
    try:
        answer = _saved_answer(live, view, key) if view is not None else None
        save(state.capture_of(live, None))
    except BaseException:
        undo()
        live.record.set_version(version)
        live.answers.forget(key)
        raise
    return answer


def resume(
    live: LiveModel,
    discard: bool,
    save: Callable[[Capture], Any],
    view: View,
    key: Key | None = None,
) -> dict:
    """Learning resumes: the change saved first (a crash after it replays the backlog,
    or skips it when ``discard``: the snapshot's log position is then past it), then the
    backlog learned in order, unless discarded. The model's ``view`` once saved."""
    with live.lock.write():

        def resumed():
            live.group.pause(False)
            kept = live.record.discard_backlog() if discard else None

            def undo() -> None:
                live.group.pause(True)
                if kept is not None:
                    kept()

            return undo

        answer = _commit(live, resumed, save, view, key)
        if discard or live.journal is None or not live.record.backlog:
            return answer
        if live.learned_in_shares:
            live.record.caught_up()  # (its shares learn it from the version just saved)
            return answer
        live.record.caught_up()  # (read after the log position: the backlog)
        live.journal.doubt()  # (learned now, or before the next append if this fails)
        live.catch_up()
        # the answer (and ``key``'s, saved with the next snapshot) once the backlog is
        # learned; a crash before that snapshot answers a retry from the one saved above
        answer = view(live)
        if key is not None:
            live.answers.record(key, time.time(), body=answer)
        return answer
