"""``python -m benchmarks.reproduce_dos``: see :mod:`benchmarks.reproduce_dos.cli`."""

from benchmarks.reproduce_dos.cli import main

main()
