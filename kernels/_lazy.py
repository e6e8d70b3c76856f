"""Kernels that only other kernels call are optimized and turned into machine code once, inside
the kernel that calls them, instead of once on their own and again in every caller.

numba finalizes every function it compiles as a library of its own: LLVM's module optimization,
then machine code, then (with ``cache=True``) that object code saved. A function compiled without
its CPython and C wrappers (``kernels/_calls.py: helper``; the paths' overloads) can never be
called from Python: its only use is to be linked into a caller, whose own finalization optimizes
everything linked into it again. Its own optimization and machine code were wasted, at every
level of the call tree (``_advance`` -> ``_walk_queue`` -> ``place`` -> ``fit`` -> ...). On an
empty cache they were about a third of a kernel's compile time (``docs/performance.md``,
*Compile time*).

Here such a library (functions defined, none of them a ``cpython.``/``cfunc.`` wrapper) is
finalized lazily: its module gets numba's cheap module pipeline only (not the full one) and is
kept as numba's linker needs it, without machine code (it is not handed to the JIT engine). It is cached as bitcode (numba caches object code, which
would need the machine code). Should anything ask for the address of one of its functions (a
first-class function value), it is finalized then, as numba would have done. numba writes the
address of every function's environment into a global of the library's module
(``set_env``); for a lazy library that global has no address until a kernel that links it is
finalized, so the write waits until then.

``FASTBLOX_EAGER_HELPERS=1`` turns this off (numba's own behaviour), e.g. to compare the two.
"""

from __future__ import annotations

import os

from numba.core import codegen

ENABLED = os.environ.get("FASTBLOX_EAGER_HELPERS", "") in ("", "0")

_Lib = codegen.CPUCodeLibrary
_JITLib = codegen.JITCodeLibrary
_Codegen = codegen.JITCPUCodegen

_optimize_final_module = _Lib._optimize_final_module
_finalize_final_module = _Lib._finalize_final_module
_serialize_using_object_code = _Lib.serialize_using_object_code
_get_pointer_to_function = _JITLib.get_pointer_to_function
_set_env = _Codegen.set_env

#: environment globals not yet in the engine: name -> env (written once a module defines them)
_PENDING_ENV: dict = {}


def _linked_only(lib) -> bool:
    """Whether ``lib`` holds code that only other kernels can call: some function defined, no
    CPython or C wrapper. (A library loaded from object code has an empty module: not this.)"""
    if not ENABLED or getattr(lib, "_fastblox_full", False):
        return False
    defined = False
    for fn in lib._final_module.functions:
        if fn.name.startswith(("cpython.", "cfunc.")):
            return False
        defined = defined or not fn.is_declaration
    return defined


def _optimize(self):
    if not _linked_only(self):
        _optimize_final_module(self)
        return
    # only numba's cheap module pipeline (the first of its two): the module its callers link
    # stays compact (inlined, simplified), so their own optimization has less to do and makes
    # the same decisions it made on optimized helpers
    cg = self._codegen
    mpm, mpb = cg._module_pass_manager(loop_vectorize=cg._loopvect, slp_vectorize=False, opt=cg._opt_level,
                                       cost="cheap")
    mpm.run(self._final_module, mpb)


def _finalize(self):
    if _linked_only(self):
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True
        return
    _finalize_final_module(self)
    _flush_env(self._codegen)


def _flush_env(cg) -> None:
    """Write the environments whose globals the engine now has."""
    for name in [n for n in _PENDING_ENV if cg._engine.is_symbol_defined(n)]:
        _set_env(cg, name, _PENDING_ENV.pop(name))


def _serialize(self):
    if _linked_only(self):
        self._ensure_finalized()
        return self.name, "bitcode", self._get_module_for_linking().as_bitcode()
    return _serialize_using_object_code(self)


def _defines(lib, name) -> bool:
    try:
        return not lib._final_module.get_function(name).is_declaration
    except NameError:
        return False


def _pointer(self, name):
    if _linked_only(self):
        if not _defines(self, name):
            return 0  # (a wrapper it does not have: numba then makes no callable from it)
        # an address is wanted after all: finalize it as numba would have
        self._fastblox_full = True
        _optimize_final_module(self)
        _finalize_final_module(self)
        _flush_env(self._codegen)
    return _get_pointer_to_function(self, name)


def _env(self, env_name, env):
    if not self._engine.is_symbol_defined(env_name):
        _PENDING_ENV[env_name] = env
        return
    _set_env(self, env_name, env)


def install() -> None:
    """Patch numba's CPU code library (once; a no-op when disabled)."""
    if not ENABLED or getattr(_Lib, "_fastblox_lazy", False):
        return
    _Lib._optimize_final_module = _optimize
    _Lib._finalize_final_module = _finalize
    _Lib.serialize_using_object_code = _serialize
    _JITLib.get_pointer_to_function = _pointer
    _Codegen.set_env = _env
    _Lib._fastblox_lazy = True
