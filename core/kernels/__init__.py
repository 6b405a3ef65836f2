"""Numba kernels: functions over arrays and scalars only, one module per model family."""
