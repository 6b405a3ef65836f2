"""Time-averaged models (section 3.4 of Saul 2021): a live model and its running average."""

from __future__ import annotations

import dataclasses
from numbers import Integral

import numpy as np

from core.align import ALIGNMENTS, running_average
from core.base import Estimator, PartialBatchError
from core.features import CSRBatch, sliceable
from core.state import state_count

__all__ = [
    "Averaged",
]


class Averaged(Estimator):
    r"""A live online model plus the aligned running average of its snapshots (section 3.4).

    The live model learns every example. After every ``interval`` examples its state
    ``Theta_m`` (m = 1, 2, ...) is folded into the running average

        Theta_hat_m = (1 - 1/m) Theta_hat_{m-1} + (1/m) Theta_m                      (28)

    by :func:`core.align.running_average`: DoS parameter pairs ``(U_, V_)`` are first aligned
    (min-norm boost, eqs 15-16, then orthogonal Procrustes, eqs 26-27) and every other float
    array (e.g. the weights of a linear model) is averaged as is. Predictions use the
    averaged model by default (``variant="averaged"``); before the first averaging step it
    falls back to the live model. ``variant="live"`` always uses the live model.

    ``learn_one`` and ``learn_many`` give bit-identical models: a batch is cut at the
    averaging boundaries. A batch that crosses a boundary is learned all or nothing: if the
    live model refuses any part of it, the live model is restored and nothing changes. (A
    batch inside one interval is handed to the live model whole; if the live model learns
    part of it before failing, as on a float64 overflow, ``n_seen_`` does not count that part.)

    Parameters
    ----------
    model : Estimator
        The model to average: any model of the ``core.base`` protocol (``LinearPA``,
        ``DoSClassifier``, composite reductions). It is a template: ``Averaged`` learns clones
        of it and never modifies the object passed in.
    interval : int
        Examples between two averaging steps (the paper used 50 000 on INFIMNIST).
    alignment : {"paper", "spectral"}
        How DoS pairs are aligned before averaging (:func:`core.align.align`): the paper's
        min-norm boost + Procrustes, or the spectral canonical form + Procrustes, which is
        exact under every symmetry (independent rotations of U and V included).

    Attributes
    ----------
    live_ : Estimator
        The model that learns (state prefix ``live.``).
    average_ : Estimator
        A clone of ``model`` holding the running average (state prefix ``average.``);
        unfitted until the first averaging step.
    n_seen_ : int
        Examples learned.
    n_averaged_ : int
        Snapshots folded into the average (m).

    Examples
    --------
    >>> from core.linear import LinearPA
    >>> model = Averaged(model=LinearPA(n_features=1), interval=1)
    >>> model.learn_one([1.0], 1).aggressive
    True
    >>> _ = model.learn_one([1.0], -1)
    >>> model.live_.w_, model.average_.w_
    (array([-0.5, -0.5]), array([0., 0.]))
    >>> model.score_one([1.0]), model.score_one([1.0], variant="live")
    (0.0, -1.0)
    """

    _scalars = ("n_seen_", "n_averaged_")
    variants = ("averaged", "live")

    def __init__(self, *, model: Estimator, interval: int = 1000, alignment: str = "paper"):
        self.model = model
        self.interval = interval
        self.alignment = alignment
        if alignment not in ALIGNMENTS:
            raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
        if not isinstance(model, Estimator):
            raise ValueError(f"model must be an Estimator, got {type(model).__name__}")
        if not model.is_averageable():
            raise ValueError(
                f"{type(model).__name__} cannot be time-averaged element-wise (its state is "
                "not a weight vector, e.g. FTRL's z and n)"
            )
        if isinstance(interval, bool) or not isinstance(interval, Integral) or interval < 1:
            raise ValueError(f"interval must be a positive integer, got {interval!r}")
        self.live_ = model.clone()
        self.average_ = model.clone()
        self.n_seen_ = 0
        self.n_averaged_ = 0

    def _children(self) -> list[tuple[str, Estimator]]:
        return [("live", self.live_), ("average", self.average_)]

    def _check_state(self, arrays: dict, scalars: dict):
        writes = super()._check_state(arrays, scalars)
        # (both checked counts by now) the average folds one snapshot per interval ended
        seen, averaged = state_count("n_seen_", scalars["n_seen_"]), scalars["n_averaged_"]
        if state_count("n_averaged_", averaged) > seen // self.interval:
            raise ValueError(
                f"state has n_averaged_={averaged} snapshots in n_seen_={seen} examples, "
                f"more than one per interval of {self.interval}"
            )
        return writes

    def _feature_children(self) -> list[tuple[str, Estimator]]:
        # the average changes at averaging steps only, and then everywhere (the alignment
        # boosts and rotates every row)
        return [("live", self.live_)]

    # -- learning ------------------------------------------------------------------------
    def learn_one(self, x, y):
        """Learn one example with the live model; average if an interval ends. Returns what
        the live model returns."""
        result = self.live_.learn_one(x, y)
        self.n_seen_ += 1
        if self.n_seen_ % self.interval == 0:
            self._fold_into_average()
        return result

    def learn_many(self, X, y, **options):
        """Learn a batch in order, exactly as ``learn_one`` would. Returns what the live model
        returns (per-example arrays of the chunks concatenated); ``options`` go to the live
        model's ``learn_many`` (e.g. one-vs-one's ``progressive``)."""
        X, y, n_rows = sliceable(X, y)

        def learn(start: int, stop: int):
            if start == 0 and stop == n_rows:  # (no copy of a batch learned whole)
                return self.live_.learn_many(X, y, **options)
            return self.live_.learn_many(X[start:stop], y[start:stop], **options)

        return self._learn_chunks(n_rows, learn)

    def learn_batch(self, batch: CSRBatch, targets, **options):
        """Learn a batch already validated for this model, its labels converted once (class
        indices, or values for regression): the live model's ``learn_batch`` on the batch cut
        at the averaging boundaries, as ``learn_many``; the same model and steps, bit for bit
        (the steps' ``predicted`` as the live model's ``learn_batch`` gives them).

        Parameters
        ----------
        batch : CSRBatch
            Rows validated with the model's ``n_features`` (``core.features.as_batch``).
        targets : ndarray, shape (n_rows,)
            What the live model's ``learn_batch`` takes, one per row.
        **options
            The live model's options (e.g. one-vs-one's ``progressive``).
        """
        if len(targets) != batch.n_rows:
            raise ValueError(f"got {len(targets)} targets for {batch.n_rows} rows")

        def learn(start: int, stop: int):
            if start == 0 and stop == batch.n_rows:
                return self.live_.learn_batch(batch, targets, **options)
            part = batch.slice_rows(start, stop)
            return self.live_.learn_batch(part, targets[start:stop], **options)

        return self._learn_chunks(batch.n_rows, learn)

    def _learn_chunks(self, n_rows: int, learn):
        """``learn(start, stop)`` (the live model learning those rows) for each chunk of the
        batch between averaging steps, folding the average at each; the results joined."""
        interval = self.interval
        first = min(n_rows, interval - self.n_seen_ % interval)
        bounds = [0, *range(first, n_rows, interval), n_rows]
        if len(bounds) == 2:
            # one chunk, no averaging inside it: nothing to undo if the live model refuses;
            # the rows it learned before a row it refused part-way count as seen
            try:
                result = learn(0, n_rows)
            except PartialBatchError as error:
                self.n_seen_ += len(error.learned)
                raise
            self.n_seen_ += n_rows
            if n_rows and self.n_seen_ % interval == 0:
                self._fold_into_average()
            return result
        # across averaging steps, all or nothing: both models restored if a chunk is refused
        backups = [_state(model, order="K") for model in (self.live_, self.average_)]
        counts = self.n_seen_, self.n_averaged_
        results = []
        try:
            for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
                results.append(learn(start, stop))
                self.n_seen_ += stop - start
                if self.n_seen_ % interval == 0:
                    self._fold_into_average()
        except BaseException:
            self.live_.set_state(backups[0])
            self.average_.set_state(backups[1])
            self.n_seen_, self.n_averaged_ = counts
            raise
        return _concatenate(results)

    def averages_within(self, n: int) -> bool:
        """Whether learning ``n`` more examples ends an interval (and folds the average)."""
        return n > 0 and self.n_seen_ % self.interval + n >= self.interval

    def _fold(self, average, m: int):
        """The running average with the live model folded in as the m-th snapshot."""
        return running_average(average, _state(self.live_), m, self.alignment)

    def _fold_into_average(self) -> None:
        """Fold the live model into the average as its next snapshot (eq 28). Once the
        average has the live model's arrays, the fold reads both models where they are and
        writes the average's arrays in place (``running_average(..., into=)``): no copy of
        either, which for a large model is most of the fold's time (fresh memory). The
        values are ``running_average``'s on copies, bit for bit (the fold's sums do not
        depend on the arrays' layout)."""
        m = self._m()
        own, live = dict(self.average_.arrays()), dict(self.live_.arrays())
        if m == 1 or self.alignment != "paper" or not _same_arrays(own, live):
            self.average_.set_state(self._fold(self._average_state(), m))
        else:
            average = {**self.average_.get_state_meta(), "arrays": own}
            state = {**self.live_.get_state_meta(), "arrays": live}
            folded = running_average(average, state, m, self.alignment, into=own)
            self.average_.set_scalars(folded["scalars"])
        self.n_averaged_ += 1

    def _average_state(self):
        return _state(self.average_) if self.n_averaged_ else None

    def _m(self) -> int:
        return self.n_averaged_ + 1

    # -- prediction ----------------------------------------------------------------------
    def scorer(self, variant: str) -> Estimator:
        """The model that scores for ``variant``: ``live_``, or ``average_`` once one
        exists (before the first average, "averaged" scores with the live model)."""
        if variant not in self.variants:
            raise ValueError(f"variant must be one of {self.variants}, got {variant!r}")
        if variant == "live" or self.n_averaged_ == 0:
            return self.live_
        return self.average_

    def score_one(self, x, variant: str = "averaged"):
        """Decision value of one example by the averaged (default) or live model."""
        return self.scorer(variant).score_one(x)

    def score_many(self, X, variant: str = "averaged"):
        """Decision values of a batch by the averaged (default) or live model."""
        return self.scorer(variant).score_many(X)

    def predict_one(self, x, variant: str = "averaged"):
        """Label of one example by the averaged (default) or live model."""
        return self.scorer(variant).predict_one(x)

    def predict_many(self, X, variant: str = "averaged"):
        """Labels of a batch by the averaged (default) or live model."""
        return self.scorer(variant).predict_many(X)

    decision_function = score_many

    def predict_proba_one(self, x, variant: str = "averaged"):
        """Probabilities of one example by the averaged (default) or live model (what the
        wrapped model's ``predict_proba_one`` returns)."""
        return self._probabilistic(variant).predict_proba_one(x)

    def predict_proba_many(self, X, variant: str = "averaged"):
        """Probabilities of a batch by the averaged (default) or live model."""
        return self._probabilistic(variant).predict_proba_many(X)

    def proba_from_scores(self, scores, variant: str = "averaged"):
        """The wrapped model's ``proba_from_scores`` for scores of ``scorer(variant)``."""
        return self._probabilistic(variant).proba_from_scores(scores)

    def _probabilistic(self, variant: str) -> Estimator:
        scorer = self.scorer(variant)
        if not callable(getattr(scorer, "predict_proba_many", None)):
            raise ValueError(f"{type(scorer).__name__} gives no probabilities")
        return scorer

    @property
    def n_features(self) -> int:
        """The wrapped model's input dimension."""
        return self.live_.n_features

    @property
    def classes_(self):
        """The wrapped model's labels."""
        return self.live_.classes_


