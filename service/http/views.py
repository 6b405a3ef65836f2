"""What the routes answer about a model and its members: the model's info (``ModelInfo`` in
``service.http.schemas``) and a challenger's (``ChallengerInfo``), read from the model's
public state. A view reads without locking: ``LiveModel.describe`` (and the domain, for the
answer a create, import or restore keeps for its Idempotency-Key) holds the model's lock
around it."""

from __future__ import annotations

from typing import Any

from service.model.kinds import task_of
from service.model.live import LiveModel
from service.model.member import Member


def model_info(live: LiveModel) -> dict[str, Any]:
    """The model as ``GET /v1/models/{name}`` shows it: its serving member's kind and
    params, the model's counters, the variants' progressive metrics side by side, the
    members, the policies, drift and learning."""
    spec, plan, member, group = live.spec, live.plan, live.champion, live.group
    counters = member.counters
    return {
        "name": live.name,
        "kind": spec.kind,
        "params": spec.params,
        "input": spec.input.model_dump(exclude_none=True),
        "task": task_of(plan),
        "classes": live.classes,
        "multiclass": spec.multiclass if plan.family in ("reduction", "ordinal") else None,
        "averaging": _averaging(member),
        "calibration": spec.calibration,
        "version": live.version,
        "created_at": live.created_at,
        "examples_learned": counters.examples_learned,
        "aggressive_updates": counters.aggressive_updates,
        "predictions": counters.predictions,
        "last_snapshot_version": live.record.last_snapshot_version,
        "metrics": member.metrics("live"),
        "status": member.status(),
        "member": member.name,
        "variant": group.variant,
        "variants": _variants(live, member),
        "challengers": [m.name for m in group.challengers()],
        "promotion": group.policy.to_json()["promotion"],
        "serve": group.policy.serve,
        "promotions": group.promotions,
        "drift": group.drift(),
        "learning": {"paused": group.paused, "backlog": live.record.backlog},
        "parallel": _parallel(live),
    }


def _parallel(live: LiveModel) -> dict[str, Any] | None:
    """A parallel model's learners, interval and shares (``service.scale.parallel``)."""
    parallel = live.group.policy.parallel
    if parallel is None:
        return None
    return {"learners": parallel.learners, "interval": parallel.interval, "shares": live.shares()}


def challenger_info(live: LiveModel, member: Member) -> dict[str, Any]:
    """A challenger as ``GET /v1/models/{name}/challengers`` lists it: its spec, its live
    variant's progressive metrics and comparison with what serves, and both variants'."""
    variants = _variants(live, member)
    return {
        "name": member.name,
        "kind": member.spec.kind,
        "params": member.spec.params,
        "averaging": _averaging(member),
        "calibration": member.spec.calibration,
        "examples_learned": member.counters.examples_learned,
        "metrics": variants["live"]["metrics"],
        "comparison": variants["live"]["comparison"],
        "variants": variants,
    }


def challengers(live: LiveModel) -> dict[str, Any]:
    return {"challengers": [challenger_info(live, m) for m in live.group.challengers()]}


def _variants(live: LiveModel, member: Member) -> dict[str, Any]:
    return {
        variant: {
            "metrics": member.metrics(variant),
            "comparison": live.group.comparison(member.name, variant),
        }
        for variant in member.variants
    }


def _averaging(member: Member) -> dict | None:
    if not member.averaged:
        return None
    estimator = member.estimator
    return {"interval": estimator.interval, "alignment": estimator.alignment}
