"""The live models of one process by name (every model that holds its name: being created,
serving or being deleted). Nothing else: ``service.model.models`` drives their lifecycle."""

from __future__ import annotations

import threading

from service.exceptions import Conflict
from service.model.live import LiveModel


class Registry:
    """Name -> live model. Thread-safe."""

    def __init__(self):
        self._models: dict[str, LiveModel] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._models)

    def get(self, name: str) -> LiveModel | None:
        return self._models.get(name)

    def models(self) -> list[LiveModel]:
        """Every model, by name."""
        with self._lock:
            return [self._models[name] for name in sorted(self._models)]

    def add(self, live: LiveModel, limit: int | None = None) -> None:
        """Hold the model's name; Conflict if it is taken or ``limit`` models are held."""
        with self._lock:
            if live.name in self._models:
                raise Conflict("model_exists", f"a model named {live.name!r} exists")
            if limit is not None and len(self._models) >= limit:
                raise Conflict("too_many_models", f"at most {limit} models")
            self._models[live.name] = live

    def remove(self, live: LiveModel) -> None:
        """Free the name, if this model still holds it."""
        with self._lock:
            if self._models.get(live.name) is live:
                del self._models[live.name]
