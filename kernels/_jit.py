"""The house ``njit``: cached, GIL-free, no fastmath (results must be bit-reproducible).

Compiled kernels are cached on disk in a folder keyed on the kernel sources as a whole
(``kernels-<digest>``: every ``.py`` file of this package, numba's and llvmlite's versions, the
Python version and the compile flags below). numba on its own keys a function's cache entry on
that function's file only, so after an edit to a helper that a kernel inlines (``placement.py``
inlined by ``engine.advance``) a warm cache ran the old helper; here any edit to any kernel file
moves every kernel to a new folder and recompiles it. The folder's parent is ``NUMBA_CACHE_DIR``
if set, else ``__pycache__`` beside this file, else the user's cache directory
(``~/.cache/fastblox``); folders of other digests unused for ``STALE_DAYS`` days are removed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import llvmlite
import numba
from numba.core import caching, config

from . import _lazy
from ._calls import unliteral_calls

# FASTBLOX_KERNEL_LINES=1: compile with line tables for profilers (bench/profile_kernel.py). Only
# the tables: no bounds checks and no extended variable lifetimes, which debug=True turns on by
# default and which would profile a different, slower kernel.
_LINES = dict(debug=True, _dbg_extend_lifetimes=False, boundscheck=False) if os.environ.get(
    "FASTBLOX_KERNEL_LINES", "") not in ("", "0") else {}

KERNEL_DIR = Path(__file__).resolve().parent
#: the built-in policies' files: their key functions are compiled into the kernels
POLICY_DIR = Path(sys.modules[__name__.partition(".")[0]].__file__).resolve().parent / "policies"
SOURCE_DIRS = (KERNEL_DIR, POLICY_DIR)
CACHE_PREFIX = "kernels-"
STALE_DAYS = 14

# every function compiled through ``jit`` (tests check they all live in KERNEL_DIR, the sources
# the cache key covers)
COMPILED: list = []


@functools.cache
def source_digest() -> str:
    """Digest of everything a compiled kernel depends on: the bytes of every ``.py`` file under
    this package and under ``fastblox/policies/`` (sorted by relative path), the numba, llvmlite
    and Python versions, and the compile flags that change the generated code."""
    h = hashlib.sha256()
    for top in SOURCE_DIRS:
        for p in sorted(top.rglob("*.py")):
            h.update(top.name.encode() + b"/" + p.relative_to(top).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    flags = (numba.__version__, llvmlite.__version__, sys.version, sorted(_LINES.items()),
             config.BOUNDSCHECK, ("lazy helpers", _lazy.ENABLED))
    h.update(repr(flags).encode())
    return h.hexdigest()[:16]


def _cache_parents() -> list[Path]:
    if config.CACHE_DIR:
        return [Path(config.CACHE_DIR)]
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return [KERNEL_DIR / "__pycache__", home / "fastblox"]


@functools.cache
def _prune(parent: Path) -> None:
    """:func:`prune_stale` for this digest's kernels; once per parent and process."""
    prune_stale(parent, CACHE_PREFIX, CACHE_PREFIX + source_digest())


def prune_stale(parent: Path, prefix: str, mine: str) -> None:
    """Mark ``parent/mine`` used (its mtime) and remove the other ``prefix*`` folders of ``parent``
    not used for STALE_DAYS days (the caches of other sources: kernels here, parsed traces in
    ``fastblox.traces.cache``)."""
    cutoff = time.time() - STALE_DAYS * 86400
    try:
        os.utime(parent / mine)
    except OSError:
        pass
    for d in parent.glob(prefix + "*"):
        try:
            if d.name != mine and d.is_dir() and d.stat().st_mtime < cutoff:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


class KernelCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba cache locator for the functions of this package: ``<parent>/kernels-<digest>/``."""

    def __init__(self, py_func, py_file, cache_path: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = cache_path

    def get_cache_path(self):
        return self._cache_path

    def ensure_cache_path(self):
        """Checked once per folder (:func:`_folder_of`), not once per function: numba's own check
        makes the folder and writes a temporary file in it, for each of the ~120 kernels as this
        package is imported (about 20 ms of every start-up)."""
        if _folder_of(self._py_file) is None:
            raise OSError(f"no writable kernel cache folder for {self._py_file}")

    @classmethod
    def from_function(cls, py_func, py_file):
        path = _folder_of(py_file)
        if path is None:
            return None  # not ours (numba's own locators handle it), or no writable folder
        return cls(py_func, py_file, path)


@functools.cache
def _folder_of(py_file) -> str | None:
    """The cache folder of the kernels of source file ``py_file`` (created and checked writable;
    once per file and process), or None for a file that is not ours or no writable folder."""
    if not is_source(py_file):
        return None
    sub = caching._CacheLocator.get_suitable_cache_subpath(py_file)
    for parent in _cache_parents():
        path = parent / (CACHE_PREFIX + source_digest()) / sub
        try:
            path.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=path).close()
        except OSError:
            continue
        _prune(parent)
        return str(path)
    return None


def _defer_blas_probe() -> None:
    """Keep numba's start-up from importing scipy when nothing compiled needs BLAS.

    The first compile or cache load of a process initialises numba's CPU target, which imports
    ``numba.np.arraymath``; that module probes for a BLAS at import (``_HAVE_BLAS =
    _check_blas()``, i.e. ``numba.np.linalg.ensure_blas()``, which imports
    ``scipy.linalg.cython_blas``: ~0.3 s of a warm ``fastblox run``, for a flag that only
    ``np.convolve``/``np.correlate``-style inner products read when they compile). No kernel here
    uses BLAS or LAPACK (no ``np.dot``, ``@``, ``np.linalg``), so that probe is answered without the
    import: ``ensure_blas`` is replaced by a one-shot stand-in that, called by arraymath's probe,
    puts numba's own function back (in ``linalg`` and ``arraymath``) and returns as the real one
    does when scipy is there. ``_HAVE_BLAS`` is then True, as numba would find it (scipy is a
    dependency of fastblox; without a findable scipy nothing is replaced), and every later caller,
    e.g. the lowering of a user's ``np.dot``, gets the real ``ensure_blas``, which imports scipy
    then and does numba's LP64/ILP64 check. Any other first caller gets the real function at once
    and the stand-in is gone. Nothing is replaced when arraymath is already imported."""
    if "numba.np.arraymath" in sys.modules or importlib.util.find_spec("scipy") is None:
        return
    from numba.np import linalg

    real = getattr(linalg, "ensure_blas", None)
    if real is None:
        return

    def ensure_blas():
        linalg.ensure_blas = real
        if sys._getframe(1).f_globals.get("__name__") != "numba.np.arraymath":
            return real()
        am = sys.modules.get("numba.np.arraymath")
        if am is not None and getattr(am, "ensure_blas", None) is ensure_blas:
            am.ensure_blas = real
        return None

    linalg.ensure_blas = ensure_blas


def _load_without_refresh() -> None:
    """Load this package's cached kernels without refreshing numba's target context first.

    Before each load from the cache, numba refreshes its CPU target: it starts the runtime
    (NRT) and imports every module that registers an implementation (``numba.cpython.*``,
    ``numba.np.arraymath``, ``npyimpl``, typed containers...), ~0.08 s of a warm ``fastblox
    run``, to make sure it can compile. A cache hit compiles nothing: it links stored machine
    code, which needs the runtime only. So for the kernels whose cache is ours
    (:class:`KernelCacheLocator`) the load starts the runtime and skips the rest; a miss then
    compiles as always (numba's compiler refreshes the context itself first), and so does any
    other function (a user's ``numba.njit``)."""
    from numba.core.runtime import rtsys

    real = caching.Cache.load_overload

    def load_overload(self, sig, target_context):
        if not isinstance(getattr(self._impl, "locator", None), KernelCacheLocator):
            return real(self, sig, target_context)
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    caching.Cache.load_overload = load_overload


def _before_registries() -> None:
    """Run :func:`_defer_blas_probe` when numba first loads its implementation registries (the
    first compile of the process), not at import: a warm run loads its kernels without them
    (:func:`_load_without_refresh`), and importing ``numba.np.linalg`` to defer the probe took
    0.03 s of its start-up."""
    from numba.core import cpu

    real = cpu.CPUContext.load_additional_registries

    def load_additional_registries(self):
        cpu.CPUContext.load_additional_registries = real
        _defer_blas_probe()
        return real(self)

    cpu.CPUContext.load_additional_registries = load_additional_registries


_before_registries()
_load_without_refresh()
_lazy.install()

_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.61
if KernelCacheLocator not in _IMPL._locator_classes:
    _IMPL._locator_classes.insert(0, KernelCacheLocator)


def is_source(py_file) -> bool:
    """Whether ``py_file`` is one of the sources the kernel cache's digest covers."""
    path = Path(py_file).resolve()
    return any(path.is_relative_to(top) for top in SOURCE_DIRS)


def cache_dir() -> Path:
    """The folder the kernels of these sources are cached in (created on first use)."""
    for parent in _cache_parents():
        d = parent / (CACHE_PREFIX + source_digest())
        try:
            d.mkdir(parents=True, exist_ok=True)
            return d
        except OSError:
            continue
    raise OSError("no writable folder for the kernel cache: set NUMBA_CACHE_DIR")


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

    def compile_(f):
        COMPILED.append(f)
        return unliteral_calls(numba.njit(**opts)(f))

    return compile_ if fn is None else compile_(fn)
