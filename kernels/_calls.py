"""Calls between kernels compile one specialization per argument type, never per constant value.

numba types a constant argument (``fit(kind, n, 0, ...)``, ``walk(..., False, False, ...)``) as a
``Literal`` and compiles the callee, and everything it calls with that argument, once more for it:
on an empty cache the native kernel compiled ``walk`` three times and most placement helpers twice
or four times (about a third of its compile time, measured with numba's compile events). Kernels
branch on such flags at run time anyway, so the literal buys nothing."""

from __future__ import annotations

from numba.core import types


def unliteral_calls(dispatcher):
    """Make calls to ``dispatcher`` from other kernels compile for the non-literal argument types
    (its ``get_call_template``, which numba's typing of such a call uses, sees them unliteral'd).
    Returns the dispatcher."""
    base = dispatcher.get_call_template

    def get_call_template(args, kws):
        return base(tuple(types.unliteral(a) for a in args), {k: types.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher


def helper(fn=None, **kw):
    """The house ``jit`` for a kernel that only other kernels call: without the CPython and C
    wrappers numba compiles for calls from Python. A wrapper unboxes every array of every
    NamedTuple argument; for a helper taking ``Jobs``, ``Run``, ``Queues`` and ``Nodes`` it cost
    about a second of compile time on an empty cache, more than the helper itself (measured: a
    ten-line helper 1.1 s with its wrappers, 0.1 s without)."""
    from ._jit import jit  # (here: ``_jit`` imports this module)

    return jit(fn, no_cpython_wrapper=True, no_cfunc_wrapper=True, **kw)
