"""A cache of parsed traces: the second read of a file gives back the same workload without parsing.

A warm ``fastblox run --trace FILE`` spent a fifth of its process in reading the trace, mostly in
importing polars (every reader parses with it). :func:`cached` keys a read on the file's bytes
(SHA-256), the reader's arguments, and the source of the readers and of ``Workload``; a hit loads
the pickled :class:`~fastblox.workload.Workload` (arrays, extra columns, the dropped-row counts and
where they were) and parses nothing. Only files up to ``MAX_BYTES`` are cached (a larger trace is not
start-up bound); a read that raised or warned is not cached (its warnings are shown at every
read), nor one of a format that also reads other files (``self_contained=False``: Gavel's traces,
Alibaba PAI's job table, Pollux's with a duration table). Entries live in ``<cache>/traces-<digest>/``
beside the kernel cache (``NUMBA_CACHE_DIR`` if set, else ``~/.cache/fastblox``); folders of other
reader sources unused for two weeks are removed, as the kernels' are (``kernels._jit.prune_stale``),
and a folder keeps its ``MAX_ENTRIES`` most recently used entries. ``FASTBLOX_TRACE_CACHE=0`` turns
it off.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
import warnings
from pathlib import Path

#: files larger than this (bytes on disk) are read every time
MAX_BYTES = 16 << 20
#: entries kept per folder: past it, the least recently used go (a sweep over many generated traces)
MAX_ENTRIES = 256
PREFIX = "traces-"
#: hits and misses of this process (the tests read them)
STATS = {"hit": 0, "miss": 0}


def enabled() -> bool:
    return os.environ.get("FASTBLOX_TRACE_CACHE", "") not in ("0", "false", "no", "off")


@functools.cache
def source_digest() -> str:
    """Digest of the code a parsed workload depends on: every reader module and ``workload.py``."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(here.glob("*.py")) + [here.parent / "workload.py", here.parent / "errors.py"]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _parent() -> Path:
    from numba.core import config  # (already imported by any run: the kernels are numba's)

    if config.CACHE_DIR:
        return Path(config.CACHE_DIR)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fastblox"


@functools.cache
def _folder() -> Path | None:
    """This digest's folder (created; stale folders of other digests pruned), None if not writable."""
    from ..kernels._jit import prune_stale

    parent = _parent()
    mine = parent / (PREFIX + source_digest())
    try:
        mine.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    prune_stale(parent, PREFIX, mine.name)
    return mine


def _plain(v) -> bool:
    """Whether ``v`` has a repr that is the same in every process (scalars, and lists, tuples and
    dicts of them): an option such as a callable is not, and its read is not cached."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain(x) for x in v)
    if isinstance(v, dict):
        return all(_plain(k) and _plain(x) for k, x in v.items())
    return False


def _key(raw: bytes, args: tuple) -> str:
    h = hashlib.sha256(raw)
    h.update(repr(args).encode())
    return h.hexdigest()[:32]


def cached(path, args: tuple, read):
    """The workload of trace ``path``: the one an earlier identical read cached, else ``read()``'s
    (which returns ``(workload, storable)``: False for a reader that also reads other files, e.g.
    a table beside the trace, whose changes the key would not see). ``args`` are the reader's
    arguments (format, bad-row mode, options): part of the key."""
    if not enabled() or not all(_plain(v) for v in args):
        return read()[0]
    try:
        p = Path(str(path))
        args = (str(p.resolve()),) + tuple(args)  # (a workload is named after its file)
        if p.stat().st_size > MAX_BYTES:
            return read()[0]
        raw = p.read_bytes()
    except OSError:
        return read()[0]  # (the reader names the problem)
    folder = _folder()
    if folder is None:
        return read()[0]
    entry = folder / (_key(raw, args) + ".pkl")
    try:
        with open(entry, "rb") as f:
            w = pickle.load(f)
        STATS["hit"] += 1
        _touch(entry)
        return w
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
        pass
    STATS["miss"] += 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w, storable = read()
    for m in caught:  # (shown as they would have been; a read that warns is not cached)
        warnings.warn_explicit(m.message, m.category, m.filename, m.lineno)
    if storable and not caught:
        _store(entry, w)
    return w


def _touch(entry: Path) -> None:
    try:
        os.utime(entry)  # (its last use: the pruning below keeps the most recently used)
    except OSError:
        pass


def _prune_entries(folder: Path, keep: int = MAX_ENTRIES) -> None:
    """Remove all but the ``keep`` most recently used entries of ``folder``."""
    try:
        entries = sorted(folder.glob("*.pkl"), key=lambda e: e.stat().st_mtime, reverse=True)
    except OSError:
        return
    for e in entries[keep:]:
        try:
            e.unlink()
        except OSError:
            pass


def _store(entry: Path, w) -> None:
    """Write ``w`` to ``entry`` atomically (a reader in another process sees all of it or nothing)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(w, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, entry)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):  # (the read stands; only not cached)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _prune_entries(entry.parent)
