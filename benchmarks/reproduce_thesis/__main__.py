"""``python -m benchmarks.reproduce_thesis``: see :mod:`benchmarks.reproduce_thesis.cli`."""

from benchmarks.reproduce_thesis.cli import main

main()
