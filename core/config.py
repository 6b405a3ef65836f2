"""Numeric and numba constants shared by every kernel and model.

Only constants live here: the dtype policy, the numba compilation options and the
tolerances that the models document.
"""

import os

import numpy as np

__all__ = [
    "FLOAT",
    "INDEX",
    "NJIT_OPTIONS",
    "ROOT_MAXITER",
    "ROOT_RTOL",
]

#: Every learned array and every feature value is float64: the passive-aggressive
#: updates are exact solutions of small optimisation problems, and we test them to 1e-9.
FLOAT = np.float64
#: Feature indices (sparse rows, CSR batches).
INDEX = np.int64

#: Options for every ``@numba.njit`` kernel. ``fastmath`` stays off: it would let LLVM
#: reorder sums and assume no NaN/inf, and both the exactness tests and the non-finite
#: input guards depend on IEEE semantics. ``nogil`` lets request handlers run kernels in a
#: thread pool without holding the GIL. ``cache`` writes compiled code to NUMBA_CACHE_DIR.
NJIT_OPTIONS: dict = {
    "cache": os.environ.get("LORENTZTRON_NUMBA_CACHE", "1") != "0",
    "fastmath": False,
    "nogil": True,
    "error_model": "numpy",
}

#: Relative tolerance of the step-size root finder (eq 18 of the DoS paper): the bracket
#: is shrunk until its width is below this times the root.
ROOT_RTOL = 4.0 * np.finfo(np.float64).eps
#: Iteration cap of the safeguarded Newton root finder (it needs < 60 in practice).
ROOT_MAXITER = 200