def _state(model: Estimator, order: str = "C") -> dict:
    """``model.get_state()``, faster: the same dict of the same values.

    ``order="C"`` gives exactly ``get_state()`` (C-contiguous copies), with the copies of
    non-contiguous 2-D arrays made a block of columns at a time: DoS models hold ``U_`` and
    ``V_`` as transposed views of one ``(n_features + 1, 2 rank)`` buffer, and numpy's
    one-pass transposing copy re-reads that buffer from memory once per row (several times
    slower once the buffer outgrows the cache). ``order="K"`` copies each array in its own
    layout (a plain copy, for a rollback through ``set_state``, which only needs the values)."""
    copy = _copy_c if order == "C" else (lambda array: np.array(array, order="K", copy=True))
    meta = model.get_state_meta()
    return {
        "kind": meta["kind"],
        "params": meta["params"],
        "arrays": {name: copy(array) for name, array in model.arrays()},
        "scalars": meta["scalars"],
    }


#: columns per block of the transposing copy (a block of a DoS buffer stays in cache)
_COPY_BLOCK = 1024


def _copy_c(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``array``."""
    if array.ndim != 2 or array.flags.c_contiguous:
        return np.array(array, order="C", copy=True)
    out = np.empty(array.shape, dtype=array.dtype)
    for start in range(0, array.shape[1], _COPY_BLOCK):
        out[:, start : start + _COPY_BLOCK] = array[:, start : start + _COPY_BLOCK]
    return out


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Whether two models' arrays have the same names, shapes and dtypes."""
    return a.keys() == b.keys() and all(
        (a[name].shape, a[name].dtype) == (b[name].shape, b[name].dtype) for name in a
    )


def _concatenate(results: list):
    """Join the per-chunk results of ``learn_many`` (Steps, arrays, lists or None)."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    if all(r is None for r in results):
        return None
    if dataclasses.is_dataclass(first) and all(type(r) is type(first) for r in results):
        fields = {
            f.name: _concatenate([getattr(r, f.name) for r in results])
            for f in dataclasses.fields(first)
        }
        return type(first)(**fields)
    if all(isinstance(r, np.ndarray) for r in results):
        return np.concatenate(results)
    if all(isinstance(r, list) for r in results):
        return [item for r in results for item in r]
    return results
