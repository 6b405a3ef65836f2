"""A learning member of a model: one estimator (with its time-averaged variant when it has
one), the family adapter that maps labels and learns it (``service.model.families``), its
progressive metrics (one per variant), its counters and its refit window.

A model's members learn the same feedback in the same order, each scoring every example
before learning it (progressive validation), and so does each averaged variant: the
average is scored on each example before the example is learned (it changes only where an
averaging interval ends, where the batch is cut). Their per-example errors are therefore
paired across members and variants, which is what the model's comparisons test
(``service.model.group``). A member has no lock and no log of its own: the model
(``service.model.live``) holds the lock under which all its members change together, and
the durability record that covers them all.
"""

from __future__ import annotations

import math
import threading
from typing import Any, NamedTuple

import numpy as np

from core.averaging import Averaged
from core.base import Estimator
from core.features import CSRBatch
from core.metrics import ProgressiveValidation
from service.durability import capture
from service.exceptions import InvalidRequest
from service.model.families import FAMILIES, Learned, reservoir_of
from service.model.kinds import Plan, build
from service.model.spec import CreateModel

#: the name of a model's first member
ORIGINAL = "original"
#: a model's variants: its live estimator and, for the kinds that have one, its time average
VARIANTS = ("live", "averaged")


def _all_finite(values) -> bool:
    """Whether every value (a list of one, or an array) is finite."""
    if len(values) == 1:
        return math.isfinite(values[0])
    return bool(np.all(np.isfinite(values)))


class Counters(NamedTuple):
    """A member's counters, as its snapshot part and the model's info show them."""

    examples_learned: int = 0
    aggressive_updates: int = 0
    predictions: int = 0
    refits: int = 0
    examples_since_refit: int = 0


class Undo(NamedTuple):
    """What ``swap`` replaced, for ``undo``."""

    estimator: Estimator
    refits: int
    since_refit: int


class MemberStep(NamedTuple):
    """What learning a batch gave a member: the live variant's ``Learned``, how many
    examples changed the model, and each variant's per-example errors (the 0/1 error, or
    the squared error of a regression or ordinal model: what comparisons and drift
    detection are computed on)."""

    learned: Learned
    n_aggressive: int
    errors: dict[str, np.ndarray | list[float]]


def _joined(parts: list[Learned]) -> Learned:
    if len(parts) == 1:
        return parts[0]
    fields = zip(*parts, strict=True)  # (one example's fields may be scalars or lists)
    return Learned(
        *(
            None
            if any(value is None for value in values)
            else np.concatenate([np.ravel(np.asarray(value)) for value in values])
            for values in fields
        )
    )


