"""Async HTTP load generator for the lorentztron service (asyncio, one process).

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
  also reports ``send_lag_ms`` (the "send lag" row of the text): for each request, the time
  from its due time to the moment the generator actually started sending it. It is near
  zero when the generator keeps its schedule; when it is large the generator itself (its
  CPU, its event loop), not the server, was the bottleneck, and that wait is included in
  the latencies.
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
over plain asyncio streams by default (``--client raw``: HTTP/1.1 keep-alive, the whole
answer read), which costs a small fraction of httpx's CPU per request and leaves more of a
small machine to the server being measured: with ``--client httpx`` the generator used 94%
of a core for 814 req/s where locust reached 1,800 on the same box. Both send the same
bytes and time a request the same way (from its due time to its whole answer);
``--client httpx`` (an ``httpx.AsyncClient``) is for https URLs. The model is created and
deleted with httpx either way.

Parts: :mod:`~deploy.loadtest.loadgen.config` (a run's options),
:mod:`~deploy.loadtest.loadgen.workload` (the pre-encoded requests),
:mod:`~deploy.loadtest.loadgen.clients` (httpx and raw HTTP/1.1 clients),
:mod:`~deploy.loadtest.loadgen.generator` (the loops), :mod:`~deploy.loadtest.loadgen.stats`
(latencies and outcomes), :mod:`~deploy.loadtest.loadgen.report` (the summary and its text),
:mod:`~deploy.loadtest.loadgen.sweep` (the knee) and :mod:`~deploy.loadtest.loadgen.cli`.

Examples::

    python -m deploy.loadtest.loadgen --mode predict --rate 500 --duration 10
    python -m deploy.loadtest.loadgen --mode feedback --concurrency 8 --duration 10
    python -m deploy.loadtest.loadgen --mode mixed --concurrency 16 --json mixed.json
    python -m deploy.loadtest.loadgen --mode bulk --batch 20000 --concurrency 1
    python -m deploy.loadtest.loadgen --mode predict --rate 500 --client httpx
    python -m deploy.loadtest.loadgen --mode predict --model spam --key $KEY --rate 100 \
        --sweep --sweep-max 5000 --p99-max 25 --json sweep.json

Only loopback URLs are accepted unless ``--allow-remote`` is given.
"""
