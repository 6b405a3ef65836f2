"""The options of one load run, checked before anything is sent, and the options that
follow an existing model."""

from __future__ import annotations

import dataclasses
import ipaddress
from urllib.parse import urlsplit

from deploy.loadtest.loadgen.clients import CLIENTS

MODES = ("predict", "feedback", "mixed", "bulk")
KINDS = ("dos", "linear-pa")


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
    #: "raw" (asyncio streams, the cheapest) or "httpx" (for https): ``clients.CLIENTS``
    client: str = "raw"
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
        if self.client == "raw" and urlsplit(self.url).scheme != "http":
            raise ValueError(
                f"the raw client speaks plain http only: use --client httpx for {self.url}"
            )
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