class Member:
    """One learning member (module docstring). ``spec`` is its create request (the model's
    input, classes and task, with the member's kind, params, averaging and calibration) and
    ``plan`` the catalogue's reading of it (``service.model.kinds``)."""

    def __init__(self, spec: CreateModel, plan: Plan, metrics_window: int, name: str = ORIGINAL):
        self.name = name
        self.spec = spec
        self.plan = plan
        self.family = FAMILIES[plan.family](plan)
        self._estimator = build(plan)
        self._metrics_window = metrics_window
        self._progressive = self._new_progressive()
        #: the time average's progressive metrics (None: no averaged variant)
        self._averaged_progressive = self._new_progressive() if self.averaged else None
        #: the recent examples the worker refits on (None: no refits)
        self._window = reservoir_of(plan)
        self._learned = self._aggressive = self._refits = self._since_refit = 0
        #: predictions run in parallel under the model's read lock: counted under this one
        self._predictions = 0
        self._predictions_lock = threading.Lock()

    def _new_progressive(self) -> ProgressiveValidation:
        family = self.family
        return ProgressiveValidation(self._metrics_window, family.loss_kind, family.regression)

    # -- reading -------------------------------------------------------------------------
    @property
    def estimator(self) -> Estimator:
        return self._estimator

    @property
    def averaged(self) -> bool:
        return isinstance(self._estimator, Averaged)

    @property
    def variants(self) -> tuple[str, ...]:
        return VARIANTS if self.averaged else VARIANTS[:1]

    @property
    def live(self) -> Estimator:
        """The live estimator (an averaged model's ``live_``)."""
        return self._estimator.live_ if self.averaged else self._estimator

    @property
    def window(self):
        """The refit window (``core.mofm.Reservoir``; None: the kind is not refitted)."""
        return self._window

    @property
    def counters(self) -> Counters:
        return Counters(
            self._learned, self._aggressive, self._predictions, self._refits, self._since_refit
        )

    @property
    def refits_due(self) -> bool:
        """Whether the refit window saw ``reservoir_refit_every`` examples since the last
        refit (the worker refits then)."""
        every = self.plan.params.get("reservoir_refit_every")
        return self._window is not None and self._since_refit >= every

    def metrics(self, variant: str = "live") -> dict[str, Any]:
        """A variant's progressive metrics' summary (``core.metrics.ProgressiveValidation``)."""
        progressive = self._progressive if variant == "live" else self._averaged_progressive
        return progressive.summary()

    def scorer(self, variant: str) -> Estimator:
        """The estimator that scores ``variant`` ("live" or "averaged")."""
        if self.averaged:
            return self._estimator.scorer(variant)
        if variant == "averaged":
            raise InvalidRequest(
                "no_averaged_variant",
                f"kind {self.plan.kind.name!r} has no time-averaged variant (its state is not "
                "a weight vector, or it is not online)",
            )
        return self._estimator

    def status(self) -> dict[str, Any] | None:
        """Kind-specific state of the live estimator, and the refit window of the kinds the
        worker refits."""
        status = self.family.status(self.live)
        if self.plan.kind.family == "online":
            return status
        window = {
            "refit_every": self.plan.params["reservoir_refit_every"],
            "reservoir_examples": len(self._window) if self._window is not None else 0,
        }
        if self.plan.family == "batch":
            fits = {"fits": self._refits, "examples_since_fit": self._since_refit}
        else:
            fits = {"refits": self._refits, "examples_since_refit": self._since_refit}
        return {**window, **fits, **status}

    # -- serving and learning (the model's lock held) -------------------------------------
    def predict(self, batch: CSRBatch, variant: str) -> tuple[list, list, list]:
        """The labels, scores and probabilities of a validated batch (read lock held)."""
        predicted = self.family.predict(self.scorer(variant), batch)
        with self._predictions_lock:
            self._predictions += batch.n_rows
        return predicted

    def learn(self, batch: CSRBatch, targets: np.ndarray) -> MemberStep:
        """Learn a validated batch in order, each example scored first by each variant
        (writer lock held). ValueError if the estimator refuses an example (a score or loss
        overflowing float64): the rows before it may have been learned."""
        if self._averaged_progressive is None:
            learned = self._learn(batch, targets)
            averaged = None
        else:
            learned, averaged = self._learn_with_average(batch, targets)
        self._progressive.update(learned.correct, learned.losses, learned.squared)
        errors = {"live": self._errors(learned)}
        if averaged is not None:
            self._averaged_progressive.update(averaged.correct, averaged.losses, None)
            errors["averaged"] = self._errors(averaged)
        aggressive = learned.aggressive
        n_aggressive = (
            int(np.count_nonzero(aggressive))
            if isinstance(aggressive, np.ndarray)
            else sum(1 for x in aggressive if x)  # (one example's list: no numpy call)
        )
        n = batch.n_rows
        self._learned += n
        self._aggressive += n_aggressive
        if self.plan.kind.family != "online":  # refitted by the worker
            self._since_refit += n
        return MemberStep(learned, n_aggressive, errors)

    def _learn(self, batch: CSRBatch, targets: np.ndarray) -> Learned:
        learned = self.family.learn(self._estimator, batch, targets, self._window)
        if not _all_finite(learned.losses):
            raise ValueError("a loss overflows float64")
        return learned

    def _learn_with_average(self, batch: CSRBatch, targets: np.ndarray):
        """The live variant's ``Learned`` and the average's, each part of the batch between
        two averaging steps scored by the average before it is learned (until the first
        fold, the average is the live model: the same figures)."""
        estimator, n = self._estimator, batch.n_rows
        if n == 1:  # (the common single example: one part)
            average = None
            if estimator.n_averaged_:
                average = self.family.evaluate(estimator.scorer("averaged"), batch, targets)
            live = self._learn(batch, targets)
            return live, live if average is None else average
        interval = estimator.interval
        first = min(n, interval - estimator.n_seen_ % interval)
        bounds = [0, *range(first, n, interval), n]
        lives, averages = [], []
        for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
            part = batch if stop - start == n else batch.slice_rows(start, stop)
            part_targets = targets[start:stop]
            average = None
            if estimator.n_averaged_:
                scorer = estimator.scorer("averaged")
                average = self.family.evaluate(scorer, part, part_targets)
            live = self._learn(part, part_targets)
            lives.append(live)
            averages.append(live if average is None else average)
        return _joined(lives), _joined(averages)

    def _errors(self, learned: Learned):
        """Each example's error (0/1, or squared): a list for one example's list (no numpy
        call), else an array."""
        values = learned.squared if self.family.regression else learned.correct
        if isinstance(values, list):
            return (
                [float(v) for v in values]
                if self.family.regression
                else [0.0 if v else 1.0 for v in values]
            )
        if self.family.regression:
            return np.asarray(values, dtype=np.float64)
        return 1.0 - np.asarray(values, dtype=np.float64)

    def label(self, value):
        """What a feedback answer reports as the prediction before the update."""
        return self.family.predicted_label(value)

    def add_counts(self, learned: int, aggressive: int) -> None:
        """Count examples learned elsewhere (a parallel model's other shares)."""
        self._learned += learned
        self._aggressive += aggressive

    # -- refits --------------------------------------------------------------------------
    def refit_input(self) -> tuple[Estimator, Any, Any, int]:
        """What a refit starts from (read lock held): the estimator, the window's data and
        its count of examples seen (``window_since`` reads what arrived after)."""
        X, y = self._window.data()
        return self._estimator, X, y, self._window.n_seen

    def window_since(self, mark: int):
        """The window's examples after ``mark`` (ValueError if some were dropped)."""
        return self._window.since(mark)

    def skip_refit(self) -> None:
        """A refit was skipped: wait for ``reservoir_refit_every`` more examples."""
        self._since_refit = 0

    def swap(self, new: Estimator, refit: bool = False) -> Undo:
        """Serve ``new`` from now on (a refit, a restore); ``undo`` goes back."""
        undo = Undo(self._estimator, self._refits, self._since_refit)
        self._estimator = new
        if refit:
            self._refits += 1
            self._since_refit = 0
        return undo

    def undo(self, undo: Undo) -> None:
        self._estimator, self._refits, self._since_refit = undo

    # -- state ---------------------------------------------------------------------------
    def service_parts(self) -> dict[str, dict]:
        """The member's part of a snapshot's service state: its progressive metrics (each
        variant's), its counters (among the model's scalars) and its refit window."""
        parts = {
            capture.PROGRESSIVE: self._progressive.get_state(),
            capture.MODEL: {"scalars": self.counters._asdict()},
        }
        if self._averaged_progressive is not None:
            parts[capture.AVERAGED] = self._averaged_progressive.get_state()
        if self._window is not None:
            parts[capture.RESERVOIR] = capture.reservoir_part(
                self._window.get_state(), self.family.window_target
            )
        return parts

    def set_state(self, state: dict, service: dict) -> None:
        """Load an estimator state and the member's service parts (``service_parts``; a part
        the snapshot does not carry keeps its value)."""
        self._estimator.set_state(state)
        self.set_service(service)

    def set_scalars(self, scalars: dict, service: dict) -> None:
        """Load an estimator's scalars (its arrays written in place by a delta) and the
        member's service parts."""
        self._estimator.set_scalars(scalars)
        self.set_service(service)

    def set_service(self, service: dict) -> None:
        if capture.PROGRESSIVE in service:
            self._progressive.set_state(service[capture.PROGRESSIVE])
        if capture.AVERAGED in service and self._averaged_progressive is not None:
            self._averaged_progressive.set_state(service[capture.AVERAGED])
        scalars = service.get(capture.MODEL, {}).get("scalars", {})
        counters = Counters(
            *(int(scalars.get(name, value)) for name, value in self.counters._asdict().items())
        )
        self._learned, self._aggressive, self._predictions = counters[:3]
        self._refits, self._since_refit = counters[3:]
        if capture.RESERVOIR in service and self._window is not None:
            self._window.set_state(
                capture.reservoir_state(service[capture.RESERVOIR], self.family.from_window_target)
            )
