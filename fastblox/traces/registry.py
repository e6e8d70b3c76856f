"""The trace-format registry and :func:`read_trace`.

A format is a named reader ``read(path, *, on_bad_rows, max_gpus, **options) -> Workload`` plus a
``detect(path, head) -> bool`` that says, from the file name and its first bytes, whether a file is
unambiguously in this format. Registering a name twice raises :class:`ConfigError`.
"""

from __future__ import annotations

import inspect as _inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import ConfigError, TraceError
from ..parts import Registry
from . import _core


@dataclass(frozen=True)
class TraceFormat:
    name: str
    read: Callable
    description: str
    detect: Callable | None = None  # (path: Path, head: str) -> bool
    options: dict = field(default_factory=dict)  # option name -> one-line help
    #: the reader reads only the trace file (not a table beside it or one an option names): its
    #: workloads can be cached by the file's bytes (``fastblox.traces.cache``)
    self_contained: bool = True

    def option_names(self) -> list[str]:
        sig = _inspect.signature(self.read)
        return [p.name for p in sig.parameters.values()
                if p.kind == p.KEYWORD_ONLY and p.name not in ("on_bad_rows", "max_gpus", "name")]


FORMATS = Registry("trace format")


def register_format(name: str, *, description: str, detect=None, options: dict | None = None,
                    self_contained: bool = True):
    """Decorator: register ``fn`` as the reader of format ``name`` (a duplicate name raises).
    ``self_contained=False`` for a reader that also reads other files (then never cached)."""

    def deco(fn):
        FORMATS.register(name, TraceFormat(name, fn, description, detect, dict(options or {}), self_contained))
        return fn

    return deco


def format_names() -> list[str]:
    return FORMATS.names()


def _suffixes(p: Path) -> str:
    return p.name.lower()


def detect_format(path, data: bytes | None = None) -> str:
    """The one format whose detector accepts the file, else TraceError asking for ``format=``."""
    p = Path(str(path))
    lname = _suffixes(p)
    if lname.endswith(".parquet") or lname.endswith(".pq"):
        return "parquet"
    if data is None:
        data = _core.read_bytes(p)
    if data[:4] == b"PAR1":
        return "parquet"
    head = _core.head_text(data)
    hits = [name for name in FORMATS.names() if FORMATS.get(name).detect and FORMATS.get(name).detect(p, head)]
    if len(hits) == 1:
        return hits[0]
    first = _core.first_line(data)[:200]
    if hits:
        raise TraceError(f"could be any of the formats {', '.join(hits)}; pass format= (--format) to choose", path=path)
    raise TraceError(
        f"cannot tell the trace format from the file name or its first line ({first!r}); pass format= "
        f"(--format) with one of: {', '.join(FORMATS.names())}",
        path=path,
    )


def read_trace(path, format: str | None = None, on_bad_rows: str = "error", max_gpus: int | None = None,
               **options):
    """Read a trace file into a :class:`~fastblox.workload.Workload`.

    ``format`` is a registered name (see :data:`FORMATS`, ``fastblox trace formats``); without it the
    format is detected from the extension or the header when that is unambiguous, else a
    :class:`TraceError` asks for ``format=``. ``on_bad_rows``: ``"error"`` (default) raises on the
    first kind of unusable row, naming file, column, rows and count; ``"drop"`` drops them and counts
    them per reason in ``Workload.dropped`` (unsorted submit times are sorted, counted as
    ``"resorted"``). ``max_gpus`` (the cluster's GPUs) makes larger jobs bad rows. ``options`` go to
    the format's reader (e.g. ``duration="sum"`` for ``philly-log``). A file read before with the
    same arguments comes from the parsed-trace cache (:mod:`fastblox.traces.cache`)."""
    from . import cache

    _core.check_mode(on_bad_rows, max_gpus)
    args = (format, on_bad_rows, max_gpus, sorted(options.items()))
    return cache.cached(path, args, lambda: _read(path, format, on_bad_rows, max_gpus, options))


def _read(path, format, on_bad_rows, max_gpus, options):
    """``(workload, whether it may be cached)``."""
    if format is None:
        data = None
        p = Path(str(path))
        if not p.name.lower().endswith((".parquet", ".pq")):
            data = _core.read_bytes(p)
        format = detect_format(p, data)
    fmt = FORMATS.get(format)
    allowed = fmt.option_names()
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise ConfigError(
            f"format {fmt.name!r} has no option {', '.join(map(repr, unknown))}"
            + (f"; its options are: {', '.join(allowed)}" if allowed else "; it takes no options")
        )
    return fmt.read(path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, **options), fmt.self_contained
