"""The ``fastblox`` command line. Bad input ends in one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from . import parts
from .errors import ConfigError, FastbloxError
from .outputs import json_text, prepare_dir
from .slices import RunInterrupted
from .spec import add_cli_options, cli_spec

def _add_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="replay one workload with one scheduler",
        description="Replay a workload (Blox's paper generator by default, or --trace PATH) on a cluster "
        "with a scheduler composed of named parts, and print a summary. Every run option is a field of "
        "fastblox.RunSpec: the same names are keywords of fastblox.simulate and keys of a sweep config.",
    )
    add_cli_options(p)
    out = p.add_argument_group("output")
    out.add_argument("--out", metavar="DIR", help="write jobs.parquet and summary.json into DIR")
    out.add_argument("--blox-json", action="store_true", help="also write Blox's five JSON files into DIR")
    out.add_argument("--blox-prefix", default="blox", help="file name prefix of Blox's JSON files (Blox's --exp-prefix)")
    out.add_argument("--json", action="store_true", help="print the summary as JSON")
    out.add_argument("--progress", action="store_true",
                     help="print progress lines on stderr even when it is not a terminal (on a terminal: one "
                          "updating line once a run has lasted 2 s)")
    p.set_defaults(func=cmd_run)


EXIT_INCOMPLETE = 3  # a limit ended the run: results written and printed, marked "complete": false
EXIT_INTERRUPTED = 130  # Ctrl-C: nothing written


@contextlib.contextmanager
def _progress_line(a):
    """The progress line on stderr while inside (a terminal, or --progress)."""
    from . import slices

    slices.PROGRESS = slices.ProgressLine(sys.stderr) if a.progress or sys.stderr.isatty() else None
    try:
        yield
    finally:
        if slices.PROGRESS is not None:
            slices.PROGRESS.close()
        slices.PROGRESS = None


def _label(r) -> str:
    if r.workload == "blox":
        return f"blox paper workload, load {r.load:g} jobs/h"
    if r.workload == "trace":
        return r.trace
    return {"gavel": "gavel-like workload", "sample": "philly sample"}[r.workload] + (
        f", {r.num_jobs} jobs" if r.num_jobs else "")


@contextlib.contextmanager
def _warn_once_about_load():
    """Inside: the engine's offered-load warning goes to stderr, once (an endless stream runs in
    parts); the library stays quiet again afterwards."""
    from . import engine

    said = []

    def say(msg: str) -> None:
        if not said:
            said.append(msg)
            print(f"fastblox: {msg}", file=sys.stderr, flush=True)

    engine.LOAD_NOTICE = say
    try:
        yield
    finally:
        engine.LOAD_NOTICE = None


def cmd_run(a) -> int:
    from .engine import prewarm, spec_kind
    from .runner import run_spec

    if a.blox_json and not a.out:
        raise ConfigError("--blox-json writes into --out DIR; give --out")
    if a.blox_json and a.compat != "blox":
        raise ConfigError("--blox-json needs --compat blox (Blox's files describe Blox's rounds)")
    r = cli_spec(a).resolved()  # every check between options, before any work
    if a.out:
        prepare_dir(a.out)
    kind = spec_kind(r)
    if kind is not None:
        prewarm(kind)  # overlaps loading the kernel with reading the trace
    with _progress_line(a), _warn_once_about_load():
        res = run_spec(r)
    if a.out:
        res.write(a.out, blox_json=a.blox_json, blox_prefix=a.blox_prefix,
                  blox_load=r.load if r.workload == "blox" else None)
    if a.json:
        print(json_text(res.summary, indent=2, sort_keys=True))
    else:
        print(format_summary(res, _label(r)))
        if a.out:
            print(f"wrote {Path(a.out) / 'jobs.parquet'} and summary.json")
    if not res.summary.get("complete", True):
        print(f"fastblox: warning: incomplete run: {res.summary['stop_reason']}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _num(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.2f}"


#: what places the jobs of a run without a placement option, by compat mode
_NO_PLACEMENT = {"gavel": "one pool of GPUs per type", "pollux": "the Pollux simulator's packing onto nodes",
                 "synergy": "Synergy's pick (GPUs in order on servers that hold the job's CPUs and memory)",
                 "sia": "the Sia simulator's packing onto each type's nodes"}


def format_summary(res, label: str) -> str:
    s, c = res.summary, res.config
    mode = f"{c['compat']}-compat" if c["compat"] else (c["time_model"] or "intervals")
    if c["round_s"] is not None and mode != "events":
        mode += f" (R = {c['round_s']:g} s)"
    lines = [
        f"fastblox: {label} on {c['cluster']} ({s['total_gpus']} GPUs)",
        f"  scheduler  {c['policy']} | placement {c['placement'] or _NO_PLACEMENT.get(c['compat'] or c['policy'], 'one pool of GPUs')} "
        f"| admission {c['admission']}"
        f" | {mode}",
        f"  load       offered {_num(s.get('offered_load'))} (GPU-seconds asked / GPU-seconds between the first and "
        f"last arrival{'; above 1 the queue only grows' if (s.get('offered_load') or 0) > 1 else ''})",
        f"  jobs       {s['num_jobs']:,} in the workload, {s['num_finished']:,} finished, {s['num_tracked']:,} "
        f"tracked (the statistics below are over the tracked jobs that finished)",
        f"  JCT        mean {s['avg_jct_s']:,.1f} s | p50 {s['p50_jct_s']:,.1f} s | p99 {s['p99_jct_s']:,.1f} s "
        f"(job completion time: finish - submit)",
        f"  waiting    mean {s['avg_queue_s']:,.1f} s before the first start" + (f" | responsiveness {s['avg_responsiveness_s']:,.3f} s" if "avg_responsiveness_s" in s else ""),
        f"  makespan   {s['makespan_s']:,.0f} s | utilisation {100 * s['utilisation']:.1f}% | preemptions {s['num_preemptions']}",
        f"  fairness   rho (JCT / time alone) mean {s['rho_mean']:.2f} | p95 {s['rho_p95']:.2f} | max {s['rho_max']:.2f} | Jain {s['jain_index']:.3f}",
    ]
    if s.get("num_failures") or s.get("cluster_events"):
        lines.append(f"  failures   {s.get('num_failures', 0)} job kills by node events {s.get('cluster_events', {})} | "
                     f"{s.get('lost_gpu_s', 0.0) / 3600:,.1f} GPU-hours of progress lost")
    elif s.get("lost_gpu_s"):
        lines.append(f"  lost       {s['lost_gpu_s'] / 3600:,.1f} GPU-hours of progress lost to preemptions (checkpoint interval)")
    if s.get("num_migrations"):
        lines.append(f"  migrations {s['num_migrations']} (running jobs moved to another GPU type or size)")
    if s.get("throughput_table"):
        lines.append(f"  speed      table {s['throughput_table']} (reference {s['reference_gpu']}), "
                     f"{s['jobs_with_known_model']} of {s['num_jobs']} jobs of a known model")
    if "elastic_jobs" in s:
        kinds = [f"{n} {kind}" + (f", mean JCT {s[key]:,.1f} s" if n else "") for n, kind, key in
                 ((s["elastic_jobs"], "elastic jobs", "avg_jct_elastic_s"),
                  (s["num_jobs"] - s["elastic_jobs"], "rigid", "avg_jct_rigid_s"))]
        lines.append(f"  elastic    {kinds[0]} | {kinds[1]} | {s['restarts']} restarts"
                     + (f" | {s['held_jobs']} held by admission" if s.get("held_jobs") else ""))
    if s.get("held_jobs") and "elastic_jobs" not in s:
        lines.append(f"  admission  {s['held_jobs']} jobs held back after they arrived")
    if "num_rounds" in s:
        lines.append(f"  rounds     {s['num_rounds']}")
    if s.get("num_dropped"):
        lines.append(f"  dropped    {s['num_dropped']} jobs dropped by the simulator (no JCT; ids in summary.json "
                     "dropped_job_ids)")
    if s.get("num_dropped_rows"):
        lines.append(f"  dropped    {s['num_dropped_rows']} trace rows: " + ", ".join(f"{k}={v}" for k, v in s["dropped_rows"].items()))
    if s.get("num_resorted_rows"):
        lines.append(f"  resorted   {s['num_resorted_rows']} trace rows were out of submit order (kept, sorted)")
    if not s.get("complete", True):
        lines.append(f"  INCOMPLETE {s['stop_reason']}")
    lines.append(f"  simulated in {s['sim_wall_s'] * 1e3:.1f} ms" + (f" (+{s['compile_s']:.2f} s compile/cache load)" if s["compile_s"] > 0.01 else ""))
    return "\n".join(lines)


def cmd_parts(a) -> int:
    print("policies:")
    for name in parts.POLICIES.names():
        p = parts.POLICIES.get(name)
        print(f"  {name:14s} {p.description}")
        for o in p.options:
            if not o.name.startswith("_"):
                print(f"  {'':14s}   --policy-opt {o.name}=... (default {o.default}): {o.help}")
    print("--compat blox policies: " + ", ".join(f"{k} ({v[0]})" for k, v in parts.BLOX_POLICIES.items()))
    from .compat_tiresias import NATIVE_EQUIVALENTS, SCHEDULES

    print("--compat tiresias schedules (Tiresias' names; --policy-opt thresholds=...; gittins: distribution=...): "
          + ", ".join([*SCHEDULES, *NATIVE_EQUIVALENTS]))
    from .compat_gavel import POLICIES as GAVEL_POLICIES

    print("--compat gavel policies (Gavel's names, on a Gavel trace; --policy-opt seed=0, reset_s=1920, "
          "optimum=ecos|central|vertex; ecos, the default, needs fastblox[gavel]): " + ", ".join(GAVEL_POLICIES))
    from .compat_pollux import POLICIES as POLLUX_POLICIES

    print("--compat pollux policies (the Pollux simulator's, on a Pollux workload CSV): " + ", ".join(POLLUX_POLICIES))
    from .spec import ELASTIC_POLICIES

    print("elastic and rigid jobs in one run, without --compat (on any cluster of alike nodes; an elastic-mix CSV or "
          "any trace; docs/elastic.md): " + ", ".join(ELASTIC_POLICIES))
    from .compat_synergy import POLICIES as SYNERGY_POLICIES
    from .compat_synergy import options_text

    print("--compat synergy schedulers (Synergy's names, on a Synergy trace or any trace; +fair: GPU-proportional, "
          f"none: Synergy-Greedy, +tune: Synergy-Tune; --policy-opt {options_text()}): " + ", ".join(SYNERGY_POLICIES))
    from .compat_sia import POLICIES as SIA_POLICIES

    print("--compat sia policies (the Sia simulator's, on a Sia workload CSV): " + ", ".join(SIA_POLICIES))
    for title, reg in (("placements", parts.PLACEMENTS), ("time models", parts.TIME_MODELS)):
        print(f"{title}:")
        for name in reg.names():
            print(f"  {name:14s} {reg.meaning(name)}")
    print("admission:")
    print(f"  {'accept-all':14s} every arrived job joins the queue (the default)")
    print(f"  {'load:THETA':14s} Blox's load-based accept: admit arrivals while the active jobs ask for at most "
          "THETA x the cluster's GPUs; the rest wait outside, in arrival order")
    from .spec import engines_table

    print("options each engine takes:")
    print(engines_table())
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with bad flags reported as every other error: one line, exit code 2 (no usage
    block; ``-h`` shows it)."""

    def error(self, message):
        message = message.removeprefix("argument ")
        if message.startswith("unrecognized arguments: "):
            message += _did_you_mean(self, message.removeprefix("unrecognized arguments: ").split())
        sys.stderr.write(f"fastblox: error: {message}\n")
        sys.exit(2)


