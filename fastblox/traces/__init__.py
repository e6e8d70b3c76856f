"""Trace readers.

Every public job trace format fastblox knows is a named reader in :data:`FORMATS`; all of them end
in the same :class:`~fastblox.workload.Workload` (canonical columns: :mod:`fastblox.traces.schema`)
and the same bad-row rules (``docs/traces.md``)::

    from fastblox.traces import read_trace, inspect, format_inspect, write_parquet
    w = read_trace("jobs.csv.gz", on_bad_rows="drop", max_gpus=128)   # format detected
    w.dropped                       # {'duration_s=NaN': 12, 'num_gpus<=0': 3}
    print(format_inspect(inspect(w, total_gpus=128)))
    write_parquet(w, "jobs.parquet")
"""

from .registry import FORMATS, TraceFormat, detect_format, format_names, read_trace, register_format
from .schema import OPTIONAL, REQUIRED, read_parquet, to_arrow, write_parquet
from . import csv_formats, gavel, pai, philly, swf  # noqa: F401,E402  (register the built-in formats)
from .inspect import format_inspect, inspect

__all__ = [
    "FORMATS", "OPTIONAL", "REQUIRED", "SCHEMA", "TraceFormat", "detect_format", "format_inspect", "format_names",
    "inspect", "read_parquet", "read_trace", "register_format", "to_arrow", "write_parquet",
]


def __getattr__(name: str):
    if name == "SCHEMA":  # an Arrow schema: built (and pyarrow imported) on first use
        from .schema import SCHEMA

        return SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
