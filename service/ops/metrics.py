"""Every Prometheus metric of the service, defined once (prefix ``lorentztron_``).

Metrics live in a registry owned by the app (not the process-global default), so that several
apps in one process (tests) do not collide. Labels are bounded: ``endpoint`` is the route
template; ``model`` is removed when a model is deleted, and a scrape shows the per-model
series of at most ``metrics_top_n`` models (those with a stale snapshot first, then the
busiest: most predictions and feedback since the start; ``Metrics.choose``) and those named
in ``metrics_models``, so that a process holding 100,000 models answers a scrape of a few
hundred kilobytes. The per-model metrics are ``service.ops.per_model_metrics`` families
(small children; every counter and histogram also has its aggregate over every model,
``lorentztron_models_*`` without the ``model`` label); ``lorentztron_models_*`` gauges sum
or count what matters over every model; the other models' figures are read through the
API (``GET /v1/models/{name}``).
"""

from __future__ import annotations

import heapq
import os
import platform
import time

import numba
import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from core import __version__
from service.config import Settings
from service.ops.per_model_metrics import ModelFamily, ModelSeries, SharedFamily

#: how the processes of ``serve --workers N`` (one role's) merge a gauge
#: (``service.ops.multiprocess``): the value last set by a live process, unless named here
GAUGE_MODES = {
    "lorentztron_models": "livemax",
    "lorentztron_model_version": "livemin",  # the version every process serves
    "lorentztron_pending_predictions": "livesum",
    "lorentztron_pending_predictions_bytes": "livesum",
    "lorentztron_snapshot_store_up": "livemin",
    "lorentztron_start_time_seconds": "livemin",
}


def Gauge(name: str, *args, **kwargs) -> prometheus_client.Gauge:  # noqa: N802
    """A gauge with its multiprocess mode (``GAUGE_MODES``; ignored in one process)."""
    mode = GAUGE_MODES.get(name, "livemostrecent")
    return prometheus_client.Gauge(name, *args, multiprocess_mode=mode, **kwargs)


# no `*_created` series: a timestamp per counter and histogram child, which doubles the
# series Prometheus stores and which no dashboard or rule reads (process-wide setting)
disable_created_metrics()

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
SNAPSHOT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)
#: 0.1-s steps up to 2 s: a p99 target of 1 s is read to a tenth of it (26 series per model)
FRESHNESS_BUCKETS = (0.05, *(round(0.1 * k, 1) for k in range(1, 21)), 2.5, 3.0, 5.0, 10.0, 30.0)
TAKEOVER_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)


