"""The lifecycle of one model: creating -> serving -> deleting -> gone.

Requests (predictions, feedback, snapshots, restores) run inside the model: ``enter``
admits them only while it is serving and ``exit`` lets them out. Deleting closes the door
first (later requests are told the model does not exist) and then waits for the requests
inside to finish, so nothing is acknowledged by a model whose files are being removed.
``service.model.models.Models`` drives the transitions.
"""

from __future__ import annotations

import enum
import threading

from service.exceptions import NotFound
from service.model.locks import STRIPES, stripe

#: the conditions lifecycles share (``service.model.locks``: a stripe each)
_stripes = [threading.Condition(threading.Lock()) for _ in range(STRIPES)]


class State(enum.Enum):
    CREATING = "creating"
    SERVING = "serving"
    DELETING = "deleting"
    GONE = "gone"


class Lifecycle:
    """The state of one model and the count of requests inside it. Thread-safe."""

    __slots__ = ("_condition", "_inside", "_state", "name")

    def __init__(self, name: str):
        self.name = name
        self._state = State.CREATING
        self._inside = 0
        self._condition = stripe(_stripes)

    @property
    def state(self) -> State:
        return self._state

    @property
    def serving(self) -> bool:
        return self._state is State.SERVING

    def enter(self) -> None:
        """Admit a request; NotFound unless the model is serving."""
        with self._condition:
            if self._state is not State.SERVING:
                raise NotFound("model_not_found", f"no model named {self.name!r}")
            self._inside += 1

    def exit(self) -> None:
        with self._condition:
            self._inside -= 1
            if self._inside == 0 and self._state is not State.SERVING:  # (``close`` waits)
                self._condition.notify_all()

    def serve(self) -> None:
        """creating -> serving (or back to serving after a deletion that could not start)."""
        with self._condition:
            if self._state not in (State.CREATING, State.DELETING):
                raise RuntimeError(f"model {self.name!r} cannot serve from {self._state}")
            self._state = State.SERVING

    def close(self) -> bool:
        """serving -> deleting, then wait until the requests inside have left. False if the
        model was not serving (another deletion is under way, or it is gone)."""
        with self._condition:
            if self._state is not State.SERVING:
                return False
            self._state = State.DELETING
            while self._inside:
                self._condition.wait()
            return True

    def end(self) -> None:
        """-> gone (a deleted model, or one whose creation failed)."""
        with self._condition:
            self._state = State.GONE
            self._condition.notify_all()
