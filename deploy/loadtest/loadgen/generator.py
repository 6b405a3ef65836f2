"""The loops that send the load: a closed loop of clients, or an open loop on a fixed
schedule; one run creates (or reads) its model, warms up, measures and cleans up."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import gc
import json
import random
import time
import uuid
from collections.abc import Callable

import httpx

from deploy.loadtest.loadgen.clients import CLIENTS, auth_headers
from deploy.loadtest.loadgen.config import LoadConfig, model_options
from deploy.loadtest.loadgen.report import summarize
from deploy.loadtest.loadgen.stats import Stats
from deploy.loadtest.loadgen.workload import JSON_TYPE, Workload


def _error_of(status: int, body: bytes) -> str:
    try:
        code = json.loads(body)["error"]["code"]
    except Exception:
        code = None
    return f"HTTP {status}" + (f" {code}" if code else "")


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
        return summarize(self.config, self.model, stats, cpu, wall)


def run(config: LoadConfig, workload: Workload | None = None) -> dict:
    """Run one load test synchronously; returns the summary."""
    return asyncio.run(LoadGenerator(config, workload).run())
