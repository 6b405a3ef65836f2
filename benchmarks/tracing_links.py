"""CPU cost per record of a learner learning log entries with tracing on (each entry carries
its request's ``traceparent``; ``feedback.learned`` spans of at most 128 records, one Link per
record, exported by OTLP/HTTP to a local receiver that discards them) against tracing off
(the same entries, replayed as they are), through the learner's own ``Learner._learn``.

Process CPU (the exporter's thread counts), per record, medians of ``--repeats`` runs that
alternate off and on, each on a fresh model (DoS rank 4 over 30 dense features, one
example per record):

    python -m benchmarks.tracing_links
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from core.features import CSRBatch
from service.durability.feedback_log import encode_record
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import CreateModel
from service.ops import tracing
from service.scale.roles import Learner

N_FEATURES = 30


class _Discard(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that accepts every export and keeps nothing."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def entries(n: int, seed: int = 0) -> list[tuple[str, dict]]:
    """``n`` stream entries as a learner reads them: a one-example record and a traceparent."""
    rng = np.random.default_rng(seed)
    found = []
    for i in range(n):
        x = rng.standard_normal(N_FEATURES)
        batch = CSRBatch(np.array([0, N_FEATURES]), np.arange(N_FEATURES), x)
        record = encode_record(batch, np.array([int(x[0] > 0)]))
        parent = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01".encode()
        found.append((f"{i + 1}-0", {b"r": record, b"t": parent}))
    return found


def model() -> LiveModel:
    spec = CreateModel.model_validate(
        {"name": "m", "kind": "dos", "params": {"rank": 4}, "input": {"n_features": N_FEATURES}}
    )
    return LiveModel("m", spec, plan(spec, Limits(1 << 62, 1 << 62, 50_000)), 1000)


def per_record(stream: list[tuple[str, dict]]) -> float:
    """Microseconds of process CPU per record to learn ``stream`` on a fresh model."""
    live = model()
    started = time.process_time()
    assert Learner._learn(None, live, stream) == len(stream)
    return (time.process_time() - started) / len(stream) * 1e6


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Print the medians (and return them, microseconds per record: ``off``, ``on``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2560)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saved = {name: os.environ.pop(name, None) for name in tracing.VARIABLES}
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_address[1]}"
    stream = entries(args.records)
    per_record(stream)  # warm-up: the kernels compiled
    off, on = [], []
    try:
        for _ in range(args.repeats):
            off.append(per_record(stream))
            assert tracing.setup()
            on.append(per_record(stream))
            tracing.shutdown()  # (flushes the spans: their export counts)
    finally:
        tracing.shutdown()
        server.shutdown()
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    for name, runs in (("off", off), ("on", on)):
        print(
            f"tracing {name}: {statistics.median(runs):.1f} us/record "
            f"(runs {min(runs):.1f} to {max(runs):.1f})"
        )
    print(f"on - off: {statistics.median(on) - statistics.median(off):+.1f} us/record")
    return {"off": statistics.median(off), "on": statistics.median(on)}


if __name__ == "__main__":
    main()
