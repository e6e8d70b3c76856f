"""The ``fastblox`` command line. Bad input ends in one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import parts
from ._argtypes import nonneg_float, positive_float
from .errors import ConfigError, FastbloxError

BLOX_DEFAULT_TRACK = (3000, 4000)


def _track(s: str) -> tuple[int, int]:
    try:
        a, b = s.split(":")
        return int(a), int(b)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST job ids like 3000:4000, got {s!r}") from None


def _policy_opt(s: str) -> tuple[str, str]:
    k, eq, v = s.partition("=")
    if not eq or not k.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE like f=0.8, got {s!r}")
    return k.strip(), v.strip()


def _failures(s: str) -> tuple[float, float]:
    try:
        a, b = s.split(":")
        mtbf, rep_ = float(a), float(b)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MTBF_H:REPAIR_H in hours like 500:2, got {s!r}") from None
    if not (mtbf > 0 and rep_ >= 0):
        raise argparse.ArgumentTypeError(f"MTBF must be positive and the repair time >= 0, got {s!r}")
    return mtbf * 3600.0, rep_ * 3600.0


def _add_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="replay one workload with one scheduler",
        description="Replay a workload (Blox's paper generator by default, or --trace PATH) on a cluster "
        "with a scheduler composed of named parts, and print a summary.",
    )
    src = p.add_argument_group("workload")
    src.add_argument("--workload", choices=["blox", "gavel", "sample"], default=None,
                     help="a built-in workload: 'blox' (Blox's paper generator, default), 'gavel' (Gavel-style "
                          "Poisson multi-GPU generator), 'sample' (the bundled Philly sample)")
    src.add_argument("--trace", metavar="PATH", help="a trace file (normalized CSV, Parquet, or any format of `fastblox trace`)")
    src.add_argument("--format", default=None, help="trace format when it cannot be detected")
    src.add_argument("--on-bad-rows", choices=["error", "drop"], default="error",
                     help="what to do with unusable trace rows: stop with an error (default) or drop and count them")
    src.add_argument("--load", type=positive_float, default=6.0, help="jobs per hour for --workload blox (default 6)")
    src.add_argument("--num-jobs", type=int, default=None, help="number of jobs for a generated workload")
    src.add_argument("--seed", type=int, default=None, help="generator seed (blox: 1 as in Blox; gavel: 0)")
    sch = p.add_argument_group("scheduler")
    sch.add_argument("--cluster", default="32x4", help="[type:]NODESxGPUS[,...], e.g. 32x4 or v100:12x4,k80:12x4 (default 32x4)")
    sch.add_argument("--policy", default="fifo", help=f"scheduling policy: {', '.join(parts.POLICIES.names())} "
                     f"(--blox-compat: {', '.join(parts.BLOX_POLICIES)})")
    sch.add_argument("--placement", default=None, help=f"placement: {', '.join(parts.PLACEMENTS.names())} "
                     "(default first-fit; blox with --blox-compat)")
    sch.add_argument("--admission", default="accept-all", help="accept-all or load:THETA (Blox's load-based accept, e.g. load:1.2)")
    sch.add_argument("--time-model", choices=parts.TIME_MODELS.names(), default=None, help="events (default) or rounds")
    sch.add_argument("--round-s", type=positive_float, default=None,
                     help="round length in seconds (default 300; Gavel's policies 360)")
    sch.add_argument("--restart-s", type=nonneg_float, default=0.0, help="seconds lost at every (re)launch (default 0)")
    pre = sch.add_mutually_exclusive_group()
    pre.add_argument("--preempt", dest="preempt", action="store_true", default=None, help="let waiting jobs suspend lower-priority ones")
    pre.add_argument("--no-preempt", dest="preempt", action="store_false", help="never suspend running jobs")
    sch.add_argument("--policy-opt", type=_policy_opt, action="append", default=[], metavar="NAME=VALUE",
                     help="a policy parameter (repeatable), e.g. --policy-opt f=0.5; `fastblox parts` lists each policy's")
    real = p.add_argument_group("cluster realism (native engine)")
    real.add_argument("--throughput", default=None, metavar="TABLE",
                      help="throughput table: 'gavel' (built-in), a CSV/JSON file, or 'none' "
                           "(default: gavel on a cluster of several GPU types, else none)")
    real.add_argument("--reference-gpu", default=None, metavar="TYPE",
                      help="the GPU type trace durations refer to (default v100 when the table has it)")
    real.add_argument("--checkpoint-s", type=nonneg_float, default=0.0,
                      help="checkpoint interval in productive seconds: a stopped job loses its progress since the last one (default 0: loses nothing)")
    real.add_argument("--multi-node-factor", type=positive_float, default=1.0,
                      help="speed multiplier of a gang spread over several nodes, where the table has none (default 1)")
    real.add_argument("--rack-factor", type=positive_float, default=1.0,
                      help="further speed multiplier of a gang spread over several racks (default 1)")
    real.add_argument("--no-placement-effects", dest="placement_effects", action="store_false", default=True,
                      help="no slowdown for gangs spread over nodes or racks (as Gavel's and Tiresias' simulators)")
    real.add_argument("--cluster-events", metavar="CSV", default=None,
                      help="node events over time: CSV time_s,event,node with events fail/remove/recover/add")
    real.add_argument("--failures", type=_failures, default=None, metavar="MTBF_H:REPAIR_H",
                      help="random independent node failures: mean hours between failures per node, hours to repair")
    sch.add_argument("--track", type=_track, default=None, metavar="A:B",
                     help="job ids A..B (inclusive) count in the averages and end the run (blox workload: 3000:4000)")
    sch.add_argument("--blox-compat", action="store_true", help="reproduce Blox's simulator exactly")
    out = p.add_argument_group("output")
    out.add_argument("--out", metavar="DIR", help="write jobs.parquet and summary.json into DIR")
    out.add_argument("--blox-json", action="store_true", help="also write Blox's five JSON files into DIR")
    out.add_argument("--blox-prefix", default="blox", help="file name prefix of Blox's JSON files (Blox's --exp-prefix)")
    out.add_argument("--series", action="store_true", help="record a time series (free GPUs, queue, demand) into DIR/series.parquet")
    out.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_run)


def _load_workload(a):
    """The workload of a run and whether it is Blox's endless generated stream."""
    if a.trace and a.workload:
        raise ConfigError("give either --trace or --workload, not both")
    if a.trace:
        from .traces import read_trace
        from .cluster import Cluster

        return read_trace(a.trace, format=a.format, on_bad_rows=a.on_bad_rows,
                          max_gpus=Cluster.parse(a.cluster).largest_gang() if a.on_bad_rows == "drop" else None), False
    kind = a.workload or "blox"
    if kind == "blox":
        return None, True
    if kind == "gavel":
        from .generators import gavel_like_workload

        return gavel_like_workload(a.num_jobs or 2000, seed=0 if a.seed is None else a.seed), False
    from .datasets import load_sample

    w = load_sample()
    return (w.head(a.num_jobs) if a.num_jobs else w), False


