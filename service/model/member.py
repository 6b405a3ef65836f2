"""A learning member of a model: one estimator (with its time-averaged variant when it has
one), the family adapter that maps labels and learns it (``service.model.families``), its
progressive metrics, its counters and its refit window.

A model's members learn the same feedback in the same order, each scoring every example
before learning it (progressive validation), so their metrics compare them on the same
examples. A member has no lock and no log of its own: the model (``service.model.live``)
holds the lock under which all its members change together, and the durability record
that covers them all.
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

#: the member every model has: the one that serves
CHAMPION = "champion"


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


class Member:
    """One learning member (module docstring). ``plan`` is the kind catalogue's reading of
    its spec (``service.model.kinds``)."""

    def __init__(self, plan: Plan, metrics_window: int, name: str = CHAMPION):
        self.name = name
        self.plan = plan
        self.family = FAMILIES[plan.family](plan)
        self._estimator = build(plan)
        self._progressive = ProgressiveValidation(
            metrics_window, self.family.loss_kind, self.family.regression
        )
        #: the recent examples the worker refits on (None: no refits)
        self._window = reservoir_of(plan)
        self._learned = self._aggressive = self._refits = self._since_refit = 0
        #: predictions run in parallel under the model's read lock: counted under this one
        self._predictions = 0
        self._predictions_lock = threading.Lock()

    # -- reading -------------------------------------------------------------------------
    @property
    def estimator(self) -> Estimator:
        return self._estimator

    @property
    def averaged(self) -> bool:
        return isinstance(self._estimator, Averaged)

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

    def metrics(self) -> dict[str, Any]:
        """The progressive metrics' summary (``core.metrics.ProgressiveValidation``)."""
        return self._progressive.summary()

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

    def learn(self, batch: CSRBatch, targets: np.ndarray) -> tuple[Learned, int]:
        """Learn a validated batch in order, each example scored first (writer lock held):
        what it gave, and how many examples changed the model. ValueError if the estimator
        refuses an example (a score or loss overflowing float64): the rows before it may
        have been learned."""
        learned = self.family.learn(self._estimator, batch, targets, self._window)
        if not _all_finite(learned.losses):
            raise ValueError("a loss overflows float64")
        n = batch.n_rows
        self._progressive.update(learned.correct, learned.losses, learned.squared)
        aggressive = learned.aggressive
        n_aggressive = (
            int(np.count_nonzero(aggressive))
            if isinstance(aggressive, np.ndarray)
            else sum(1 for x in aggressive if x)  # (one example's list: no numpy call)
        )
        self._learned += n
        self._aggressive += n_aggressive
        if self.plan.kind.family != "online":  # refitted by the worker
            self._since_refit += n
        return learned, n_aggressive

    def label(self, value):
        """What a feedback answer reports as the prediction before the update."""
        return self.family.predicted_label(value)

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
        """The member's part of a snapshot's service state: its progressive metrics, its
        counters (among the model's scalars) and its refit window."""
        parts = {
            capture.PROGRESSIVE: self._progressive.get_state(),
            capture.MODEL: {"scalars": self.counters._asdict()},
        }
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