class Metrics:
    """The service's metrics on their own CollectorRegistry; ``snapshot_interval`` is the
    configured one (``Settings.snapshot_interval``), exported for the alert on stale
    snapshots; ``top_n`` and ``models``: the per-model series a scrape shows (module
    docstring; ``Settings.metrics_top_n``, ``Settings.metrics_models``)."""

    def __init__(
        self,
        snapshot_interval: float = Settings.model_fields["snapshot_interval"].default,
        top_n: int = Settings.model_fields["metrics_top_n"].default,
        models: frozenset[str] = frozenset(),
    ):
        self.registry = registry = CollectorRegistry()
        self.top_n, self.named = top_n, frozenset(models)
        self.model_families: list[ModelFamily | SharedFamily] = []

        shared = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))  # serve --workers N

        def per_model(kind: str, name: str, documentation: str, labelnames, **options):
            if shared:
                family = SharedFamily(kind, name, documentation, labelnames, gauge=Gauge, **options)
            else:
                family = ModelFamily(kind, name, documentation, labelnames, **options)
            self.model_families.append(family)
            return family

        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        p = "lorentztron_"
        self.build_info = Info(p + "build", "Build information.", registry=registry)
        self.build_info.info(
            {
                "version": __version__,
                "python": platform.python_version(),
                "numba": numba.__version__,
            }
        )
        self.requests = Counter(
            p + "http_requests_total",
            "HTTP requests.",
            ["endpoint", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            p + "http_request_duration_seconds",
            "HTTP request latency.",
            ["endpoint", "method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.loop_lag = Histogram(
            p + "event_loop_lag_seconds",
            "How late the event loop runs a task due now (a sleep of 5 ms woken late): the "
            "wait a request may meet before it is even read (service.ops.loop_lag).",
            buckets=LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self.loop_stalls = Counter(
            p + "event_loop_stalls",
            "Holds of the event loop of LOOP_STALL seconds or more, each logged with where "
            "the loop thread was (service.ops.loop_lag).",
            registry=registry,
        )
        self.gc_seconds = Histogram(
            p + "gc_seconds",
            "Garbage collections of the process (they hold the GIL: every thread waits), by "
            "generation.",
            ["generation"],
            buckets=LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self.predictions = per_model(
            "counter", p + "predictions_total", "Instances scored.", ["model"]
        )
        self.feedback = per_model(
            "counter", p + "feedback_examples_total", "Labelled examples learned.", ["model"]
        )
        self.updates = per_model(
            "counter", p + "updates_total", "Learning steps by outcome.", ["model", "outcome"]
        )
        self.accuracy = per_model(
            "gauge", p + "progressive_accuracy_ratio", "Progressive accuracy.", ["model", "window"]
        )
        self.loss = per_model(
            "gauge",
            p + "progressive_loss",
            "Progressive mean loss of the model (loss: hinge, log or squared).",
            ["model", "window", "loss"],
        )
        self.rmse = per_model(
            "gauge",
            p + "progressive_rmse",
            "Progressive root mean squared error (regression models).",
            ["model", "window"],
        )
        # a model's members (``service.model.group``): every member and variant
        self.member_accuracy = per_model(
            "gauge",
            p + "member_progressive_accuracy_ratio",
            "Progressive accuracy of a member's variant (the champion's too).",
            ["model", "member", "variant", "window"],
        )
        self.member_loss = per_model(
            "gauge",
            p + "member_progressive_loss",
            "Progressive mean loss of a member's variant.",
            ["model", "member", "variant", "window", "loss"],
        )
        self.member_examples = per_model(
            "gauge",
            p + "member_examples_learned",
            "Examples a member learned.",
            ["model", "member"],
        )
        self.member_difference = per_model(
            "gauge",
            p + "member_error_difference",
            "Paired mean difference of a member variant's errors and the serving one's "
            "(negative: fewer errors).",
            ["model", "member", "variant"],
        )
        self.member_verdict = per_model(
            "gauge",
            p + "member_verdict",
            "A member variant's comparison with what serves: 1 better, -1 worse, "
            "0 undecided (at the model's confidence).",
            ["model", "member", "variant"],
        )
        self.serving = per_model(
            "gauge",
            p + "member_serving",
            "1 for the member and variant that serve.",
            ["model", "member", "variant"],
        )
        self.promotion_auto = per_model(
            "gauge",
            p + "promotion_auto",
            "1 if a better challenger is promoted without an operator.",
            ["model"],
        )
        self.promotions = per_model(
            "counter",
            p + "promotions_total",
            "Promotions of a member (by an operator or the policy).",
            ["model"],
        )
        self.drift_detections = per_model(
            "counter",
            p + "drift_detections_total",
            "Degradations a model's drift detector detected.",
            ["model"],
        )
        self.paused = per_model(
            "gauge", p + "learning_paused", "1 while a model's learning is paused.", ["model"]
        )
        self.backlog = per_model(
            "gauge",
            p + "learning_backlog_records",
            "Feedback records logged while learning is paused, not learned yet.",
            ["model"],
        )
        self.parameter_norm = per_model(
            "gauge", p + "parameter_norm", "Frobenius norm of the live parameters.", ["model"]
        )
        self.model_version = per_model("gauge", p + "model_version", "Version served.", ["model"])
        self.models = Gauge(p + "models", "Live models.", registry=registry)
        self.pending = Gauge(
            p + "pending_predictions", "Prediction ids awaiting feedback.", registry=registry
        )
        self.pending_bytes = Gauge(
            p + "pending_predictions_bytes",
            "Memory of the features kept for pending prediction ids.",
            registry=registry,
        )
        self.pending_expired = Counter(
            p + "prediction_ids_expired_total",
            "Prediction ids dropped after their TTL.",
            registry=registry,
        )
        self.pending_evicted = Counter(
            p + "prediction_ids_evicted_total",
            "Prediction ids dropped under memory pressure.",
            registry=registry,
        )
        self.pending_misses = Counter(
            p + "prediction_id_misses_total",
            "Feedback naming an unknown or expired prediction id.",
            ["reason"],
            registry=registry,
        )
        self.snapshot_duration = per_model(
            "histogram",
            p + "snapshot_duration_seconds",
            "Time to write a snapshot.",
            ["model"],
            buckets=SNAPSHOT_BUCKETS,
        )
        self.snapshot_size = per_model(
            "gauge", p + "snapshot_size_bytes", "Size of the last snapshot.", ["model"]
        )
        self.snapshot_time = per_model(
            "gauge",
            p + "snapshot_last_success_timestamp_seconds",
            "Unix time of the last successful snapshot.",
            ["model"],
        )
        self.snapshot_age = per_model(
            "gauge",
            p + "snapshot_age_seconds",
            "Seconds since the last successful snapshot (since creation if none yet).",
            ["model"],
        )
        self.snapshot_failures = per_model(
            "counter", p + "snapshot_failures_total", "Failed snapshot attempts.", ["model"]
        )
        self.snapshot_interval = Gauge(
            p + "snapshot_interval_seconds",
            "Configured seconds between snapshots of a model that changed "
            "(LORENTZTRON_SNAPSHOT_INTERVAL).",
            registry=registry,
        )
        self.snapshot_interval.set(snapshot_interval)
        self._interval = snapshot_interval
        self.store_up = Gauge(
            p + "snapshot_store_up",
            "1 if the snapshot store answered the last check.",
            registry=registry,
        )
        self.started = Gauge(
            p + "start_time_seconds", "Unix start time of the service.", registry=registry
        )
        # -- the feedback log (durability) and the api/learner roles ----------------------
        self.log_failures = per_model(
            "counter",
            p + "log_append_failures_total",
            "Feedback requests refused because the feedback log could not be written.",
            ["model"],
        )
        self.log_unsnapshotted = per_model(
            "gauge",
            p + "log_unsnapshotted_records",
            "Log records learned since the model's last snapshot (replayed after a crash).",
            ["model"],
        )
        self.replayed = per_model(
            "counter",
            p + "log_replayed_records_total",
            "Log records learned by replay (start-up recovery, or the learner consuming).",
            ["model"],
        )
        self.replay_duration = Histogram(
            p + "log_replay_duration_seconds",
            "Time to replay a model's log after its snapshot at start-up.",
            buckets=SNAPSHOT_BUCKETS,
            registry=registry,
        )
        self.freshness = per_model(
            "histogram",
            p + "freshness_seconds",
            "Delay from an acknowledged feedback to this process serving a model that "
            "includes it (api replicas: per loaded version, for its oldest new record).",
            ["model"],
            buckets=FRESHNESS_BUCKETS,
        )
        self.published = per_model(
            "counter",
            p + "published_versions_total",
            "Model versions published by the learner / loaded by an api replica.",
            ["model"],
        )
        self.model_owner = per_model(
            "gauge",
            p + "model_owner",
            "1 for each model this learner owns (holds the lease of), labelled with its id.",
            ["model", "learner"],
        )
        self.lease_acquisitions = Counter(
            p + "lease_acquisitions_total", "Model leases taken by this learner.", registry=registry
        )
        self.lease_renewals = Counter(
            p + "lease_renewals_total", "Model lease renewals by this learner.", registry=registry
        )
        self.lease_losses = Counter(
            p + "lease_losses_total",
            "Model leases this learner lost (expired or taken before it renewed them).",
            registry=registry,
        )
        self.lease_handovers = Counter(
            p + "lease_handovers_total",
            "Models this learner handed over (rebalancing, shutdown).",
            registry=registry,
        )
        self.fenced_writes = Counter(
            p + "fenced_writes_total",
            "Snapshot writes refused because this learner no longer held the model's lease.",
            registry=registry,
        )
        self.publication_size = Histogram(
            p + "publication_bytes",
            "Size of the deltas a learner publishes (kind: delta, or the delta written with "
            "a full snapshot).",
            ["kind"],
            buckets=(1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9),
            registry=registry,
        )
        self.version_loads = Counter(
            p + "version_loads_total",
            "Published versions an api replica loaded, by how: delta, full, or full after a "
            "delta it could not apply (missed, or its checksum did not match).",
            ["kind"],
            registry=registry,
        )
        self.takeover = Histogram(
            p + "takeover_seconds",
            "From the deadline of a lost lease (its learner died or stalled) to the model "
            "restored and learning on the learner that took it over.",
            buckets=TAKEOVER_BUCKETS,
            registry=registry,
        )
        self.started.set(time.time())
        self.exported_models = Gauge(
            p + "metrics_exported_models",
            "Models whose per-model series this process shows (LORENTZTRON_METRICS_TOP_N, "
            "LORENTZTRON_METRICS_MODELS); every model counts in the lorentztron_models_* "
            "aggregates.",
            registry=registry,
        )
        self.models_paused = Gauge(
            p + "models_learning_paused",
            "Models whose learning is paused (every model of the process).",
            registry=registry,
        )
        self.models_backlog = Gauge(
            p + "models_learning_backlog_records",
            "Feedback records logged while learning is paused, not learned yet (every model).",
            registry=registry,
        )
        self.models_unsnapshotted = Gauge(
            p + "models_log_unsnapshotted_records",
            "Log records learned since the models' last snapshots (every model).",
            registry=registry,
        )
        self.models_stale = Gauge(
            p + "models_snapshot_stale",
            "Models that learned since their last snapshot, taken more than 3 snapshot "
            "intervals (at least a minute) ago: LorentztronSnapshotStale for every model.",
            registry=registry,
        )
        registry.register(ModelSeries(self.model_families, self.exported))
        #: the models whose series the last scrape showed (None: not chosen yet)
        self._exported: set[str] | None = None
        self._expired_seen = 0
        self._evicted_seen = 0
        self._log_failures_seen: dict[str, int] = {}
        #: the group counters already counted (promotions, drift detections), by model
        self._group_seen: dict[tuple[str, str], int] = {}
        # label children of the per-request metrics, looked up once (``labels`` validates
        # and locks on every call): by (endpoint, method, status), and by model
        self._request_children: dict[tuple, tuple] = {}
        self._learn_children: dict[str, tuple] = {}
        self._predict_children: dict[str, object] = {}

    def request_done(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        """Count a request and observe its latency."""
        key = (endpoint, method, status)
        children = self._request_children.get(key)
        if children is None:
            children = (
                self.requests.labels(endpoint, method, str(status)),
                self.latency.labels(endpoint, method),
            )
            if len(self._request_children) < 4096:  # (methods are the client's choice)
                self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def learned(self, name: str, n: int, n_aggressive: int | None) -> None:
        """Count ``n`` feedback examples of a model and its updates by outcome (None: only
        logged, on an api replica)."""
        children = self._learn_children.get(name)
        if children is None:
            children = self._learn_children[name] = (
                self.feedback.labels(name),
                self.updates.labels(name, "aggressive"),
                self.updates.labels(name, "passive"),
            )
        children[0].inc(n)
        if n_aggressive is not None:
            children[1].inc(n_aggressive)
            children[2].inc(n - n_aggressive)

    def predicted(self, name: str, n: int) -> None:
        """Count ``n`` predictions of a model."""
        child = self._predict_children.get(name)
        if child is None:
            child = self._predict_children[name] = self.predictions.labels(name)
        child.inc(n)

    def observe_cache(self, cache) -> None:
        self.pending.set(len(cache))
        self.pending_bytes.set(cache.nbytes)
        self.pending_expired.inc(cache.expired - self._expired_seen)
        self._expired_seen = cache.expired
        self.pending_evicted.inc(cache.evicted - self._evicted_seen)
        self._evicted_seen = cache.evicted

    def observe_model(self, live) -> None:
        """Refresh the model's gauges (and counters kept by the model) for a scrape."""
        summary = live.champion.metrics()
        name = live.name
        self.observe_members(live)
        self._count_events(live)
        record = live.record
        self.model_version.labels(name).set(live.version)
        self.log_unsnapshotted.labels(name).set(record.records_since_snapshot)
        self.snapshot_age.labels(name).set(
            time.time() - (record.last_snapshot_at or live.created_at)
        )
        # (at 0 from the start, so that ``increase()`` sees a model's first promotion or drift)
        self.promotions.labels(name)
        self.drift_detections.labels(name)
        for window, prefix in (("cumulative", ""), ("recent", "recent_")):
            if summary[prefix + "accuracy"] is not None:
                self.accuracy.labels(name, window).set(summary[prefix + "accuracy"])
            if summary[prefix + "loss"] is not None:
                self.loss.labels(name, window, summary["loss_kind"]).set(summary[prefix + "loss"])
            if summary[prefix + "rmse"] is not None:
                self.rmse.labels(name, window).set(summary[prefix + "rmse"])

    def observe_members(self, live) -> None:
        """Every member and variant's figures, read together under the model's lock; the
        series of members gone (removed, replaced) go too."""
        members, group = live.describe(_members_view), live.group
        name = live.name
        present, compared = set(), set()
        for member, variants, examples in members:
            self.member_examples.labels(name, member).set(examples)
            for variant, summary, comparison, serving in variants:
                present.add((member, variant))
                if comparison is not None:
                    compared.add((member, variant))
                for window, prefix in (("cumulative", ""), ("recent", "recent_")):
                    if summary[prefix + "accuracy"] is not None:
                        self.member_accuracy.labels(name, member, variant, window).set(
                            summary[prefix + "accuracy"]
                        )
                    if summary[prefix + "loss"] is not None:
                        self.member_loss.labels(
                            name, member, variant, window, summary["loss_kind"]
                        ).set(summary[prefix + "loss"])
                self.serving.labels(name, member, variant).set(1 if serving else 0)
                if comparison is not None:
                    difference = comparison["mean_difference"]
                    if difference is not None:
                        self.member_difference.labels(name, member, variant).set(difference)
                    verdict = {"better": 1, "worse": -1}.get(comparison["verdict"], 0)
                    self.member_verdict.labels(name, member, variant).set(verdict)
        for metric, kept in (
            (self.member_difference, compared),  # (what serves is compared with nothing)
            (self.member_verdict, compared),
            (self.serving, present),
            (self.member_accuracy, present),
            (self.member_loss, present),
        ):
            for labels in list(metric._metrics):
                if labels[0] == name and (labels[1], labels[2]) not in kept:
                    metric.remove(*labels)
        for labels in list(self.member_examples._metrics):
            if labels[0] == name and labels[1] not in {member for member, _ in present}:
                self.member_examples.remove(*labels)
        policy = group.policy
        self.promotion_auto.labels(name).set(1 if policy.promotion.auto else 0)
        self.paused.labels(name).set(1 if group.paused else 0)
        self.backlog.labels(name).set(live.record.backlog)

    def track_model(self, live, counted: bool = False) -> None:
        """Count a new model (its series are made when something happens to it, or when a
        scrape shows it); ``counted``: it was already (a dormant model restored)."""
        if not counted:
            self.models.inc()

    # -- the models a scrape shows -------------------------------------------------------
    def exported(self) -> set[str] | None:
        """The models whose per-model series a scrape shows: those the last ``observe_models``
        chose (None: every model, until a scrape chose)."""
        return self._exported

    def aggregated(self) -> frozenset[str]:
        """The per-model counters and histograms shown summed over every model as well (by
        their collected names: a counter's without ``_total``)."""
        return frozenset(
            family.name.removesuffix("_total")
            for family in self.model_families
            if family.kind != "gauge"
        )

    def choose(self, names, stale: frozenset[str] = frozenset()) -> set[str]:
        """``metrics_models`` and ``metrics_top_n`` others of ``names``: the ``stale`` ones
        first (the models ``LorentztronSnapshotStale`` is about), then the busiest (most
        predictions and feedback examples since the start; ties by name)."""
        names = list(names)
        named = {name for name in names if name in self.named}
        if len(names) - len(named) <= self.top_n:
            return set(names)
        predicted, learned = self.predictions.value, self.feedback.value
        busiest = heapq.nsmallest(
            self.top_n,
            (name for name in names if name not in named),
            key=lambda name: (name not in stale, -(predicted(name) + learned(name)), name),
        )
        return named | set(busiest)

    def observe_models(self, models: list) -> None:
        """A scrape: the aggregates over every model of ``models`` (the serving ones), then
        the series of the models it shows (``choose``), whose gauges are refreshed."""
        now = time.time()
        stale_after = max(3 * self._interval, 60.0)
        paused = backlog = unsnapshotted = 0
        stale = set()
        for live in models:
            record = live.record
            paused += live.group.paused
            backlog += record.backlog
            unsnapshotted += record.records_since_snapshot
            if record.records_since_snapshot and (
                now - (record.last_snapshot_at or live.created_at) > stale_after
            ):
                stale.add(live.name)
            self._count_events(live)
        self.models_paused.set(paused)
        self.models_backlog.set(backlog)
        self.models_unsnapshotted.set(unsnapshotted)
        self.models_stale.set(len(stale))
        exported = self.choose((live.name for live in models), frozenset(stale))
        for live in models:
            if live.name in exported:
                self.observe_model(live)
        for family in self.model_families:  # (gauges of models no longer shown go)
            if family.kind == "gauge" and family is not self.model_owner:
                for labels in list(family._metrics):
                    if labels[0] not in exported:
                        family.remove(*labels)
        self._exported = exported
        self.exported_models.set(len(exported))

    def _count_events(self, live) -> None:
        """The model's counters that the model keeps itself (log append failures,
        promotions, drift detections), counted since the last look."""
        name = live.name
        failures = live.journal.failures if live.journal is not None else 0
        seen = self._log_failures_seen.get(name, 0)
        if failures > seen:
            self.log_failures.labels(name).inc(failures - seen)
            self._log_failures_seen[name] = failures
        group = live.group
        for counter, seen_key, value in (
            (self.promotions, "promotions", group.promotions),
            (self.drift_detections, "detections", group.detections),
        ):
            seen = self._group_seen.get((name, seen_key), 0)
            if value > seen:
                counter.labels(name).inc(value - seen)
            if value != seen:
                self._group_seen[name, seen_key] = value

    def not_owner(self, name: str, learner: str) -> None:
        """A learner no longer owns the model: its owner series goes."""
        try:
            self.model_owner.remove(name, learner)
        except KeyError:
            pass

    def forget_model(self, name: str) -> None:
        self.models.dec()
        self._log_failures_seen.pop(name, None)
        self._learn_children.pop(name, None)
        self._predict_children.pop(name, None)
        self._group_seen.pop((name, "promotions"), None)
        self._group_seen.pop((name, "detections"), None)
        for family in self.model_families:
            family.forget(name)


def _members_view(live) -> list:
    """``(member, [(variant, metrics summary, comparison, serving)], examples learned)`` of
    every member (read under the model's lock: ``LiveModel.describe``)."""
    group = live.group
    return [
        (
            member.name,
            [
                (
                    variant,
                    member.metrics(variant),
                    group.comparison(member.name, variant),
                    member is group.champion and variant == group.variant,
                )
                for variant in member.variants
            ],
            member.counters.examples_learned,
        )
        for member in group.members()
    ]
