"""The per-model metric families: the metrics whose first label is ``model``, bounded for
a process that holds thousands of models (the metrics themselves: ``service.ops.metrics``).

prometheus-client's child per model and label values holds a lock and objects of its own;
here a child is a few slots (``_Value``, ``_Buckets``) under its family's lock. A scrape
shows the per-model series of the models ``Metrics.choose`` picks (those named in
``METRICS_MODELS`` and the ``METRICS_TOP_N`` busiest or with a stale snapshot), so that it
stays small whatever the number of models; every counter and histogram also shows its
aggregate over every model, ``lorentztron_models_*`` without the ``model`` label. Under
``PROMETHEUS_MULTIPROC_DIR`` (``serve --workers N``) the families are prometheus-client's
own (``SharedFamily``), whose files a scrape merges and bounds (``service.ops.multiprocess``).
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Callable

import prometheus_client
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.utils import floatToGoString


class _Value:
    """A counter's or gauge's value (and its aggregate's, for counters): a few slots, not
    prometheus_client's child with its own lock, for every model of a process."""

    __slots__ = ("family", "total", "value")

    def __init__(self, family: ModelFamily, total: _Value | None):
        self.family, self.total, self.value = family, total, 0.0

    def inc(self, amount: float = 1.0) -> None:
        with self.family.lock:
            self.value += amount
            if self.total is not None:
                self.total.value += amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def get(self) -> float:
        return self.value


class _Buckets:
    """A histogram's counts per bucket (not cumulative) and sum, and its aggregate's."""

    __slots__ = ("counts", "family", "sum", "total")

    def __init__(self, family: ModelFamily, total: _Buckets | None):
        self.family, self.total = family, total
        self.counts, self.sum = [0] * len(family.buckets), 0.0

    def observe(self, value: float) -> None:
        index = bisect_left(self.family.buckets, value)  # (le is inclusive)
        with self.family.lock:
            for held in (self, self.total) if self.total is not None else (self,):
                held.counts[index] += 1
                held.sum += value


class ModelFamily:
    """A metric whose first label is ``model``, as ``prometheus_client``'s ``labels`` /
    ``remove`` know it, with small children; a scrape shows the models ``collect`` is given
    (``Metrics.exported``). A counter or histogram keeps its aggregate over every model (by
    its other labels), shown as ``lorentztron_models_<name>``; a model removed leaves its
    counts in the aggregate, so that it never decreases."""

    def __init__(self, kind: str, name: str, documentation: str, labelnames, buckets=()):
        self.kind, self.name, self.documentation = kind, name, documentation
        self.labelnames = tuple(labelnames)
        self.buckets = (*(float(b) for b in buckets), math.inf) if kind == "histogram" else ()
        self.lock = threading.Lock()
        #: label values -> child, as prometheus_client names it
        self._metrics: dict[tuple[str, ...], _Value | _Buckets] = {}
        self._totals: dict[tuple[str, ...], _Value | _Buckets] = {}

    def labels(self, *values) -> _Value | _Buckets:
        key = tuple(str(value) for value in values)
        child = self._metrics.get(key)
        if child is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name} takes the labels {self.labelnames}, got {key}")
            make = _Buckets if self.kind == "histogram" else _Value
            with self.lock:
                total = None
                if self.kind != "gauge":
                    total = self._totals.get(key[1:])
                    if total is None:
                        total = self._totals[key[1:]] = make(self, None)
                child = self._metrics.setdefault(key, make(self, total))
        return child

    def remove(self, *values) -> None:
        with self.lock:
            del self._metrics[tuple(str(value) for value in values)]

    def forget(self, model: str) -> None:
        """Remove every series of ``model``."""
        with self.lock:
            for key in [key for key in self._metrics if key[0] == model]:
                del self._metrics[key]

    def value(self, *values) -> float:
        """A counter's or gauge's value (0 if it has none)."""
        child = self._metrics.get(tuple(values))
        return child.value if child is not None else 0.0

    def collect(self, exported: set[str] | None) -> list:
        """The family of the ``exported`` models (None: every model), then the aggregate."""
        with self.lock:
            children = [
                (key, child)
                for key, child in self._metrics.items()
                if exported is None or key[0] in exported
            ]
            totals = list(self._totals.items())
        families = [self._family(self.name, self.documentation, self.labelnames, children)]
        if self.kind != "gauge":
            families.append(
                self._family(
                    "lorentztron_models_" + self.name.removeprefix("lorentztron_"),
                    f"{self.documentation} (every model of the process)",
                    self.labelnames[1:],
                    totals,
                )
            )
        return families

    def _family(self, name: str, documentation: str, labelnames, children):
        if self.kind == "histogram":
            family = HistogramMetricFamily(name, documentation, labels=labelnames)
            for key, child in children:
                cumulative, buckets = 0, []
                for bound, count in zip(self.buckets, child.counts, strict=True):
                    cumulative += count
                    buckets.append((floatToGoString(bound), cumulative))
                family.add_metric(list(key), buckets, child.sum)
            return family
        make = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        family = make(name, documentation, labels=labelnames)
        for key, child in children:
            family.add_metric(list(key), child.value)
        return family


class SharedFamily:
    """``ModelFamily``'s interface over prometheus_client's own metric, for the processes of
    ``serve --workers N`` (``PROMETHEUS_MULTIPROC_DIR`` set): its values go to the process's
    files, which a scrape merges and bounds (``service.ops.multiprocess.registry``: the
    models shown and the ``lorentztron_models_*`` aggregates), so it collects nothing here.
    ``gauge`` makes a gauge with its multiprocess mode (``service.ops.metrics.Gauge``)."""

    def __init__(self, kind: str, name: str, documentation: str, labelnames, buckets=(), *, gauge):
        self.kind, self.name = kind, name
        if kind == "histogram":
            self.metric = prometheus_client.Histogram(
                name, documentation, labelnames, buckets=buckets, registry=None
            )
        elif kind == "counter":
            self.metric = prometheus_client.Counter(name, documentation, labelnames, registry=None)
        else:
            self.metric = gauge(name, documentation, labelnames, registry=None)

    @property
    def _metrics(self) -> dict:
        return self.metric._metrics

    def labels(self, *values):
        return self.metric.labels(*values)

    def remove(self, *values) -> None:
        self.metric.remove(*values)

    def forget(self, model: str) -> None:
        for key in [key for key in list(self.metric._metrics) if key[0] == model]:
            self.metric.remove(*key)

    def value(self, *values) -> float:
        child = self.metric._metrics.get(tuple(values))
        return child._value.get() if child is not None else 0.0

    def collect(self, exported) -> list:
        return []


class ModelSeries:
    """The collector of the per-model ``families`` (registered once on the app's registry):
    each family's series of the models ``exported()`` names (None: every model), then its
    aggregate."""

    def __init__(
        self, families: list[ModelFamily | SharedFamily], exported: Callable[[], set[str] | None]
    ):
        self.families, self.exported = families, exported

    def collect(self):
        exported = self.exported()
        for family in self.families:
            yield from family.collect(exported)
