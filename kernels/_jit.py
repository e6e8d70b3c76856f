"""The house ``njit``: cached, GIL-free, no fastmath (results must be bit-reproducible)."""

from __future__ import annotations

import os

import numba

from ._calls import unliteral_calls

# FASTBLOX_KERNEL_LINES=1: compile with line tables for profilers (bench/profile_kernel.py). Only
# the tables: no bounds checks and no extended variable lifetimes, which debug=True turns on by
# default and which would profile a different, slower kernel. Use a separate NUMBA_CACHE_DIR.
_LINES = dict(debug=True, _dbg_extend_lifetimes=False, boundscheck=False) if os.environ.get(
    "FASTBLOX_KERNEL_LINES", "") not in ("", "0") else {}

def jit(fn=None, *, nrt: bool = True, inline: bool = False, **kw):
    """``numba.njit(cache=True, nogil=True, fastmath=False)``, lazily compiled on first call.

    ``nrt=False`` for kernels that allocate nothing (no array is created or returned; views are
    fine): numba then emits no reference counting in them. With it, every call of a kernel that
    LLVM does not inline increments and decrements, atomically, the count of every array it is
    passed, each member of a NamedTuple of arrays included: 66 atomic operations per call of a
    helper taking ``Jobs``, ``Run`` and ``PolicyParams``. A kernel with ``nrt=True`` (the default,
    set explicitly so that callees do not inherit ``nrt=False``) may be called from one without.

    ``inline=True`` (LLVM ``alwaysinline``, numba's ``forceinline``) for the small helpers of the
    event loop: heap, running list, queue insertion, placement, release, rates. LLVM left most of
    them as calls, and a call passes every array of every NamedTuple argument field by field
    (``Jobs``, ``Run``, ``Queues``, ``Nodes``: seven words per array) and hides the callee's loads
    from the caller's scheduling. Inlining them took the 1M-job FIFO run from 0.49-0.61 s to
    0.38-0.42 s of kernel time and LAS from 0.46-0.55 s to 0.30 s, with the same compile time
    (docs/performance.md). Set explicitly (False by default) so that callees do not inherit it."""
    opts = dict(cache=True, nogil=True, fastmath=False, _nrt=nrt, forceinline=inline)
    opts.update(_LINES)
    opts.update(kw)
    if fn is None:
        return lambda f: unliteral_calls(numba.njit(**opts)(f))
    return unliteral_calls(numba.njit(**opts)(fn))
