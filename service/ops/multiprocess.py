"""``/metrics`` of the processes of ``serve --workers N``, read by whichever one is scraped.

Under ``PROMETHEUS_MULTIPROC_DIR`` prometheus-client keeps every value in a file per
process; the supervisor (``service.ops.workers``) gives each role a directory of its own,
``<root>/api`` and ``<root>/learner``. A scrape merges each directory (counters and
histograms summed over its processes, the dead ones' included, so they never go back;
gauges by the mode ``service.ops.metrics`` declares for them) and labels the result
``process="api"`` or ``process="learner"``: a name means what it means for one process
of that role (the api processes' ``feedback_examples_total`` counts what they logged, the
learner's what it learned; ``model_version`` is the version every api process serves, and
the learner's). The series of models this process does not hold (deleted: a file keeps a
removed series) are left out; ``snapshot_age_seconds`` (a function of the time, in the
learner) is computed from the learner's ``snapshot_last_success_timestamp_seconds``; the
settings in ``ONCE`` are one series; the process metrics (``process_*``) are read from
``/proc`` for each live process, labelled with its ``pid``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.samples import Sample

ROLES = ("api", "learner")
#: settings every process exports alike: one series, without ``process`` (the alert rules
#: match them ``on (job, instance)``, which a series per role would make ambiguous)
ONCE = ("lorentztron_snapshot_interval_seconds",)
_PID = re.compile(r"_(\d+)\.db$")


def enabled() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def roles() -> dict[str, Path]:
    """The directory of each role (one, unlabelled, when the variable names no role's)."""
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    if directory.name in ROLES:
        return {role: directory.parent / role for role in ROLES}
    return {"": directory}


def _live_pids(directory: Path) -> list[int]:
    pids = set()
    for path in directory.glob("*.db"):
        match = _PID.search(path.name)
        if match and Path(f"/proc/{match.group(1)}").exists():
            pids.add(int(match.group(1)))
    return sorted(pids)


class _Relabelled:
    """A collector's metrics with extra labels on every sample."""

    def __init__(self, collector, labels: dict[str, str]):
        self.collector, self.labels = collector, labels

    def collect(self):
        for metric in self.collector.collect():
            metric.samples = [
                s._replace(labels={**s.labels, **self.labels}) for s in metric.samples
            ]
            yield metric


def registry(models: set[str] | None, build_info, aggregated=frozenset()) -> CollectorRegistry:
    """A registry of every worker's metrics (``models``: the names whose per-model series
    the scrape shows, None: every one; ``build_info``: this process's, which the files do not hold;
    ``aggregated``: the per-model counters and histograms also shown summed over every
    model, as ``lorentztron_models_*``, as one process shows them)."""
    merged: dict[str, object] = {}
    for role, directory in roles().items():
        if not directory.is_dir():
            continue
        labels = {"process": role} if role else {}
        for metric in MultiProcessCollector(None, str(directory)).collect():
            if metric.name in aggregated:
                total = _aggregate(metric, labels)
                merged.setdefault(total.name, []).append(total)
            metric.samples = [
                s._replace(labels={**s.labels, **labels})
                for s in metric.samples
                if models is None or s.labels.get("model") in (None, *models)
            ]
            merged.setdefault(metric.name, []).append(metric)
        for pid in _live_pids(directory):
            collector = ProcessCollector(pid=lambda pid=pid: pid, registry=None)
            for metric in _Relabelled(collector, {**labels, "pid": str(pid)}).collect():
                merged.setdefault(metric.name, []).append(metric)
    _snapshot_ages(merged)
    for name in ONCE:
        _once(merged.get(name))
    result = CollectorRegistry()
    result.register(_Fixed([m for group in merged.values() for m in _join(group)]))
    result.register(build_info)
    return result


def _aggregate(metric, labels: dict[str, str]) -> Metric:
    """``metric`` summed over its ``model`` label (the models deleted included: their
    counts never go back), named ``lorentztron_models_*``."""

    def renamed(name: str) -> str:
        return "lorentztron_models_" + name.removeprefix("lorentztron_")

    totals: dict[tuple, float] = {}
    for s in metric.samples:
        key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model")))
        totals[key] = totals.get(key, 0.0) + s.value
    total = Metric(renamed(metric.name), f"{metric.documentation} (every model)", metric.type)
    total.samples = [
        Sample(renamed(name), {**dict(pairs), **labels}, value)
        for (name, pairs), value in totals.items()
    ]
    return total


def _join(metrics: list) -> list:
    """Metrics of one name from several roles or processes as one family."""
    first = metrics[0]
    for other in metrics[1:]:
        first.samples.extend(other.samples)
    return [first]


def _once(metrics: list | None) -> None:
    if metrics:
        first = metrics[0]
        first.samples = [
            s._replace(labels={k: v for k, v in s.labels.items() if k != "process"})
            for s in first.samples[:1]
        ]
        for other in metrics[1:]:
            other.samples = []


def _snapshot_ages(merged: dict) -> None:
    """Each model's snapshot age, now, from the time of its last snapshot (the files hold
    no function of the time); none for the api processes, which write no snapshot after a
    model's first (one process answers the ``role!="api"`` of the alert rules alone)."""
    ages = merged.get("lorentztron_snapshot_age_seconds")
    times = merged.get("lorentztron_snapshot_last_success_timestamp_seconds")
    if not ages:
        return
    now = time.time()
    snapshots = [
        s for metric in times or [] for s in metric.samples if s.labels.get("process") != "api"
    ]
    for metric in ages:
        metric.samples = [
            Sample("lorentztron_snapshot_age_seconds", s.labels, now - s.value) for s in snapshots
        ]
        snapshots = []


class _Fixed:
    def __init__(self, metrics: list):
        self.metrics = metrics

    def collect(self):
        return self.metrics
