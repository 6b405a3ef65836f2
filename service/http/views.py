"""What the routes answer about a model: its info (``ModelInfo`` in
``service.http.schemas``), read from the model's public state. A view reads without locking:
``LiveModel.describe`` (and the domain, for the answer a create, import or restore keeps
for its Idempotency-Key) holds the model's lock around it."""

from __future__ import annotations

from typing import Any

from service.model.live import LiveModel

_TASKS = {"regression": "regression", "ordinal": "ordinal"}


def model_info(live: LiveModel) -> dict[str, Any]:
    """The model as ``GET /v1/models/{name}`` shows it."""
    spec, plan, member = live.spec, live.plan, live.champion
    estimator = member.estimator
    averaging = (
        {"interval": estimator.interval, "alignment": estimator.alignment}
        if member.averaged
        else None
    )
    counters = member.counters
    return {
        "name": live.name,
        "kind": spec.kind,
        "params": spec.params,
        "input": spec.input.model_dump(exclude_none=True),
        "task": _TASKS.get(plan.family, "classification"),
        "classes": live.classes,
        "multiclass": spec.multiclass if plan.family in ("reduction", "ordinal") else None,
        "averaging": averaging,
        "calibration": spec.calibration,
        "version": live.version,
        "created_at": live.created_at,
        "examples_learned": counters.examples_learned,
        "aggressive_updates": counters.aggressive_updates,
        "predictions": counters.predictions,
        "last_snapshot_version": live.record.last_snapshot_version,
        "metrics": member.metrics(),
        "status": member.status(),
    }