def _kernel_kind(a) -> str | None:
    """The kernel ``fastblox run`` will load (None: the policy is unknown; the run reports it)."""
    from .engine import kind_of

    if a.blox_compat:
        return "compat"
    try:
        return kind_of(a.policy, a.preempt)
    except FastbloxError:
        return None


def cmd_run(a) -> int:
    from .engine import prewarm, simulate, simulate_blox_workload

    if a.blox_json and not a.out:
        raise ConfigError("--blox-json writes into --out DIR; give --out")
    if a.blox_json and not a.blox_compat:
        raise ConfigError("--blox-json needs --blox-compat (Blox's files describe Blox's rounds)")
    if a.num_jobs is not None and a.num_jobs <= 0:
        raise ConfigError(f"--num-jobs must be positive, got {a.num_jobs}")
    if a.cluster_events and a.failures:
        raise ConfigError("give either --cluster-events or --failures, not both")
    kw = dict(cluster=a.cluster, scheduler=a.policy, placement=a.placement, admission=a.admission,
              time_model=a.time_model, round_s=a.round_s, restart_s=a.restart_s, preempt=a.preempt,
              blox_compat=a.blox_compat, record_series=a.series, checkpoint_s=a.checkpoint_s,
              throughput=a.throughput, multi_node_factor=a.multi_node_factor, rack_factor=a.rack_factor,
              cluster_events=a.cluster_events, policy_opts=dict(a.policy_opt) or None, reference_gpu=a.reference_gpu,
              placement_effects=a.placement_effects)
    kind = _kernel_kind(a)
    if kind is not None:
        prewarm(kind)  # overlaps loading the kernel with reading the trace
    workload, endless = _load_workload(a)
    if a.failures:
        from .cluster import Cluster
        from .cluster_events import ClusterEvents

        if endless:
            raise ConfigError("--failures needs a finite workload (--trace, or --num-jobs with --workload blox)")
        c = Cluster.parse(a.cluster)
        span = float(workload.submit_s.max() + workload.duration_s.sum() / max(c.total_gpus, 1) * 4 + 86400)
        kw["cluster_events"] = ClusterEvents.random_failures(c, a.failures[0], a.failures[1], span,
                                                             seed=0 if a.seed is None else a.seed)
    if endless:
        track = a.track if a.track else (None if a.num_jobs else BLOX_DEFAULT_TRACK)
        res = simulate_blox_workload(a.load, seed=1 if a.seed is None else a.seed, track=track, num_jobs=a.num_jobs, **kw)
        label = f"blox paper workload, load {a.load:g} jobs/h"
    else:
        res = simulate(workload, track=a.track, **kw)
        label = workload.name
    if a.out:
        res.write(a.out, blox_json=a.blox_json, blox_prefix=a.blox_prefix, blox_load=a.load if endless else None)
    if a.json:
        print(json.dumps(res.summary, indent=2, sort_keys=True))
    else:
        print(format_summary(res, label))
        if a.out:
            print(f"wrote {Path(a.out) / 'jobs.parquet'} and summary.json")
    return 0


