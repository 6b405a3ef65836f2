"""The service's Python client for code inside the server's package (the CLI, the tests):
a re-export of :mod:`lorentztron_client`, the distribution ``lorentztron-client`` in
clients/python, which is what code outside this repository should import."""

from __future__ import annotations

from lorentztron_client import *  # noqa: F403
from lorentztron_client import (  # noqa: F401
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
from lorentztron_client import __all__ as __all__  # noqa: F401
