"""``python -m benchmarks.speed_pa``: see :mod:`benchmarks.speed_pa.cli`."""

from benchmarks.speed_pa.cli import main

raise SystemExit(main())