def format_summary(res, label: str) -> str:
    s, c = res.summary, res.config
    mode = "blox-compat" if c["blox_compat"] else c["time_model"]
    lines = [
        f"fastblox: {label} on {c['cluster']} ({s['total_gpus']} GPUs)",
        f"  scheduler  {c['scheduler']} | placement {c['placement']} | admission {c['admission']} | {mode}"
        + (f" (R = {c['round_s']:g} s)" if mode != "events" else ""),
        f"  jobs       {s['num_jobs']} simulated, {s['num_finished']} finished, {s['num_tracked']} tracked",
        f"  JCT        mean {s['avg_jct_s']:,.1f} s | p50 {s['p50_jct_s']:,.1f} s | p99 {s['p99_jct_s']:,.1f} s",
        f"  queueing   mean {s['avg_queue_s']:,.1f} s" + (f" | responsiveness {s['avg_responsiveness_s']:,.3f} s" if "avg_responsiveness_s" in s else ""),
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
    if "num_rounds" in s:
        lines.append(f"  rounds     {s['num_rounds']}")
    if s.get("num_dropped_rows"):
        lines.append(f"  dropped    {s['num_dropped_rows']} trace rows: " + ", ".join(f"{k}={v}" for k, v in s["dropped_rows"].items()))
    if s.get("num_resorted_rows"):
        lines.append(f"  resorted   {s['num_resorted_rows']} trace rows were out of submit order (kept, sorted)")
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
    print("blox-compat policies: " + ", ".join(f"{k} ({v[0]})" for k, v in parts.BLOX_POLICIES.items()))
    print("placements: " + ", ".join(parts.PLACEMENTS.names()))
    print("admission: accept-all, load:THETA")
    print("time models: " + ", ".join(parts.TIME_MODELS.names()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fastblox", description="Fast trace replay for deep-learning cluster schedulers.")
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
    add_experiment_commands(sub)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if not getattr(a, "func", None):
        ap.print_help()
        return 2
    from . import engine

    engine.COMPILE_NOTICE = lambda msg: print(f"fastblox: {msg}", file=sys.stderr, flush=True)
    try:
        return int(a.func(a) or 0)
    except FastbloxError as e:
        print(f"fastblox: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
