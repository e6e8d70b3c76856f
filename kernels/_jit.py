"""The house ``njit``: cached, GIL-free, no fastmath (results must be bit-reproducible)."""

from __future__ import annotations

import numba

def jit(fn=None, **kw):
    """``numba.njit(cache=True, nogil=True, fastmath=False)``, lazily compiled on first call."""
    opts = dict(cache=True, nogil=True, fastmath=False)
    opts.update(kw)
    if fn is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(fn)
