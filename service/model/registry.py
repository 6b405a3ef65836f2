"""The live models of one process by name (every model that holds its name: being created,
serving or being deleted), and the memory they hold together. Nothing else:
``service.model.models`` drives their lifecycle."""

from __future__ import annotations

import threading

from service.exceptions import Conflict
from service.model.live import Footprint, LiveModel


class Registry:
    """Name -> live model, and what the models hold together: their members (a challenger
    counts as a model) and bytes (``LiveModel.footprint``). Thread-safe."""

    def __init__(self):
        self._models: dict[str, LiveModel] = {}
        self._footprints: dict[str, Footprint] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._nbytes = 0

    def __len__(self) -> int:
        return len(self._models)

    @property
    def count(self) -> int:
        """The models held, each of their challengers counted as a model."""
        return self._count

    @property
    def nbytes(self) -> int:
        """The bytes the models hold in memory together (``Plan.nbytes`` of their members)."""
        return self._nbytes

    def get(self, name: str) -> LiveModel | None:
        return self._models.get(name)

    def names(self) -> list[str]:
        """Every model's name, sorted."""
        with self._lock:
            names = list(self._models)
        names.sort()
        return names

    def models(self) -> list[LiveModel]:
        """Every model, by name."""
        with self._lock:
            return [self._models[name] for name in sorted(self._models)]

    def add(self, live: LiveModel, limit: int | None = None, budget: int | None = None) -> None:
        """Hold the model's name; Conflict if it is taken, if the models would count more
        than ``limit`` with it, or hold more than ``budget`` bytes (``over_budget``)."""
        footprint = live.footprint()
        with self._lock:
            if live.name in self._models:
                raise Conflict("model_exists", f"a model named {live.name!r} exists")
            self._check(Footprint(0, 0), footprint, limit, budget)
            self._models[live.name] = live
            self._account(live.name, footprint)

    def update(
        self, live: LiveModel, footprint: Footprint, limit: int | None, budget: int | None
    ) -> None:
        """The model will hold ``footprint`` (a challenger added, say): Conflict, and nothing
        changed, if that passes ``limit`` or ``budget``."""
        with self._lock:
            if self._models.get(live.name) is not live:
                return
            self._check(self._footprints[live.name], footprint, limit, budget)
            self._account(live.name, footprint)

    def remove(self, live: LiveModel) -> None:
        """Free the name, if this model still holds it."""
        with self._lock:
            if self._models.get(live.name) is live:
                del self._models[live.name]
                self._account(live.name, Footprint(0, 0))
                del self._footprints[live.name]

    def _check(self, old: Footprint, new: Footprint, limit, budget) -> None:
        if limit is not None and new.models > old.models:
            if self._count - old.models + new.models > limit:
                raise Conflict(
                    "too_many_models", f"at most {limit} models (a challenger counts as one)"
                )
        if budget is not None and new.nbytes > old.nbytes:
            over_budget(self._nbytes - old.nbytes, new.nbytes, budget)

    def _account(self, name: str, footprint: Footprint) -> None:
        old = self._footprints.get(name, Footprint(0, 0))
        self._count += footprint.models - old.models
        self._nbytes += footprint.nbytes - old.nbytes
        self._footprints[name] = footprint


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
