"""``python -m benchmarks.reproduce_pqr``: see :mod:`benchmarks.reproduce_pqr.cli`."""

from benchmarks.reproduce_pqr.cli import main

main()
