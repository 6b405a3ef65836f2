"""Benchmarks and reproductions: one entry per study, run as ``python -m benchmarks.<entry>``
(each has ``--help``), with shared parts: :mod:`benchmarks.environment` (what a run ran on)
and :mod:`benchmarks.markdown` (the section of a docs/ file each entry owns)."""
