"""lorentztron core: online learners in numba, with no service dependencies."""

__version__ = "0.1.0"
