"""Service settings, read from ``LORENTZTRON_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of one service process. Every field is ``LORENTZTRON_<NAME>`` in the
    environment (lists are comma-separated)."""

    model_config = SettingsConfigDict(env_prefix="LORENTZTRON_", extra="ignore")

    #: Address to listen on (``0.0.0.0``: every interface).
    host: str = "127.0.0.1"
    #: Port to listen on.
    port: int = Field(8000, ge=0, le=65535)
    #: Log level: ``debug``, ``info`` (one JSON line per request), ``warning``, ``error``.
    log_level: str = "info"

    #: Redis URL for snapshots (``redis://host:6379/0``); unset = local snapshot files.
    redis_url: str | None = None
    #: Prefix of every Redis key this service writes (no braces: keys are hash-tagged).
    redis_prefix: str = "lorentztron"
    #: ``REDIS_URL`` names one node of a Redis Cluster (the others are found from it).
    redis_cluster: bool = False
    #: Acknowledge feedback only once this many Redis replicas have its log record
    #: (``WAIT``): with a replica per master, a master lost after an acknowledgement and
    #: replaced by its replica keeps every acknowledged record. 0: the master's word.
    redis_wait_replicas: int = Field(0, ge=0)
    #: Seconds an append waits for those replicas before the feedback is refused (503).
    redis_wait_timeout: float = Field(1.0, gt=0)
    #: Directory of the local snapshot store (used when no Redis URL is set).
    snapshot_dir: Path = Path("var/snapshots")
    #: Seconds between background snapshots of changed models.
    snapshot_interval: float = Field(30.0, gt=0)
    #: Snapshots kept per model (older ones are deleted).
    snapshot_retention: int = Field(5, ge=1)

    #: Largest request body accepted, in bytes (413 beyond).
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0)
    #: Seconds a request's body may take to arrive (the time the service waits for it); a
    #: slower one is answered 408 ``request_timeout`` and its connection closed.
    body_timeout: float = Field(30.0, gt=0)
    #: Most instances or examples in one JSON request.
    max_batch: int = Field(10_000, gt=0)
    #: Most live models.
    max_models: int = Field(100, gt=0)
    #: Most floats one model holds in memory: its learned arrays (DoS: n_features * 2 * rank,
    #: twice with time averaging) and the buffers its snapshots are captured into (as many
    #: again). A float32 DoS model counts half.
    max_model_floats: int = Field(1 << 27, gt=0)
    #: Most bytes all models together hold in memory (what ``MAX_MODEL_FLOATS`` counts, in
    #: bytes), checked before a model is created or imported. Unset: half the memory the
    #: process may use (its cgroup's limit, else the machine's), leaving the other half for
    #: the encoding of snapshots and exports, requests and the prediction cache.
    max_total_bytes: int | None = Field(None, gt=0)
    #: Most binary models in one multi-class reduction (one-vs-one over k classes holds
    #: k (k - 1) / 2; at the default, a create answers in about half a second).
    max_submodels: int = Field(5000, gt=0)

    #: Seconds a prediction id can be answered with feedback.
    prediction_ttl: float = Field(3600.0, gt=0)
    #: Memory bound of the features kept for pending prediction ids.
    prediction_cache_bytes: int = Field(256 * 1024 * 1024, gt=0)

    #: Default time-averaging interval (examples) when a model does not set one.
    averaging_interval: int = Field(50_000, gt=0)
    #: Examples in the recent window of the progressive metrics.
    metrics_window: int = Field(1000, gt=0)
    #: Models whose per-model series ``/metrics`` shows besides ``metrics_models``: those
    #: whose snapshot is stale, then the busiest (most predictions and feedback since the
    #: start). Every model counts in the
    #: ``lorentztron_models_*`` aggregates; the others are read through the API.
    metrics_top_n: int = Field(100, ge=0)
    #: Models whose per-model series ``/metrics`` always shows (comma-separated names).
    metrics_models: Annotated[list[str], NoDecode] = []
    #: Seconds of a hold of the event loop (no request read meanwhile) that is logged with
    #: the loop thread's stack and counted in ``lorentztron_event_loop_stalls_total``, once
    #: the process has started (its kernels compiled); 0: off.
    loop_stall: float = Field(0.1, ge=0)

    #: Serve ``POST .../predict``, ``.../feedback`` and V2 ``.../infer`` through
    #: ``service.http.fastpath`` (same handlers and responses, without FastAPI's routing and
    #: dependency solving).
    fast_path: bool = True
    #: Most threads running request handlers (the app's pool, ``service.http.threads``).
    handler_threads: int = Field(40, ge=1)
    #: ``lorentztron serve`` on glibc: allocations below 1 GiB come from the heap and freed
    #: memory is kept for reuse (``mallopt``), instead of large arrays being mapped, faulted
    #: in page by page and unmapped on every bulk request; the resident size stays near its
    #: peak. See ``service.ops.cli.tune_malloc``.
    malloc_keep_freed: bool = True

    #: Models restored at start-up before the service is ready (the first by name); the
    #: others (``role=all``) are restored from their snapshot and log on first use, so that
    #: a restart of a process holding many models takes seconds, not a minute.
    eager_restore: int = Field(100, ge=0)
    #: Seconds a model request that arrives while the models are being restored (start-up)
    #: waits for them before it is answered 503 ``not_ready``.
    startup_wait: float = Field(30.0, ge=0)

    #: Run mode: ``all`` (one process serves, learns and snapshots), ``api`` (serves
    #: predictions from published versions and appends feedback to the log; needs Redis) or
    #: ``learner`` (any number: each learns the models whose lease it holds, publishes them).
    role: Literal["all", "api", "learner"] = "all"
    #: ``lorentztron serve``: HTTP processes sharing the port (``--workers``). Above 1 the
    #: processes are api replicas (and, for the ``all`` role, one learner beside them) over
    #: Redis, under one supervising process: it needs ``REDIS_URL`` (``service.ops.workers``).
    workers: int = Field(1, ge=1, le=256)
    #: Append every accepted feedback batch to a durable log before acknowledging it, and
    #: replay the log after the latest snapshot on start-up.
    feedback_log: bool = True
    #: Directory of the local feedback log (used when no Redis URL is set); unset:
    #: ``<snapshot_dir>/.log`` (model names cannot start with a dot).
    log_dir: Path | None = None
    #: Local log: ``batch`` fsyncs every appended request batch before acknowledging it;
    #: ``none`` leaves write-back to the OS (survives a process crash, not a power loss).
    log_fsync: Literal["batch", "none"] = "batch"
    #: Local log: where segments covered by a snapshot are moved instead of being deleted
    #: (the full labelled history). Unset: deleted.
    log_archive_dir: Path | None = None
    #: Drop the log records a snapshot covers (false: the log keeps the whole labelled
    #: history; with Redis it then grows without bound).
    log_trim: bool = True
    #: Log records (request batches) since a model's last snapshot that trigger an early
    #: one, once they also hold ``log_snapshot_ratio`` times the model's size in bytes.
    log_snapshot_records: int = Field(10_000, gt=0)
    #: An early snapshot waits until the log since the last one holds this many times the
    #: model's size (8 bytes per learned float), so that a snapshot writes no more than
    #: about that multiple of what it trims (Redis's ``auto-aof-rewrite-percentage``); 0:
    #: ``log_snapshot_records`` alone.
    log_snapshot_ratio: float = Field(1.0, ge=0)
    #: Learner: seconds between publications of changed models to the api replicas.
    publish_interval: float = Field(0.25, gt=0)
    #: Learner: publications between two full snapshots, the others being deltas (the
    #: rows changed since the previous publication, ``service.scale.deltas``); 1: no deltas.
    full_snapshot_every: int = Field(40, ge=1)
    #: Api replicas: seconds between polls of the latest versions (fallback to pub/sub).
    poll_interval: float = Field(2.0, gt=0)
    #: Learners: seconds a model's lease lasts unless renewed (renewed every third of it);
    #: a dead learner's models are taken over within twice this.
    lease_ttl: float = Field(10.0, gt=0)

    #: Seconds an ``Idempotency-Key`` is answered again (feedback, create, restore, import).
    idempotency_ttl: float = Field(86400.0, gt=0)
    #: Most bytes of kept answers of keyed requests per model (the oldest dropped first).
    idempotency_bytes: int = Field(32 * 1024 * 1024, gt=0)

    #: Bearer keys allowed to write (create/delete/import models, feedback, snapshots) and to
    #: export a model (its full weights). Empty: open.
    write_keys: Annotated[list[str], NoDecode] = []
    #: Bearer keys allowed to read (predict, list). Empty: reads are open.
    read_keys: Annotated[list[str], NoDecode] = []

    @field_validator("write_keys", "read_keys", "metrics_models", mode="before")
    @classmethod
    def _split_keys(cls, value):
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    def __repr_args__(self):
        # keys are secrets: never in reprs or logs
        for name, value in super().__repr_args__():
            yield name, ("***" if name.endswith("_keys") and value else value)


@lru_cache
def get_settings() -> Settings:
    return Settings()
