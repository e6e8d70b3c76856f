"""``fastblox trace ...``: inspect, convert, scale up and list trace formats.

``add_trace_commands(subparsers)`` adds the ``trace`` command to the main parser; each leaf sets
``func(args) -> exit code``. Bad input raises FastbloxError subclasses (the main CLI prints them in
one line and exits 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import ConfigError


def _option(s: str):
    """KEY=VALUE; VALUE is JSON when it parses as JSON (numbers, true/false, {...}), else a string."""
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {s!r}")
    k, v = s.split("=", 1)
    k = k.strip().replace("-", "_")
    if not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {s!r}")
    try:
        val = json.loads(v)
    except ValueError:
        val = v
    return k, val


def _common(p, bad_rows: str = "error") -> None:
    p.add_argument("--format", default=None, metavar="F",
                   help="trace format (default: detected from the name/header); see `fastblox trace formats`")
    p.add_argument("--on-bad-rows", choices=["error", "drop"], default=bad_rows,
                   help=f"stop at unusable rows with an error or drop and count them, per reason (default {bad_rows})")
    p.add_argument("-o", "--option", action="append", type=_option, default=[], metavar="KEY=VALUE",
                   help="a reader option, e.g. duration=last (philly-log) or steps_per_s=table.json (gavel); repeatable")


def _read(a, max_gpus=None):
    from . import read_trace

    return read_trace(a.path, format=a.format, on_bad_rows=a.on_bad_rows, max_gpus=max_gpus, **dict(a.option))


def _total_gpus(spec):
    if spec is None:
        return None
    from ..cluster import Cluster

    return Cluster.parse(spec).total_gpus


def cmd_inspect(a) -> int:
    from .inspect import format_inspect, inspect

    total = _total_gpus(a.cluster)
    w = _read(a, max_gpus=total if (total is not None and a.on_bad_rows == "drop") else None)
    d = inspect(w, total_gpus=total)
    if a.json:
        print(json.dumps(d, indent=2, sort_keys=True, default=float))
    else:
        print(format_inspect(d))
    return 0


def cmd_convert(a) -> int:
    from .schema import write_parquet

    out = Path(a.out)
    if out.suffix.lower() != ".parquet":
        raise ConfigError(f"trace convert writes Parquet: OUT must end in .parquet, got {a.out!r}")
    total = _total_gpus(a.cluster)
    w = _read(a, max_gpus=total)
    if out.parent and not out.parent.exists():
        raise ConfigError(f"the folder of {a.out!r} does not exist")
    write_parquet(w, out)
    dropped = ", ".join(f"{k}: {v:,}" for k, v in w.dropped.items())
    print(f"wrote {len(w):,} jobs to {out}" + (f" (dropped while reading: {dropped})" if dropped else ""))
    return 0


def cmd_scale(a) -> int:
    from .scale import format_report, scale_trace
    from .schema import write_parquet

    out = Path(a.out)
    if out.suffix.lower() != ".parquet":
        raise ConfigError(f"trace scale writes Parquet: --out must end in .parquet, got {a.out!r}")
    if out.parent and not out.parent.exists():
        raise ConfigError(f"the folder of {a.out!r} does not exist")
    if a.jobs <= 0:
        raise ConfigError(f"--jobs must be positive, got {a.jobs}")
    if a.streams is not None and a.streams <= 0:
        raise ConfigError(f"--streams must be positive, got {a.streams}")
    total = _total_gpus(a.cluster)
    w = _read(a, max_gpus=total if (total is not None and a.on_bad_rows == "drop") else None)
    syn, rep = scale_trace(w, a.jobs, seed=a.seed, streams=a.streams, first_weekday=a.first_weekday,
                           total_gpus=total, source_path=a.path)
    rep["source_dropped"] = {str(k): int(v) for k, v in w.dropped.items()}
    write_parquet(syn, out)
    side = out.with_name(out.name + ".json")
    side.write_text(json.dumps(rep, indent=2, sort_keys=True, default=float) + "\n")
    print(format_report(rep))
    print(f"wrote {len(syn):,} jobs to {out} and the report to {side}")
    return 0


def cmd_formats(a) -> int:
    from .registry import FORMATS

    for name in FORMATS.names():
        f = FORMATS.get(name)
        print(f"{name:13s} {f.description}")
        for opt, help_ in f.options.items():
            print(f"{'':15s}-o {opt}=...  {help_}")
    return 0


def add_trace_commands(subparsers) -> None:
    """Add ``trace inspect``, ``trace convert``, ``trace scale`` and ``trace formats`` to an argparse subparsers object."""
    tp = subparsers.add_parser("trace", help="inspect or convert job traces",
                               description="Read job traces of many formats: summarise them or convert them to Parquet.")
    tsub = tp.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")

    def _help(a, _p=tp) -> int:
        _p.print_help()
        return 2

    tp.set_defaults(func=_help)

    ip = tsub.add_parser("inspect", help="summarise a trace: jobs, span, GPU mix, durations, arrivals, load",
                         description="Read a trace and print its size, span, GPU-size mix, duration quantiles, "
                                     "inter-arrival CV, hour-of-day profile and (with --cluster) offered load.")
    ip.add_argument("path", metavar="PATH")
    _common(ip, bad_rows="drop")  # (inspecting is when one wants to see the bad rows: counted, not an error)
    ip.add_argument("--cluster", default=None, metavar="SPEC",
                    help="cluster for the offered load, e.g. 32x4 (with --on-bad-rows drop, larger jobs are dropped)")
    ip.add_argument("--json", action="store_true", help="print the summary as JSON")
    ip.set_defaults(func=cmd_inspect)

    cp = tsub.add_parser("convert", help="convert a trace to Parquet in fastblox's canonical schema",
                         description="Read a trace and write it as Parquet (columns: job_id, submit_time_s, "
                                     "duration_s, num_gpus + optional ones; see docs/traces.md).")
    cp.add_argument("path", metavar="IN")
    cp.add_argument("out", metavar="OUT.parquet")
    _common(cp)
    cp.add_argument("--cluster", default=None, metavar="SPEC",
                    help="jobs larger than this cluster are bad rows (dropped with --on-bad-rows drop)")
    cp.set_defaults(func=cmd_convert)

    sp = tsub.add_parser("scale", help="scale a trace up to N jobs (day-block bootstrap, superposed streams)",
                         description="Make a synthetic trace of exactly N jobs from a source trace: whole jobs, "
                                     "days resampled within their day-of-week stratum, K = ceil(N/len) streams "
                                     "superposed (grow the cluster by K). Writes OUT.parquet, OUT.parquet.json "
                                     "(validation report) and prints a validation table; see docs/traces.md.")
    sp.add_argument("path", metavar="SRC")
    sp.add_argument("--jobs", type=int, required=True, metavar="N", help="number of jobs to make")
    sp.add_argument("--out", required=True, metavar="OUT.parquet", help="where to write the synthetic trace")
    sp.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    sp.add_argument("--streams", type=int, default=None, metavar="K", help="streams to superpose (default ceil(N/len))")
    sp.add_argument("--first-weekday", type=int, default=None, choices=range(7), metavar="D",
                    help="weekday of the trace's first day (0 = Monday): strata become weekday/weekend "
                         "(default: day index mod 7)")
    _common(sp)
    sp.add_argument("--cluster", default=None, metavar="SPEC",
                    help="the source's cluster, e.g. 32x4: the report gives the offered load on it and on K times it")
    sp.set_defaults(func=cmd_scale)

    fp = tsub.add_parser("formats", help="list the trace formats and their options")
    fp.set_defaults(func=cmd_formats)
