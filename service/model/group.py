"""The learning members of one model over one log: the champion that serves (and which of
its variants), the challengers that learn the same feedback beside it, their paired
comparisons, the drift detector, the promotion and serving policies, and the pause of
learning. Changed only under the model's writer lock (``service.model.live``).

**Comparisons.** Every member and every variant scores each example before learning it, so
their errors are paired: for each (member, variant) other than the serving one, the paired
differences ``d_i = error_other_i - error_serving_i`` feed an anytime-valid confidence
sequence for their mean (``core.sequential``): looking after every example is safe. The
error is the 0/1 error of a classifier (bounded: Howard et al. 2021's empirical-Bernstein
sequence) or the squared error of a regression or ordinal model (Waudby-Smith et al. 2021's
asymptotic sequence). The verdict of a challenger is "better" when the interval lies below
zero, "worse" above, "undecided" otherwise. The comparisons start again whenever the serving
member or variant changes: they are always against what serves.

**Policies.** ``promotion.auto`` promotes the best challenger (member and variant) whose
verdict is "better" after ``min_examples`` paired examples; ``serve: best`` serves the
champion's averaged variant once it is better than the live one (and the live one again if
it becomes better). **Drift.** A detector (ADWIN or Page-Hinkley, ``core.drift``) watches
the serving variant's errors and counts degradations only (the error rising); with
``on_drift: challenger`` a detection starts a fresh member ``drift`` from the champion's
spec, learning from the next example on (an earlier drift challenger is replaced), which
the promotion policy may then promote. Everything here is decided while learning, so a
replay of the log decides it again, exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.drift import ADWIN, PageHinkley
from core.features import CSRBatch
from core.sequential import PairedDifference
from service.exceptions import InvalidRequest
from service.model.member import Member, MemberStep

#: the member a drift detection starts (``DRIFT_AGAIN`` while a promoted ``drift`` serves)
DRIFT = "drift"
DRIFT_AGAIN = "drift-2"
DETECTORS = {"adwin": ADWIN, "page_hinkley": PageHinkley}


@dataclass(frozen=True)
class Promotion:
    """When a challenger is promoted without an operator: never (``auto`` false), or once
    its comparison says "better" at ``confidence`` after ``min_examples`` paired examples."""

    auto: bool = False
    confidence: float = 0.99
    min_examples: int = 1000


@dataclass(frozen=True)
class Drift:
    """The drift detector on the serving variant's errors (None: none) and what a detection
    does (``none``: counted; ``challenger``: a fresh copy of the champion starts learning)."""

    detector: str | None = None
    params: dict = field(default_factory=dict)
    on_drift: str = "none"


@dataclass(frozen=True)
class Parallel:
    """Data-parallel learning (``service.scale.parallel``): ``learners`` shares merged every
    ``interval`` examples. Set at creation, kept through promotions, never patched."""

    learners: int
    interval: int


@dataclass(frozen=True)
class Policy:
    """A model's policies (``POST /v1/models``, ``PATCH /v1/models/{name}``)."""

    promotion: Promotion = Promotion()
    serve: str = "fixed"  # or "best": the better variant of the champion serves
    drift: Drift = Drift()
    parallel: Parallel | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> Policy:
        parallel = data.get("parallel")
        return Policy(
            Promotion(**data.get("promotion", {})),
            data.get("serve", "fixed"),
            Drift(**data.get("drift", {})),
            None if parallel is None else Parallel(**parallel),
        )


def policy_of(spec, current: Policy | None = None) -> Policy:
    """The policies a create request (or a ``PolicyPatch``: only the fields it sets) gives,
    over ``current``; InvalidRequest (``invalid_params``) if the detector refuses its
    parameters."""
    policy = current or Policy()
    given = spec.model_fields_set
    promotion, serve, drift = policy.promotion, policy.serve, policy.drift
    parallel = policy.parallel
    if "parallel" in given and spec.parallel is not None:  # (a create request only)
        parallel = Parallel(spec.parallel.learners, spec.parallel.interval)
    if "promotion" in given:
        promotion = Promotion(**spec.promotion.model_dump()) if spec.promotion else Promotion()
    if "serve" in given:
        serve = spec.serve or "fixed"
    if "drift" in given:
        drift = Drift() if spec.drift is None else Drift(**spec.drift.model_dump())
    policy = Policy(promotion, serve, drift, parallel)
    try:
        detector(drift)
    except (TypeError, ValueError) as error:
        raise InvalidRequest(
            "invalid_params", f"drift.params: {error}", {"field": "drift.params"}
        ) from None
    return policy


