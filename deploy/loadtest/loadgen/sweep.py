"""The knee of a service: the highest open-loop rate whose p99 stays under a bound."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx

from deploy.loadtest.loadgen.clients import auth_headers
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.generator import LoadGenerator


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
