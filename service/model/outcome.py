"""What a feedback request did, as its answer says and as a keyed request's answer is kept
(``service.durability.idempotency``): the model and its version after the request, the
examples learned (or only logged, on a process that only logs) and how many changed the
model, and per example, when the request asked for them, the prediction made before the
update, its loss and whether it changed the model (``FeedbackResponse`` in
``service.http.schemas`` declares the shape)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.model.families import Learned


def learned(
    name: str,
    version: int,
    n: int,
    n_aggressive: int,
    steps: Learned,
    label: Callable[[Any], Any],
    with_results: bool,
) -> dict[str, Any]:
    """A batch of ``n`` examples learned; ``label`` maps a prediction to what the answer
    reports (a class label, or a value)."""
    results = None
    if with_results:
        results = [
            {"predicted": label(p), "loss": float(loss), "aggressive": bool(a)}
            for p, loss, a in zip(steps.predicted, steps.losses, steps.aggressive, strict=True)
        ]
    return {
        "model": name,
        "version": version,
        "learned": n,
        "aggressive": n_aggressive,
        "results": results,
    }


def logged(name: str, version: int, n: int) -> dict[str, Any]:
    """A batch of ``n`` examples logged for the learner (not learned here)."""
    return {
        "model": name,
        "version": version,
        "learned": 0,
        "aggressive": 0,
        "results": None,
        "logged": n,
    }
