"""``python -m deploy.loadtest.loadgen``: see :mod:`deploy.loadtest.loadgen.cli`."""

from deploy.loadtest.loadgen.cli import main

raise SystemExit(main())
