"""``python -m benchmarks.service_durability``: see :mod:`benchmarks.service_durability.cli`."""

from benchmarks.service_durability.cli import main

raise SystemExit(main())
