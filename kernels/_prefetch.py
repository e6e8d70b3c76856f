"""``prefetch(a, i)``: a hint that ``a[i]`` will be read soon (LLVM's ``llvm.prefetch``, read,
high locality, data cache). It changes no result; in plain Python it does nothing.

The native engine's completions come in finish-time order, which is random in job index: the
first touch of the next completing job's record, status and allocation missed the cache at
every completion. The heap's top is known a whole step before it completes, so the kernel asks
for those lines as soon as a job reaches the top."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload


def prefetch(a, i):  # noqa: ARG001 - a hint: nothing to do outside a kernel
    """Ask the CPU to bring ``a[i]`` into the cache (no-op in Python)."""


@intrinsic
def _prefetch(typingctx, a, i):
    if not isinstance(a, types.Array) or a.ndim != 1 or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False,
                                       boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        # (address, 0: read, 3: keep in all cache levels, 1: data)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(a, i), codegen


@overload(prefetch, jit_options={"cache": True})
def _prefetch_impl(a, i):
    if isinstance(a, types.Array) and isinstance(i, types.Integer):
        return lambda a, i: _prefetch(a, i)
    return None
