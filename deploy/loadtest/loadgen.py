"""Async HTTP load generator for the lorentztron service (asyncio + httpx, one process).

Modes (``--mode``):

- ``predict``: one instance per ``POST /v1/models/{name}/predict``;
- ``feedback``: one labelled example per JSON ``POST /v1/models/{name}/feedback``;
- ``mixed``: ``--feedback-fraction`` (default 0.2) of the requests are feedback that answers
  an earlier prediction by its ``prediction_id`` (features are sent only when no prediction is
  pending yet), the rest are predictions;
- ``bulk``: svmlight bodies (``text/x-svmlight``) of ``--batch`` examples each.

Loops:

- open loop (``--rate R``): request i is due at ``start + i / R`` whatever happened to the
  earlier ones, and its latency is measured from that due time, so a slow server cannot
  slow the generator down and hide its own queueing (no coordinated omission). The summary
  also reports ``send_lag_ms``, how late the generator itself was in starting requests: when
  it is large the generator, not the server, was the bottleneck.
- closed loop (no ``--rate``): ``--concurrency`` clients each send a request, wait for the
  answer and send the next; this measures the largest sustainable throughput.

The generator creates its own model (``--kind``, ``--rank``, ``--n-features`` hashed buckets)
and deletes it at the end (``--keep-model`` keeps it). ``--model NAME`` uses an existing model
instead: its kind, input size and classes are read from ``GET /v1/models/{name}``, so that
rows fit its input and labels are its own classes (or real values, for regression).
Examples are synthetic sparse rows with ``--nnz`` non-zeros at random indices and labels from
a fixed random linear teacher (one per class beyond two), with ``--label-noise`` of them
changed so that the models keep making aggressive updates. ``--key`` (or
``LORENTZTRON_KEY``) is sent as ``Authorization: Bearer`` on every request, for a service
with keys (a read key is enough for ``predict`` against an existing model).

Sweep (``--sweep``, open loop): runs ``--duration`` seconds at each rate from ``--rate``,
multiplied by ``--sweep-factor`` up to ``--sweep-max``, and reports the highest rate whose
p99 stays under ``--p99-max`` milliseconds with no errors (the knee); it stops at the first
rate past the bound. Every loop is bounded: ``--duration`` seconds (plus
``--warmup``, not measured, and at most ``--drain-timeout`` for the last answers) and at most
``--max-requests`` requests.

It prints throughput, latency percentiles (p50/p90/p99/max) and error counts, and writes the
summary as JSON with ``--json PATH``. The generator's own CPU time is reported
(``client_cpu_s``): it competes with the server when both run on one machine. Requests go
through an ``httpx.AsyncClient`` by default; ``--client raw`` sends them over plain asyncio
streams (HTTP/1.1 keep-alive), which costs a small fraction of httpx's CPU per request and
leaves more of a small machine to the server being measured. The model is created and
deleted with httpx either way.

Examples::

    python deploy/loadtest/loadgen.py --mode predict --rate 500 --duration 10
    python deploy/loadtest/loadgen.py --mode feedback --concurrency 8 --duration 10
    python deploy/loadtest/loadgen.py --mode mixed --concurrency 16 --json mixed.json
    python deploy/loadtest/loadgen.py --mode bulk --batch 20000 --concurrency 1
    python deploy/loadtest/loadgen.py --mode predict --rate 500 --client raw
    python deploy/loadtest/loadgen.py --mode predict --model spam --key $KEY --rate 100 \
        --sweep --sweep-max 5000 --p99-max 25 --json sweep.json

Only loopback URLs are accepted unless ``--allow-remote`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import gc
import ipaddress
import json
import math
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

MODES = ("predict", "feedback", "mixed", "bulk")
JSON_TYPE = b"application/json"
SVMLIGHT_TYPE = b"text/x-svmlight"
NDJSON_TYPE = b"application/x-ndjson"
KINDS = ("dos", "linear-pa")
PERCENTILES = (50, 90, 99)


@dataclasses.dataclass
class LoadConfig:
    """One load run. ``rate`` set: open loop at ``rate`` requests/s (``concurrency`` caps the
    connections); ``rate`` None: closed loop with ``concurrency`` clients."""

    url: str = "http://127.0.0.1:8000"
    mode: str = "predict"
    rate: float | None = None
    concurrency: int = 8
    duration: float = 10.0
    warmup: float = 1.0
    drain_timeout: float = 10.0
    max_requests: int = 10_000_000
    max_inflight: int = 10_000
    timeout: float = 30.0
    kind: str = "dos"
    rank: int = 16
    n_features: int = 1 << 18
    nnz: int = 30
    batch: int = 20_000
    bulk_bodies: int = 2
    pool: int = 4096
    feedback_fraction: float = 0.2
    label_noise: float = 0.05
    averaging_interval: int | None = None
    variant: str = "live"
    client: str = "httpx"
    seed: int = 0
    model: str | None = None
    keep_model: bool = False
    allow_remote: bool = False
    #: bearer key sent with every request (None: none)
    key: str | None = None
    #: the model's labels: None for -1/+1, a list of classes, or "regression" (real values)
    classes: list | str | None = None

    def check(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.client not in CLIENTS:
            raise ValueError(f"client must be one of {sorted(CLIENTS)}, got {self.client!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        if self.concurrency < 1 or self.duration <= 0 or self.warmup < 0:
            raise ValueError("concurrency must be >= 1, duration > 0 and warmup >= 0")
        if not 1 <= self.nnz <= self.n_features:
            raise ValueError(f"nnz must be in [1, n_features], got {self.nnz}")
        if not 0 <= self.feedback_fraction <= 1 or not 0 <= self.label_noise <= 0.5:
            raise ValueError("feedback_fraction must be in [0, 1] and label_noise in [0, 0.5]")
        host = urlsplit(self.url).hostname or ""
        if not self.allow_remote and not _is_loopback(host):
            raise ValueError(f"{self.url} is not a loopback address (use --allow-remote)")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- synthetic workload ---------------------------------------------------------------------
def _teacher_sign(index: int) -> float:
    """A fixed pseudo-random +-1 weight per feature (Knuth's multiplicative hash)."""
    return 1.0 if (index * 2654435761 >> 13) & 1 else -1.0


class Workload:
    """Pre-encoded request bodies, built once so that encoding costs nothing while measuring.

    ``rows`` are (indices, values, label) with ``nnz`` distinct sorted 0-based indices, values
    of unit-norm scale, and the label of the teacher ``sign(sum_j s_j v_j)`` flipped with
    probability ``label_noise``.
    """

    def __init__(self, config: LoadConfig):
        self.config = config
        rng = random.Random(config.seed)
        self.rows = [self._row(rng) for _ in range(config.pool)]
        self.predict_bodies = [
            json.dumps({"instances": [{"indices": i, "values": v}]}).encode()
            for i, v, _ in self.rows
        ]
        self.feedback_bodies = [
            json.dumps({"examples": [{"indices": i, "values": v, "label": y}]}).encode()
            for i, v, y in self.rows
        ]
        self.labels = [y for _, _, y in self.rows]
        self.bulk_bodies: list[bytes] = []
        #: svmlight (numeric labels) or NDJSON (text classes)
        self.bulk_type = SVMLIGHT_TYPE
        if isinstance(config.classes, list) and any(isinstance(c, str) for c in config.classes):
            self.bulk_type = NDJSON_TYPE
        if config.mode == "bulk":
            for _ in range(config.bulk_bodies):
                lines = []
                for _ in range(config.batch):
                    indices, values, label = self._row(rng)
                    if self.bulk_type == NDJSON_TYPE:
                        example = {"indices": indices, "values": values, "label": label}
                        lines.append(json.dumps(example) + "\n")
                        continue
                    features = " ".join(
                        f"{j + 1}:{v!r}" for j, v in zip(indices, values, strict=True)
                    )
                    lines.append(f"{label} {features}\n")
                self.bulk_bodies.append("".join(lines).encode())

    def _row(self, rng: random.Random) -> tuple[list[int], list[float], int]:
        config = self.config
        indices = sorted(rng.sample(range(config.n_features), config.nnz))
        scale = 1.0 / math.sqrt(config.nnz)
        values = [round(rng.gauss(0.0, 1.0) * scale, 4) or scale for _ in indices]
        label = self._label(indices, values, rng)
        return indices, values, label

    def _label(self, indices, values, rng: random.Random):
        """The teacher's label of a row: +-1, one of ``classes`` (one teacher per class,
        the best score wins), or a real value (regression); noisy by ``label_noise``."""
        classes = self.config.classes
        pairs = list(zip(indices, values, strict=True))
        if classes == "regression":
            score = sum(_teacher_sign(j) * v for j, v in pairs)
            return round(score + rng.gauss(0.0, self.config.label_noise), 6)
        labels = classes or [-1, 1]
        if len(labels) == 2:
            best = int(sum(_teacher_sign(j) * v for j, v in pairs) > 0)
        else:
            scores = [
                sum(_teacher_sign(j * len(labels) + c) * v for j, v in pairs)
                for c in range(len(labels))
            ]
            best = scores.index(max(scores))
        if rng.random() < self.config.label_noise:  # any other class
            other = rng.randrange(len(labels) - 1)
            best = other + (other >= best)
        return labels[best]

    def model_spec(self, name: str) -> dict:
        config = self.config
        spec = {
            "name": name,
            "kind": config.kind,
            "params": {"rank": config.rank} if config.kind == "dos" else {},
            "input": {"hashed": config.n_features},
        }
        if config.averaging_interval:
            spec["averaging"] = {"interval": config.averaging_interval}
        return spec


# -- measurements ---------------------------------------------------------------------------
def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list (the value below which p% fall)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(latencies: list[float]) -> dict:
    """Milliseconds: count, mean, p50/p90/p99 and max of latencies given in seconds."""
    values = sorted(latencies)
    out: dict = {"count": len(values)}
    if not values:
        return out | {"mean": None, "max": None} | {f"p{p}": None for p in PERCENTILES}
    out["mean"] = round(1000 * sum(values) / len(values), 4)
    for p in PERCENTILES:
        out[f"p{p}"] = round(1000 * percentile(values, p), 4)
    out["max"] = round(1000 * values[-1], 4)
    return out


class Stats:
    """Latencies and outcomes per operation, recorded by the request coroutines."""

    def __init__(self):
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.ok: collections.Counter[str] = collections.Counter()
        self.sent: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.send_lags: list[float] = []
        self.examples = 0
        self.by_prediction_id = 0
        self.dropped = 0
        self.first_start: float | None = None
        self.last_end: float | None = None

    def record(self, op: str, due: float, end: float, error: str | None) -> None:
        self.latencies[op].append(end - due)
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        if error is None:
            self.ok[op] += 1
        else:
            self.errors[f"{op}: {error}"] += 1


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def model_options(info: dict) -> dict:
    """The load's options that follow an existing model (``GET /v1/models/{name}``): its
    kind, input size and labels."""
    size = info["input"].get("n_features") or info["input"].get("hashed")
    classes = "regression" if info.get("task") == "regression" else list(info["classes"])
    options = {"n_features": size, "classes": classes}
    if info["kind"] in KINDS:
        options["kind"] = info["kind"]
    if "rank" in info.get("params", {}):
        options["rank"] = info["params"]["rank"]
    return options


def _error_of(status: int, body: bytes) -> str:
    try:
        code = json.loads(body)["error"]["code"]
    except Exception:
        code = None
    return f"HTTP {status}" + (f" {code}" if code else "")


# -- HTTP clients ---------------------------------------------------------------------------
class HttpxClient:
    """Load requests through an ``httpx.AsyncClient`` (the default: full HTTP semantics)."""

    name = "httpx"
    errors: tuple[type[BaseException], ...] = (httpx.HTTPError,)

    def __init__(self, url: str, max_connections: int, timeout: float, key: str | None = None):
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self.client = httpx.AsyncClient(
            base_url=url, limits=limits, timeout=timeout, headers=auth_headers(key)
        )

    async def post(self, path: str, body: bytes, content_type: bytes) -> tuple[int, bytes]:
        response = await self.client.post(
            path, content=body, headers={"content-type": content_type.decode()}
        )
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self.client.aclose()


class RawClient:
    """Load requests over plain asyncio streams: HTTP/1.1 keep-alive connections, one
    request at a time on each, at most ``max_connections``.

    It speaks only what the benchmarks need (POST with a body; responses framed by
    Content-Length or chunked) and costs a small fraction of httpx's CPU per request, which
    matters when the generator shares a small machine with the server it measures. Idle
    connections are retired before the server's keep-alive timeout, and a request that
    meets a connection the server has just closed is sent again on a new one (the server
    never read it).
    """

    name = "raw"
    errors: tuple[type[BaseException], ...] = (
        OSError,
        TimeoutError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ValueError,
    )

    def __init__(self, url: str, max_connections: int, timeout: float, key: str | None = None):
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"the raw client speaks plain http only, not {parts.scheme!r}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.slots = asyncio.Semaphore(max_connections)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        # uvicorn closes keep-alive connections idle for 5 s: retire ours before that
        self.max_idle = 2.0
        self.host_header = f"{self.host}:{self.port}".encode()
        self.extra_headers = "".join(f"{k}: {v}\r\n" for k, v in auth_headers(key).items())

    async def post(self, path: str, body: bytes, content_type: bytes) -> tuple[int, bytes]:
        async with self.slots:
            connection = self._reusable()
            try:
                async with asyncio.timeout(self.timeout):
                    if connection is not None:
                        try:
                            return await self._send(connection, path, body, content_type)
                        except (ConnectionError, asyncio.IncompleteReadError) as error:
                            # the server closed the idle connection as we reused it; the
                            # request was not read, so it is safe to send it once more
                            connection[1].close()
                            if getattr(error, "partial", b""):
                                raise
                    connection = await asyncio.open_connection(self.host, self.port)
                    return await self._send(connection, path, body, content_type)
            except BaseException:
                if connection is not None:
                    connection[1].close()
                raise

    def _reusable(self):
        """An idle connection that the server has not closed and will not close soon."""
        now = time.monotonic()
        while self.idle:
            reader, writer, last_used = self.idle.pop()
            if now - last_used < self.max_idle and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    async def _send(self, connection, path: str, body: bytes, content_type: bytes):
        status, data, keep = await self._exchange(*connection, path, body, content_type)
        if keep:
            self.idle.append((*connection, time.monotonic()))
        else:
            connection[1].close()
        return status, data

    async def _exchange(self, reader, writer, path, body, content_type):
        head = (
            b"POST %s HTTP/1.1\r\nhost: %s\r\n%scontent-type: %s\r\ncontent-length: %d\r\n\r\n"
            % (
                (self.prefix + path).encode(),
                self.host_header,
                self.extra_headers.encode(),
                content_type,
                len(body),
            )
        )
        writer.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            writer.write(body)
        await writer.drain()
        lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, chunked, keep = None, False, True
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                keep = b"close" not in value.lower()
        if chunked:
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append(await reader.readexactly(size + 2))
                if size == 0:
                    break
            data = b"".join(chunk[:-2] for chunk in chunks)
        elif length is not None:
            data = await reader.readexactly(length)
        else:
            data, keep = await reader.read(), False
        return status, data, keep

    async def aclose(self) -> None:
        for _, writer, _ in self.idle:
            writer.close()
        self.idle.clear()


CLIENTS = {"httpx": HttpxClient, "raw": RawClient}


# -- the generator --------------------------------------------------------------------------
class LoadGenerator:
    """Runs one :class:`LoadConfig` against a service with an ``httpx.AsyncClient``."""

    def __init__(
        self,
        config: LoadConfig,
        workload: Workload | None = None,
        before_measure: Callable[[], object] | None = None,
        after_measure: Callable[[], object] | None = None,
    ):
        config.check()
        self.before_measure = before_measure
        self.after_measure = after_measure
        self.config = config
        self.workload = workload or Workload(config)
        self.model = config.model
        self.paths: dict[str, str] = {}
        self.pending: collections.deque[tuple[str, int]] = collections.deque(maxlen=100_000)
        self._ops = random.Random(config.seed + 1)
        self._row = 0

    # one request of each kind; they return (examples learned, error or None)
    async def _predict(self, client, stats: Stats) -> tuple[int, str | None]:
        k = self._next_row()
        status, data = await client.post(
            self.paths["predict"], self.workload.predict_bodies[k], JSON_TYPE
        )
        if status != 200:
            return 0, _error_of(status, data)
        if self.config.mode == "mixed":
            prediction_id = json.loads(data)["predictions"][0]["prediction_id"]
            self.pending.append((prediction_id, self.workload.labels[k]))
        return 0, None

    async def _feedback(self, client, stats: Stats) -> tuple[int, str | None]:
        if self.config.mode == "mixed" and self.pending:
            prediction_id, label = self.pending.popleft()
            body = b'{"examples":[{"prediction_id":"%s","label":%s}]}' % (
                prediction_id.encode(),
                json.dumps(label).encode(),
            )
            stats.by_prediction_id += 1
        else:
            body = self.workload.feedback_bodies[self._next_row()]
        status, data = await client.post(self.paths["feedback"], body, JSON_TYPE)
        if status != 200:
            return 0, _error_of(status, data)
        return 1, None

    async def _bulk(self, client, stats: Stats) -> tuple[int, str | None]:
        bodies = self.workload.bulk_bodies
        body = bodies[self._next_row() % len(bodies)]
        status, data = await client.post(self.paths["feedback"], body, self.workload.bulk_type)
        if status != 200:
            return 0, _error_of(status, data)
        return int(json.loads(data)["learned"]), None

    def _next_row(self) -> int:
        self._row = (self._row + 1) % len(self.workload.rows)
        return self._row

    def _operation(self) -> str:
        mode = self.config.mode
        if mode == "mixed":
            return "feedback" if self._ops.random() < self.config.feedback_fraction else "predict"
        return mode

    async def _one(self, client, stats: Stats, due: float) -> None:
        op = self._operation()
        stats.sent[op] += 1
        started = time.perf_counter()
        if stats.first_start is None:
            stats.first_start = started
        stats.send_lags.append(started - due)
        handler = {"predict": self._predict, "feedback": self._feedback, "bulk": self._bulk}[op]
        try:
            examples, error = await handler(client, stats)
        except client.errors as exc:
            examples, error = 0, type(exc).__name__
        stats.examples += examples
        stats.record(op, due, time.perf_counter(), error)

    async def _closed_loop(self, client, stats: Stats, duration: float):
        deadline = time.perf_counter() + duration
        budget = [self.config.max_requests]

        async def client_loop():
            while budget[0] > 0 and time.perf_counter() < deadline:
                budget[0] -= 1
                await self._one(client, stats, time.perf_counter())

        await asyncio.gather(*(client_loop() for _ in range(self.config.concurrency)))

    async def _open_loop(self, client, stats: Stats, duration: float):
        config = self.config
        total = min(config.max_requests, max(1, round(config.rate * duration)))
        interval = 1.0 / config.rate
        start = time.perf_counter() + 0.005
        tasks: set[asyncio.Task] = set()
        i = 0
        while i < total:
            now = time.perf_counter()
            due = start + i * interval
            if due > now:
                await asyncio.sleep(due - now)
                continue
            # start every request that is due (catching up if the loop was late)
            while i < total and start + i * interval <= now:
                if len(tasks) >= config.max_inflight:
                    stats.dropped += 1
                    stats.errors["dropped: in-flight limit"] += 1
                else:
                    task = asyncio.create_task(self._one(client, stats, start + i * interval))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                i += 1
            await asyncio.sleep(0)
        if tasks:
            _, late = await asyncio.wait(set(tasks), timeout=config.drain_timeout)
            for task in late:
                task.cancel()
                stats.errors["unanswered after drain timeout"] += 1

    async def _phase(self, client, duration: float) -> Stats:
        stats = Stats()
        if self.config.rate is None:
            await self._closed_loop(client, stats, duration)
        else:
            await self._open_loop(client, stats, duration)
        return stats

    async def _create_model(self, client: httpx.AsyncClient) -> None:
        if self.model is not None:  # an existing one: rows and labels that fit it
            response = await client.get(f"/v1/models/{self.model}")
            if response.status_code != 200:
                raise RuntimeError(f"model {self.model!r}: {response.text}")
            options = model_options(response.json())
            self.config = dataclasses.replace(
                self.config, **options, nnz=min(self.config.nnz, options["n_features"])
            )
            self.workload = Workload(self.config)
        if self.model is None:
            self.model = f"loadgen-{self.config.mode}-{uuid.uuid4().hex[:8]}"
            response = await client.post("/v1/models", json=self.workload.model_spec(self.model))
            if response.status_code != 201:
                raise RuntimeError(f"could not create the model: {response.text}")
        self.paths = {
            "predict": f"/v1/models/{self.model}/predict?variant={self.config.variant}",
            "feedback": f"/v1/models/{self.model}/feedback",
        }

    async def run(self) -> dict:
        """Create the model, warm up, measure, delete the model; returns the summary."""
        config = self.config
        load = CLIENTS[config.client](config.url, config.concurrency, config.timeout, config.key)
        headers = auth_headers(config.key)
        async with httpx.AsyncClient(base_url=config.url, timeout=60, headers=headers) as control:
            created = config.model is None
            await self._create_model(control)
            config = self.config
            try:
                if config.warmup:
                    await self._phase(load, config.warmup)
                self._ops = random.Random(config.seed + 1)
                # what exists now (modules, the workload) is frozen out of the collector's
                # reach: a full collection over it paused this generator for 10-20 ms, which
                # an open loop counts as the server's latency
                gc.collect()
                gc.freeze()
                if self.before_measure is not None:
                    self.before_measure()
                cpu0, wall0 = time.process_time(), time.perf_counter()
                try:
                    stats = await self._phase(load, config.duration)
                finally:
                    gc.unfreeze()
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                if self.after_measure is not None:
                    self.after_measure()
            finally:
                await load.aclose()
                if created and not config.keep_model:
                    await control.delete(f"/v1/models/{self.model}")
        return self.summary(stats, cpu, wall)

    def summary(self, stats: Stats, client_cpu: float, wall: float) -> dict:
        config = self.config
        elapsed = (
            (stats.last_end - stats.first_start)
            if stats.first_start is not None and stats.last_end is not None
            else 0.0
        )
        elapsed = max(elapsed, 1e-9)
        all_latencies = [x for values in stats.latencies.values() for x in values]
        n_ok = sum(stats.ok.values())
        n_errors = sum(stats.errors.values())
        out = {
            "mode": config.mode,
            "loop": "closed" if config.rate is None else "open",
            "target_rate": config.rate,
            "concurrency": config.concurrency,
            "duration_s": config.duration,
            "url": config.url,
            "client": config.client,
            "model": {
                "name": self.model,
                "kind": config.kind,
                "rank": config.rank if config.kind == "dos" else None,
                "n_features": config.n_features,
                "nnz": config.nnz,
            },
            "batch": config.batch if config.mode == "bulk" else None,
            "requests": sum(stats.sent.values()) + stats.dropped,
            "ok": n_ok,
            "errors": n_errors,
            "error_kinds": dict(stats.errors),
            "elapsed_s": round(elapsed, 4),
            "throughput_rps": round(n_ok / elapsed, 2),
            "examples_learned": stats.examples,
            "examples_per_s": round(stats.examples / elapsed, 2),
            "latency_ms": latency_summary(all_latencies),
            "operations": {
                op: {
                    "requests": stats.sent[op],
                    "ok": stats.ok[op],
                    "throughput_rps": round(stats.ok[op] / elapsed, 2),
                    "latency_ms": latency_summary(stats.latencies[op]),
                }
                for op in sorted(stats.sent)
            },
            "feedback_by_prediction_id": stats.by_prediction_id,
            "send_lag_ms": (
                latency_summary([max(0.0, x) for x in stats.send_lags])
                if config.rate is not None
                else None
            ),
            "client_cpu_s": round(client_cpu, 4),
            "client_cpu_share": round(client_cpu / max(wall, 1e-9), 4),
        }
        return out


def run(config: LoadConfig, workload: Workload | None = None) -> dict:
    """Run one load test synchronously; returns the summary."""
    return asyncio.run(LoadGenerator(config, workload).run())


def sweep(config: LoadConfig, factor: float, max_rate: float, p99_max_ms: float) -> dict:
    """Open-loop runs at rising rates (``config.rate`` times ``factor`` per step, up to
    ``max_rate``) against one model; the knee is the highest rate whose p99 stays under
    ``p99_max_ms`` with no errors. Stops at the first rate past the bound."""
    if config.rate is None or factor <= 1 or max_rate < config.rate:
        raise ValueError("a sweep needs --rate (the first), --sweep-factor > 1, --sweep-max")
    created = config.model is None
    steps, knee, rate = [], None, config.rate
    model = config.model
    try:
        while rate <= max_rate:
            step = dataclasses.replace(config, rate=rate, model=model, keep_model=True)
            generator = LoadGenerator(step)
            summary = asyncio.run(generator.run())
            model = generator.model
            p99 = summary["latency_ms"]["p99"]
            within = summary["errors"] == 0 and p99 is not None and p99 <= p99_max_ms
            steps.append(
                {
                    "rate": rate,
                    "throughput_rps": summary["throughput_rps"],
                    "p50_ms": summary["latency_ms"]["p50"],
                    "p99_ms": p99,
                    "errors": summary["errors"],
                    "within": within,
                    "summary": summary,
                }
            )
            if not within:
                break
            knee = rate
            rate = round(rate * factor, 3)
    finally:
        if created and model is not None and not config.keep_model:
            headers = auth_headers(config.key)
            httpx.delete(f"{config.url}/v1/models/{model}", headers=headers, timeout=60)
    return {"mode": config.mode, "p99_max_ms": p99_max_ms, "knee_rate": knee, "steps": steps}


def format_sweep(result: dict) -> str:
    lines = [
        f"sweep ({result['mode']}): highest rate with p99 <= {result['p99_max_ms']:g} ms and "
        f"no errors: {result['knee_rate'] if result['knee_rate'] is not None else 'none'} req/s",
        f"  {'rate':>10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}",
    ]
    for step in result["steps"]:
        p99 = step["p99_ms"] if step["p99_ms"] is not None else math.nan
        lines.append(
            f"  {step['rate']:>10g}{step['throughput_rps']:>10.1f}{step['p50_ms'] or 0:>10.3f}"
            f"{p99:>10.3f}{step['errors']:>8}" + ("" if step["within"] else "  <- past the bound")
        )
    return "\n".join(lines)


def format_summary(summary: dict) -> str:
    loop = (
        f"open loop at {summary['target_rate']:g} req/s"
        if summary["loop"] == "open"
        else f"closed loop, {summary['concurrency']} clients"
    )
    model = summary["model"]
    lines = [
        f"{summary['mode']} ({loop}) for {summary['duration_s']:g} s against {summary['url']}, "
        f"model {model['name']} ({model['kind']}, rank {model['rank']}, "
        f"{model['n_features']} features, {model['nnz']} non-zeros"
        + (f", batch {summary['batch']}" if summary["batch"] else "")
        + ")",
        f"  requests {summary['requests']}, ok {summary['ok']}, errors {summary['errors']}, "
        f"elapsed {summary['elapsed_s']:.2f} s",
        f"  throughput {summary['throughput_rps']:.1f} req/s"
        + (
            f", {summary['examples_per_s']:.0f} examples/s learned"
            if summary["examples_learned"]
            else ""
        ),
    ]
    header = f"  {'latency ms':<14}{'count':>8}{'p50':>11}{'p90':>11}{'p99':>11}{'max':>11}"
    lines.append(header)

    def row(name: str, lat: dict) -> str:
        if not lat["count"]:
            return f"  {name:<14}{0:>8}"
        return (
            f"  {name:<14}{lat['count']:>8}{lat['p50']:>11.3f}{lat['p90']:>11.3f}"
            f"{lat['p99']:>11.3f}{lat['max']:>11.3f}"
        )

    lines.append(row("all", summary["latency_ms"]))
    if len(summary["operations"]) > 1:
        for op, values in summary["operations"].items():
            lines.append(row(op, values["latency_ms"]))
    if summary["send_lag_ms"]:
        lines.append(row("send lag", summary["send_lag_ms"]))
    if summary["feedback_by_prediction_id"]:
        lines.append(f"  feedback by prediction id: {summary['feedback_by_prediction_id']}")
    for kind, count in sorted(summary["error_kinds"].items()):
        lines.append(f"  error {kind}: {count}")
    lines.append(
        f"  generator CPU {summary['client_cpu_s']:.2f} s "
        f"({100 * summary['client_cpu_share']:.0f}% of one core)"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> tuple[LoadConfig, Path | None]:
    defaults = LoadConfig()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--url", default=defaults.url, help="service base URL (default %(default)s)")
    add("--mode", choices=MODES, default=defaults.mode)
    add("--rate", type=float, help="open loop: requests/s on a fixed schedule")
    add(
        "--concurrency",
        type=int,
        default=defaults.concurrency,
        help="closed loop: clients; open loop: most connections (default %(default)s)",
    )
    add("--duration", type=float, default=defaults.duration, help="measured seconds")
    add("--warmup", type=float, default=defaults.warmup, help="unmeasured seconds first")
    add("--drain-timeout", type=float, default=defaults.drain_timeout)
    add("--max-requests", type=int, default=defaults.max_requests)
    add("--max-inflight", type=int, default=defaults.max_inflight, help="open loop cap")
    add("--timeout", type=float, default=defaults.timeout, help="per request, seconds")
    add("--kind", choices=KINDS, default=defaults.kind)
    add("--rank", type=int, default=defaults.rank)
    add("--n-features", type=int, default=defaults.n_features, help="hashed buckets")
    add("--nnz", type=int, default=defaults.nnz, help="non-zeros per example")
    add("--batch", type=int, default=defaults.batch, help="bulk: examples per body")
    add("--bulk-bodies", type=int, default=defaults.bulk_bodies, help="distinct bulk bodies")
    add("--pool", type=int, default=defaults.pool, help="distinct single examples")
    add("--feedback-fraction", type=float, default=defaults.feedback_fraction)
    add("--label-noise", type=float, default=defaults.label_noise)
    add("--averaging-interval", type=int, help="model's averaging interval (service default)")
    add("--variant", choices=("live", "averaged"), default=defaults.variant)
    add(
        "--client",
        choices=("httpx", "raw"),
        default=defaults.client,
        help="httpx.AsyncClient, or plain asyncio streams (far less CPU per request)",
    )
    add("--seed", type=int, default=defaults.seed)
    add(
        "--model",
        help="use this existing model (its input size and classes are read from the service)",
    )
    add("--key", default=os.environ.get("LORENTZTRON_KEY"), help="bearer key ($LORENTZTRON_KEY)")
    add("--sweep", action="store_true", help="open loop at rising rates from --rate: the knee")
    add("--sweep-factor", type=float, default=2.0, help="rate multiplier per sweep step")
    add("--sweep-max", type=float, default=20_000.0, help="the last sweep rate at most")
    add("--p99-max", type=float, default=50.0, help="sweep: the p99 bound, milliseconds")
    add("--keep-model", action="store_true", help="do not delete the created model")
    add("--allow-remote", action="store_true", help="allow a non-loopback --url")
    add("--json", type=Path, help="write the summary (or the sweep) to this JSON file")
    args = vars(parser.parse_args(argv))
    options = {name: args.pop(name) for name in ("json", "sweep", "sweep_factor", "sweep_max")}
    options["p99_max"] = args.pop("p99_max")
    return LoadConfig(**args), options


def main(argv: list[str] | None = None) -> int:
    config, options = parse_args(argv)
    try:
        config.check()
        if options["sweep"]:
            result = sweep(
                config, options["sweep_factor"], options["sweep_max"], options["p99_max"]
            )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not options["sweep"]:
        result = run(config)
    print(format_sweep(result) if options["sweep"] else format_summary(result))
    if options["json"] is not None:
        options["json"].write_text(json.dumps(result, indent=1) + "\n")
    if options["sweep"]:
        return 0 if result["knee_rate"] is not None else 1
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