def _did_you_mean(parser: argparse.ArgumentParser, tokens: list) -> str:
    """`` (did you mean --target-load?)`` for the first unknown flag close to a known one (of any
    subcommand: argparse reports unknown flags from the top-level parser)."""
    import difflib

    known = set(parser._option_string_actions)
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sp in act.choices.values():
                known |= set(sp._option_string_actions)
    for tok in tokens:
        if tok.startswith("--"):
            near = difflib.get_close_matches(tok.split("=", 1)[0], sorted(known), n=1, cutoff=0.75)
            if near:
                return f" (did you mean {near[0]}?)"
    return ""


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="fastblox", description="Fast trace replay for deep-learning cluster schedulers.")
    from . import __version__

    ap.add_argument("--version", action="version", version=f"fastblox {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    pp = sub.add_parser("parts", help="list the registered policies, placements, admissions and time models")
    pp.set_defaults(func=cmd_parts)
    from .traces.cli import add_trace_commands

    add_trace_commands(sub)
    from .experiments_cli import add_experiment_commands
    from .sweep.cli import add_sweep_commands

    add_sweep_commands(sub)
    from .sweep.search_cli import add_search_commands

    add_search_commands(sub)
    add_experiment_commands(sub)
    from .plot_cli import add_plot_commands

    add_plot_commands(sub)
    from .fidelity import add_fidelity_command

    add_fidelity_command(sub)
    return ap


def main(argv=None) -> int:
    rc = _main(argv)
    if argv is None:  # the command itself: nothing is left to do but exit
        _exit(rc)
    return rc


def _exit(rc: int) -> None:
    """End the process with ``rc`` without the interpreter's teardown. Freeing every module and
    object of numba, llvmlite and polars at exit took 0.3-0.8 s of a warm ``fastblox run`` (more
    than the run itself); what teardown does that matters is done here first: waiting for
    non-daemon threads (as the interpreter does), the ``atexit`` handlers (multiprocessing, logging,
    ``weakref.finalize``, Ray...) and flushing stdout and stderr. Every file fastblox writes is
    closed (and renamed into place) before this."""
    import atexit
    import threading

    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a closed pipe (| head) or a closed stream: nothing to flush into
            pass
    os._exit(rc)


def _main(argv) -> int:
    ap = build_parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:  # a bad flag (one line printed), --help or --version
        return int(e.code or 0)
    if not getattr(a, "func", None):
        ap.print_help()
        return 2
    from . import engine

    engine.COMPILE_NOTICE = lambda msg: print(f"fastblox: {msg}", file=sys.stderr, flush=True)
    _one_line_warnings()
    try:
        return int(a.func(a) or 0)
    except FastbloxError as e:
        print(f"fastblox: error: {e}", file=sys.stderr)
        return 2
    except RunInterrupted as e:
        print(f"fastblox: {e}; nothing written", file=sys.stderr)
        return _interrupted(argv)
    except KeyboardInterrupt as e:  # Ctrl-C: one line (a sweep's says what it wrote), no traceback
        print(f"fastblox: interrupted{f': {e}' if str(e) else ''}", file=sys.stderr, flush=True)
        return _interrupted(argv)
    except BrokenPipeError:
        return 0


def _one_line_warnings() -> None:
    """fastblox's own warnings as ``fastblox: warning: MESSAGE`` (no file, line or class name)."""
    import warnings

    from .errors import FastbloxWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FastbloxWarning):
            print(f"fastblox: warning: {message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _interrupted(argv) -> int:
    """Exit code 130 after Ctrl-C. As the command itself (``argv`` None) exit at once: nothing is
    left to write, and the interpreter's teardown (numba, polars' threads) can take a second."""
    if argv is None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
