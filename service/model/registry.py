"""The live models of one process by name (every model that holds its name: being created,
serving or being deleted), and the memory they hold together. Nothing else:
``service.model.models`` drives their lifecycle."""

from __future__ import annotations

import threading

from service.exceptions import Conflict
from service.model.live import LiveModel


class Registry:
    """Name -> live model. Thread-safe."""

    def __init__(self):
        self._models: dict[str, LiveModel] = {}
        self._lock = threading.Lock()
        #: the bytes the models hold (their plans' ``nbytes``)
        self._nbytes = 0

    def __len__(self) -> int:
        return len(self._models)

    @property
    def nbytes(self) -> int:
        """The bytes the models hold in memory together (``Plan.nbytes``)."""
        return self._nbytes

    def get(self, name: str) -> LiveModel | None:
        return self._models.get(name)

    def models(self) -> list[LiveModel]:
        """Every model, by name."""
        with self._lock:
            return [self._models[name] for name in sorted(self._models)]

    def add(self, live: LiveModel, limit: int | None = None, budget: int | None = None) -> None:
        """Hold the model's name; Conflict if it is taken, if ``limit`` models are held, or
        if the models would hold more than ``budget`` bytes with it (``over_budget``)."""
        with self._lock:
            if live.name in self._models:
                raise Conflict("model_exists", f"a model named {live.name!r} exists")
            if limit is not None and len(self._models) >= limit:
                raise Conflict("too_many_models", f"at most {limit} models")
            if budget is not None:
                over_budget(self._nbytes, live.plan.nbytes, budget)
            self._models[live.name] = live
            self._nbytes += live.plan.nbytes

    def remove(self, live: LiveModel) -> None:
        """Free the name, if this model still holds it."""
        with self._lock:
            if self._models.get(live.name) is live:
                del self._models[live.name]
                self._nbytes -= live.plan.nbytes


def over_budget(held: int, more: int, budget: int) -> None:
    """Conflict (``memory_budget_exceeded``) if ``held`` bytes and ``more`` pass ``budget``."""
    if held + more > budget:
        raise Conflict(
            "memory_budget_exceeded",
            f"the model would hold {more} bytes in memory and the models hold {held}: more "
            f"than the budget of {budget} bytes (MAX_TOTAL_BYTES); delete a model, or make "
            "it smaller",
            {"held": held, "needed": more, "budget": budget},
        )
