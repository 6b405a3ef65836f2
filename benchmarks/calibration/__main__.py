"""``python -m benchmarks.calibration``: see :mod:`benchmarks.calibration.cli`."""

from benchmarks.calibration.cli import main

main()
