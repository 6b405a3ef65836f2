"""``python -m deploy.loadtest.run_benchmarks``: see :mod:`deploy.loadtest.run_benchmarks.cli`."""

from deploy.loadtest.run_benchmarks.cli import main

raise SystemExit(main())
