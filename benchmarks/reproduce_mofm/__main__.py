"""``python -m benchmarks.reproduce_mofm``: see :mod:`benchmarks.reproduce_mofm.cli`."""

from benchmarks.reproduce_mofm.cli import main

main()
