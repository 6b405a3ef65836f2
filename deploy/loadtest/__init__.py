"""Load tools for the service, run from the repository root as
``python -m deploy.loadtest.<module>`` (each has ``--help``; the ``loadtest`` extra):

- :mod:`~deploy.loadtest.loadgen`: the async open/closed-loop load generator;
- :mod:`~deploy.loadtest.run_benchmarks`: the service benchmarks (a server, every scenario,
  the report);
- :mod:`~deploy.loadtest.bare_app`: the bare FastAPI baseline they are compared with;
- :mod:`~deploy.loadtest.cost_breakdown`, :mod:`~deploy.loadtest.bulk_profile` and
  :mod:`~deploy.loadtest.profile_server`: where the server's CPU time goes;
- ``locustfile.py``: the same workload as locust users (``locust -f
  deploy/loadtest/locustfile.py``).
"""