def comparison(regression: bool, confidence: float) -> PairedDifference:
    """The confidence sequence of one pair's differences: bounded 0/1 errors of a classifier,
    unbounded squared errors of a regression or ordinal model."""
    return PairedDifference(confidence=confidence, bound=None if regression else 1.0)


def detector(drift: Drift):
    """The drift detector of a policy (None: none), counting degradations only."""
    if drift.detector is None:
        return None
    if "mode" in drift.params:
        raise ValueError("a drift is a degradation (the error rising): mode is not a parameter")
    return DETECTORS[drift.detector](**drift.params, mode="up")


class Group:
    """A model's members (module docstring). ``new_member(member, name)`` builds a fresh
    member of another's spec (the drift challenger)."""

    def __init__(
        self, original: Member, policy: Policy, new_member: Callable[[Member, str], Member]
    ):
        self._members: dict[str, Member] = {original.name: original}
        self._serving = original.name
        self._variant = "live"
        self._policy = policy
        self._new_member = new_member
        self._regression = original.family.regression
        self._comparisons: dict[tuple[str, str], PairedDifference] = {}
        self._detector = detector(policy.drift)
        self._detections = 0
        self._last_detection: int | None = None
        self._promotions = 0
        #: examples the serving members learned (the count drift detections are dated by)
        self._examples = 0
        self._paused = False

    # -- reading -------------------------------------------------------------------------
    @property
    def champion(self) -> Member:
        """The member that serves."""
        return self._members[self._serving]

    @property
    def variant(self) -> str:
        """The champion's variant that serves (predict without ``variant``)."""
        return self._variant

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def promotions(self) -> int:
        return self._promotions

    @property
    def detections(self) -> int:
        """Degradations the drift detector detected."""
        return self._detections

    def drift_name(self) -> str:
        """The name of the challenger a drift detection starts (replacing the member of that
        name): ``drift``, or ``drift-2`` while a promoted ``drift`` serves."""
        return DRIFT_AGAIN if self._serving == DRIFT else DRIFT

    def names(self) -> list[str]:
        return list(self._members)

    def members(self) -> list[Member]:
        """Every member, the champion first."""
        return [self.champion, *(m for m in self._members.values() if m.name != self._serving)]

    def member(self, name: str | None) -> Member | None:
        """The member of this name (None: the champion); None if there is none."""
        return self.champion if name is None else self._members.get(name)

    def challengers(self) -> list[Member]:
        return self.members()[1:]

    def comparison(self, member: str, variant: str) -> dict[str, Any] | None:
        """A (member, variant)'s comparison with what serves: the paired mean difference of
        the errors, its anytime-valid interval, the paired examples and the verdict (None:
        what serves itself)."""
        if (member, variant) == (self._serving, self._variant):
            return None
        test = self._comparisons.get((member, variant))
        n = 0 if test is None else test.n
        low, high = (None, None) if test is None else test.interval()
        return {
            "against": {"member": self._serving, "variant": self._variant},
            "error": "squared" if self._regression else "zero_one",
            "examples": n,
            "mean_difference": None if not n else float(test.mean),
            "interval": None if low is None or not np.isfinite(low) else [low, high],
            "confidence": self._policy.promotion.confidence,
            "verdict": "undecided" if test is None else test.verdict(),
        }

    def drift(self) -> dict[str, Any] | None:
        drift = self._policy.drift
        if drift.detector is None:
            return None
        return {
            "detector": drift.detector,
            "detections": self._detections,
            "last_detected_at_example": self._last_detection,
            "on_drift": drift.on_drift,
        }

    # -- learning (writer lock held) -----------------------------------------------------
    def learn(self, batch: CSRBatch, targets: np.ndarray) -> MemberStep:
        """Every member learns the batch in order; the comparisons, the drift detector and
        the policies see their errors. The champion's step (its refusal raised, once the
        others have learned)."""
        serving, served = self._serving, self._variant
        steps: dict[str, MemberStep] = {}
        refused = None
        for name, member in self._members.items():
            try:
                steps[name] = member.learn(batch, targets)
            except ValueError as error:  # a challenger's refusal leaves its comparisons
                if name == serving:
                    refused = error
        if refused is not None:
            raise refused
        base = steps[serving].errors[served]
        n = batch.n_rows
        first = float(base[0]) if n == 1 else None  # (one example: plain Python)
        for name, step in steps.items():
            for variant, errors in step.errors.items():
                if variant != served or name != serving:
                    test = self._test(name, variant)
                    if first is not None:
                        test.update_one(float(errors[0]) - first)
                    else:
                        test.update_many(errors - base)
        if self._detector is not None:
            self._watch(base, batch, targets)
        self._examples += n
        if self._policy.promotion.auto or self._policy.serve == "best":
            self._decide()
        return steps[serving]

    def _test(self, member: str, variant: str) -> PairedDifference:
        test = self._comparisons.get((member, variant))
        if test is None:
            confidence = self._policy.promotion.confidence
            test = self._comparisons[member, variant] = comparison(self._regression, confidence)
        return test

    def _watch(self, errors: np.ndarray, batch: CSRBatch, targets: np.ndarray) -> None:
        """Drift: the detections in the serving errors of this batch; with ``on_drift:
        challenger``, the last of them starts a fresh drift challenger on the rest."""
        if self._detector is None:
            return
        if batch.n_rows == 1:
            found = [0] if self._detector.update_one(float(errors[0])) else []
        else:
            found = self._detector.update_many(errors)
        if not len(found):
            return
        self._detections += len(found)
        last = int(found[-1])
        self._last_detection = self._examples + last + 1
        if self._policy.drift.on_drift != "challenger":
            return
        champion, name = self.champion, self.drift_name()
        self._drop(name)  # (an earlier drift challenger; never the champion)
        fresh = self._new_member(champion, name)
        self._members = {**self._members, name: fresh}
        if last + 1 < batch.n_rows:
            rest = batch.slice_rows(last + 1, batch.n_rows)
            try:
                fresh.learn(rest, targets[last + 1 :])
            except ValueError:
                pass  # (its comparisons start with the next batch it learns)

    def _decide(self) -> None:
        """The policies: the automatic promotion, then the champion's better variant."""
        promotion = self._policy.promotion
        if promotion.auto:
            best = None
            for (member, variant), test in self._comparisons.items():
                if member == self._serving or test.n < promotion.min_examples:
                    continue
                if test.verdict() == "better" and (best is None or test.mean < best[2]):
                    best = (member, variant, test.mean)
            if best is not None:
                self.promote(best[0], best[1])
                return
        if self._policy.serve == "best":
            other = "live" if self._variant == "averaged" else "averaged"
            test = self._comparisons.get((self._serving, other))
            if test is not None and test.verdict() == "better":
                self._serve(self._serving, other)

    # -- changes (writer lock held; the model saves them before anyone sees them) --------
    def promote(self, member: str, variant: str | None = None) -> None:
        """``member`` serves from now on (its ``variant``, default live); the champion stays
        as a challenger. KeyError if there is no such member, ValueError if it has no such
        variant."""
        chosen = self._members.get(member)
        if chosen is None:
            raise KeyError(member)
        variant = variant or "live"
        if variant not in chosen.variants:
            raise ValueError(f"member {member!r} has no {variant} variant")
        if (member, variant) != (self._serving, self._variant):
            self._promotions += member != self._serving
            self._serve(member, variant)

    def _serve(self, member: str, variant: str) -> None:
        self._serving, self._variant = member, variant
        self._comparisons = {}  # (against what serves now)
        if self._detector is not None:
            self._detector = detector(self._policy.drift)

    def add(self, member: Member) -> None:
        """A new challenger (its name free), learning from the next example on."""
        if member.name in self._members:
            raise KeyError(member.name)
        self._members = {**self._members, member.name: member}

    def remove(self, name: str) -> Member:
        """Take a challenger out (KeyError if there is none; ValueError for the champion)."""
        if name == self._serving:
            raise ValueError("the champion cannot be removed: promote another member first")
        if name not in self._members:
            raise KeyError(name)
        return self._drop(name)

    def _drop(self, name: str) -> Member | None:
        self._comparisons = {k: v for k, v in self._comparisons.items() if k[0] != name}
        members = dict(self._members)
        dropped = members.pop(name, None)
        self._members = members
        return dropped

    def set_policy(self, policy: Policy) -> None:
        """New policies: a new detector if it changed; the comparisons keep their examples
        (the confidence only changes the intervals)."""
        if policy.drift != self._policy.drift:
            self._detector = detector(policy.drift)
        if policy.promotion.confidence != self._policy.promotion.confidence:
            comparisons = {}
            for key, test in self._comparisons.items():
                again = comparison(self._regression, policy.promotion.confidence)
                again.set_state(test.get_state())
                comparisons[key] = again
            self._comparisons = comparisons
        self._policy = policy

    def pause(self, paused: bool) -> None:
        self._paused = paused

    def checkpoint(self) -> dict:
        """What ``rollback`` restores: the group as it is (the changes above replace their
        containers and detectors, never change them in place)."""
        return {**vars(self), "_members": dict(self._members)}

    def rollback(self, checkpoint: dict) -> None:
        """Back to a ``checkpoint`` (a change that could not be saved)."""
        vars(self).update(checkpoint)

    # -- state ---------------------------------------------------------------------------
    def get_state(self) -> dict:
        """The group's own state (its members' are theirs), as JSON-able values."""
        return {
            "serving": self._serving,
            "variant": self._variant,
            "members": {m.name: m.spec.model_dump(mode="json") for m in self.members()},
            "policy": self._policy.to_json(),
            "comparisons": {
                f"{member}/{variant}": _jsonable(test.get_state())
                for (member, variant), test in self._comparisons.items()
            },
            "detector": None if self._detector is None else _jsonable(self._detector.get_state()),
            "detections": self._detections,
            "last_detection": self._last_detection,
            "promotions": self._promotions,
            "examples": self._examples,
            "paused": self._paused,
        }

    def set_state(self, state: dict, members: dict[str, Member]) -> None:
        """Load a group's state and its ``members`` (built by the caller from the snapshot)."""
        policy = Policy.from_json(state["policy"])
        self._members = dict(members)
        self._serving, self._variant = state["serving"], state["variant"]
        self._policy = policy
        self._comparisons = {}
        for key, saved in state["comparisons"].items():
            member, variant = key.rsplit("/", 1)
            test = comparison(self._regression, policy.promotion.confidence)
            test.set_state(_arrays(saved))
            self._comparisons[member, variant] = test
        self._detector = detector(policy.drift)
        if self._detector is not None and state["detector"] is not None:
            self._detector.set_state(_arrays(state["detector"]))
        self._detections = state["detections"]
        self._last_detection = state["last_detection"]
        self._promotions = state["promotions"]
        self._examples = state["examples"]
        self._paused = state["paused"]


def _jsonable(state: dict) -> dict:
    """A core state (arrays and scalars) as JSON values: arrays as ``{"dtype", "data"}``."""
    return {
        "scalars": {k: _plain(v) for k, v in state.get("scalars", {}).items()},
        "arrays": {
            k: {
                "dtype": np.asarray(v).dtype.str,
                "shape": list(np.shape(v)),
                "data": np.asarray(v).ravel().tolist(),
            }
            for k, v in state.get("arrays", {}).items()
        },
    }


def _arrays(saved: dict) -> dict:
    return {
        "scalars": dict(saved["scalars"]),
        "arrays": {
            k: np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"])
            for k, v in saved["arrays"].items()
        },
    }


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def dumps(state: dict) -> np.ndarray:
    """The group's state as a snapshot array (UTF-8 JSON; floats written exactly)."""
    return np.frombuffer(json.dumps(state, separators=(",", ":")).encode(), dtype=np.uint8).copy()


def loads(array: np.ndarray) -> dict:
    return json.loads(bytes(np.asarray(array, dtype=np.uint8)))
