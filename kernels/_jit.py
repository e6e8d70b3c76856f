"""The house ``njit``: cached, GIL-free, no fastmath (results must be bit-reproducible)."""

from __future__ import annotations

import numba


def jit(fn=None, *, nrt: bool = True, **kw):
    """``numba.njit(cache=True, nogil=True, fastmath=False)``, lazily compiled on first call.

    ``nrt=False`` for kernels that allocate nothing (no array is created or returned; views are
    fine): numba then emits no reference counting in them. With it, every call of a kernel that
    LLVM does not inline increments and decrements, atomically, the count of every array it is
    passed, each member of a NamedTuple of arrays included: 66 atomic operations per call of a
    helper taking ``Jobs``, ``Run`` and ``PolicyParams``. A kernel with ``nrt=True`` (the default,
    set explicitly so that callees do not inherit ``nrt=False``) may be called from one without."""
    opts = dict(cache=True, nogil=True, fastmath=False, _nrt=nrt)
    opts.update(kw)
    if fn is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(fn)
