"""The service's durability and scale-out, measured over real HTTP on this machine.

1. Feedback throughput with the feedback log off, on a local file (fsync per request batch,
   and no fsync), and on a Redis stream (Redis with ``appendfsync always``): single-example
   JSON feedback in a closed loop, and bulk svmlight feedback.
2. Recovery time against log length: a model's log of N records after its snapshot is
   replayed at start-up before ``/readyz`` turns ready (``lorentztron_log_replay_duration``).
3. Predict throughput with one and two api replicas (one learner, Redis).
4. Freshness: the delay from an acknowledged feedback to an api replica serving it.

Load comes from ``python -m deploy.loadtest.loadgen`` (``--client raw``) on the same 2-core
machine; each configuration runs ``--repeats`` times and the medians are reported.

Parts: :mod:`~benchmarks.service_durability.processes` (servers, Redis and load generators
as the measurements configure them, on :mod:`benchmarks.servers`), one module per measurement
(:mod:`~benchmarks.service_durability.throughput`, :mod:`~benchmarks.service_durability.recovery`,
:mod:`~benchmarks.service_durability.replicas`, :mod:`~benchmarks.service_durability.freshness`),
:mod:`~benchmarks.service_durability.report` and :mod:`~benchmarks.service_durability.cli`.

Usage::

    python -m benchmarks.service_durability            # writes its docs/benchmarks.md section
    python -m benchmarks.service_durability --quick    # seconds, prints only
    python -m benchmarks.service_durability --render docs/durability_benchmarks.json
"""
