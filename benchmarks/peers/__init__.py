"""The peer libraries the studies compare with, in one place: one module per library, each
building the peer's models and feeding them a :class:`benchmarks.streams.Stream` in the
library's own input form.

- :mod:`benchmarks.peers.river`: River (dict inputs), per-call timings and one-pass FM;
- :mod:`benchmarks.peers.sklearn`: scikit-learn, per-call timings, and the batch baselines
  (quadratic-kernel SVM, multinomial logistic regression) of the reproductions;
- :mod:`benchmarks.peers.vw`: Vowpal Wabbit (text lines), per-call timings and one pass over
  a file with its own parser.

A peer that is not installed is reported, not fatal: :func:`import_problem` says why.
"""

from __future__ import annotations

__all__ = ["available", "import_problem"]


def import_problem(module: str) -> str | None:
    """Why ``module`` cannot be imported here, or None."""
    try:
        __import__(module)
    except Exception as error:
        return f"cannot import {module}: {type(error).__name__}: {error}"
    return None


def available(module: str) -> bool:
    """Whether ``module`` imports."""
    return import_problem(module) is None
