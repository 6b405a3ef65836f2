"""Service benchmarks: start ``lorentztron serve`` on a free loopback port, drive it with
:mod:`deploy.loadtest.loadgen` through every scenario a few times, stop it, print the
medians, and write them where you name: ``--md PATH`` (a markdown file whose section between
``<!-- service:begin -->`` and ``<!-- service:end -->`` is replaced, the rest left alone;
the project's is ``docs/benchmarks.md``) and ``--json PATH`` (every run; the project's is
``docs/service_benchmarks.json``). Without them nothing is written.

The server is one uvicorn process as deployed (``python -m service.ops.cli serve``), with local
snapshots in a temporary directory and a snapshot interval of an hour (so snapshots do not
run during the measurements). The load generator runs in this process, on the same machine:
it competes with the server for the CPUs, and ``client_cpu_share`` in the JSON says how much
of a core it used; by default it sends requests over plain asyncio streams (``--client raw``),
which costs about a tenth of httpx's CPU per request. ``--pin`` puts the server on CPU 1 and
the generator on CPU 0 (Linux ``sched_setaffinity``); anything else running on the machine is
recorded with the results.

``--url URL`` measures a service that is already running instead (started elsewhere, with
its own settings): nothing is started or stopped, each run creates and deletes its own
model there, the bare-app baseline is skipped and the server's CPU is not measured (it
may not be on this machine); ``--key`` (or ``LORENTZTRON_KEY``) for a service with keys.

Scenarios (model: DoS rank 16 over 2^18 hashed features, ~30 non-zeros per example):

- ``predict_open``: single-instance predictions at ``--predict-rate`` req/s on a fixed
  schedule (open loop; target p99 < 5 ms at 500 req/s);
- ``predict_open_low``: the same at ``--low-rate`` req/s (latency below saturation);
- ``predict_closed``: single-instance predictions from ``--concurrency`` clients in closed
  loop (the largest sustained rate);
- ``feedback_closed``: single-example JSON feedback, closed loop (target >= 2,000 req/s);
- ``bulk``: svmlight bodies of ``--batch`` examples (target >= 100,000 examples/s);
- ``mixed_closed``: 80% predictions / 20% feedback by prediction id, closed loop.

The closed-loop predict and feedback scenarios are also run against a bare FastAPI app with
the same endpoints and body shapes and no model behind them (:mod:`deploy.loadtest.bare_app`,
under the same uvicorn settings, started beside the service): in each repeat the two are
measured back to back (the order alternating), and the report gives the service's
throughput as a fraction of the bare app's (targets: predict >= 0.8, durable feedback >=
0.65). ``--no-baseline`` skips it.

Parts: :mod:`~deploy.loadtest.run_benchmarks.scenarios` (the scenarios and their targets),
:mod:`~deploy.loadtest.run_benchmarks.servers` (the service and the bare app as subprocesses),
:mod:`~deploy.loadtest.run_benchmarks.machine` (what the machine is and what else runs on it),
:mod:`~deploy.loadtest.run_benchmarks.measure` (the runs),
:mod:`~deploy.loadtest.run_benchmarks.aggregate` (medians, ratios, verdicts),
:mod:`~deploy.loadtest.run_benchmarks.report` (the markdown section) and
:mod:`~deploy.loadtest.run_benchmarks.cli`.

    # 3 runs of 10 s each, written into the project's docs
    python -m deploy.loadtest.run_benchmarks --md docs/benchmarks.md \
        --json docs/service_benchmarks.json
    python -m deploy.loadtest.run_benchmarks --duration 3 --repeats 1   # smoke: print only
    python -m deploy.loadtest.run_benchmarks --url http://127.0.0.1:8000 --repeats 1
"""
