"""The service's Python client for code inside the server's package (the CLI, the tests):
a re-export of :mod:`lorentztron_client`, the distribution ``lorentztron-client`` in
clients/python, which is what code outside this repository should import."""

from __future__ import annotations

try:
    import lorentztron_client  # noqa: F401
except ModuleNotFoundError:  # a source tree whose install predates clients/python
    import sys
    from pathlib import Path

    sys.path.append(str(Path(__file__).resolve().parents[1] / "clients" / "python"))

from lorentztron_client import *  # noqa: E402, F403
from lorentztron_client import (  # noqa: E402, F401
    ENDPOINTS,
    ERRORS,
    KINDS,
    AsyncClient,
    Call,
    Client,
    LorentztronError,
    TransportError,
    error_of,
    instances,
)
from lorentztron_client import __all__ as __all__  # noqa: E402, F401
