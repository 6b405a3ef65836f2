"""Benchmarks and reproductions: one entry per study, run from the repository root as
``python -m benchmarks.<entry>`` (each has ``--help``).

Shared modules:

- :mod:`benchmarks.streams`: the streams and data sets the studies share;
- :mod:`benchmarks.timing`: timed runs, medians over repeats, interleaved rounds, warm-up;
- :mod:`benchmarks.learners`: how a study drives a model under test, ours or a peer's;
- :mod:`benchmarks.peers`: River, scikit-learn and Vowpal Wabbit, one module each;
- :mod:`benchmarks.environment`: what a run ran on (machine, CPU, versions, commit);
- :mod:`benchmarks.markdown`: the section of a docs page each entry owns;
- :mod:`benchmarks.servers`: the service and redis-server as subprocesses on free ports (the
  tests start theirs with it too).

Entries (each a package of small modules, but ``pending_cache_gc``): ``speed_pa``,
``reproduce_dos``, ``reproduce_pqr``, ``reproduce_mofm``, ``reproduce_thesis``,
``calibration``, ``service_durability`` and ``pending_cache_gc``.
"""
