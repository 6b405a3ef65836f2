"""The scripts of deploy/loadtest, imported by the tests (they are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

LOADTEST = Path(__file__).resolve().parents[2] / "deploy" / "loadtest"


def load(name: str):
    """The module ``deploy/loadtest/<name>.py``, imported once per test session."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, LOADTEST / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
