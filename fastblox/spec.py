"""The run specification: every option of a run, declared once.

:class:`RunSpec` is a frozen dataclass; each field's metadata (:func:`option`) holds the option's
help, the engines that accept it and how its command-line flag reads. Everything else is
derived from it:

* ``fastblox run``'s flags (:func:`add_cli_options`, :meth:`RunSpec.from_cli`);
* the keywords of :func:`fastblox.simulate` and :func:`fastblox.prepare_native`
  (:meth:`RunSpec.from_kwargs`; their signatures are generated from the fields);
* the keys of a sweep's ``[base]``/``[grid]`` tables and the parameter columns of its results
  (``fastblox.sweep.config``);
* the run's configuration in ``summary.json`` (:meth:`RunSpec.as_dict`).

A value is checked the same way wherever it comes from (a flag's text is first read as the
field's type): a bad one raises :class:`OptionError`, a :class:`ConfigError` that names the
option (``--restart-s: ...``; a sweep re-labels it with its own key). :meth:`RunSpec.resolved`
fills in the defaults that depend on other options (the policy's time model, Blox's placement
in compat mode, ...) and makes the checks between options, once for every front end.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from . import parts
from .errors import ConfigError

#: Blox's tracked window on its endless generated stream (jobs 3000..4000).
BLOX_DEFAULT_TRACK = (3000, 4000)
DEFAULT_ROUND_S = 300.0
WORKLOAD_KINDS = ("blox", "gavel", "sample", "trace")
#: Seeds of the generators when none is given (Blox's generator: 1, as Blox).
DEFAULT_SEED = {"blox": 1, "gavel": 0, "sample": 0, "trace": 0}
DEFAULT_LOAD = {"blox": 6.0}
#: the placement of a run that names none
DEFAULT_PLACEMENT = "first-fit"
DEFAULT_NUM_JOBS = {"gavel": 2000}
#: the most jobs a generated workload may have (a million jobs take ~200 MB of run state)
MAX_JOBS = 50_000_000
#: the shortest round: shorter ones never end on a real trace
MIN_ROUND_S = 1e-3
#: the lowest arrival rate of a generator (one job in ~114 years): below it times lose their precision
MIN_LOAD = 1e-6
#: the lowest --target-load (stretching a trace's arrivals a thousandfold keeps its times precise)
MIN_TARGET_LOAD = 1e-3
#: the policy name of dynamic selection (sweeps; the API has fastblox.simulate_dynamic)
DYNAMIC = "dynamic"
#: The peer simulators ``--compat`` reproduces (each an engine of its own; an option says which
#: engines accept a value other than its default).
COMPAT_MODES = ("blox", "tiresias", "gavel", "pollux", "synergy", "sia")
NATIVE = frozenset({"native"})
BOTH = frozenset({"native", "blox"})
#: the options ``--compat tiresias`` accepts (besides where the jobs come from)
WITH_TIRESIAS = frozenset({"native", "blox", "tiresias"})
#: the options ``--compat gavel`` accepts too (besides where the jobs come from)
WITH_PEERS = frozenset({"native", "blox", "tiresias", "gavel"})
#: the options ``--compat pollux``, ``--compat synergy`` and ``--compat sia`` accept too (besides where the jobs
#: come from, and --round-s); ``elastic``: ``--policy pollux`` without --compat (fastblox.mixed: elastic and rigid jobs)
ALL_ENGINES = WITH_PEERS | {"pollux", "synergy", "sia", "elastic"}
#: the policies of the elastic engine (``fastblox.mixed``), run when no --compat is given: each name and the
#: Pollux simulator's policy it runs (its tiresias and optimus have their own names here: the native engine's
#: ``tiresias`` and ``optimus`` are other policies, which run an elastic row as a rigid job)
ELASTIC_RUNS = {"pollux": "pollux", "elastic-tiresias": "tiresias", "elastic-optimus": "optimus"}
ELASTIC_POLICIES = tuple(ELASTIC_RUNS)
#: the cluster when --cluster is not given (``--compat pollux``, ``synergy`` and ``sia``: their simulators')
DEFAULT_CLUSTER = "32x4"
#: the Pollux simulator's cluster (``--min-nodes 16 --num-gpus 4``): ``--compat pollux``'s when --cluster is not given
POLLUX_CLUSTER = "16x4"
#: Synergy's default cluster (configs/default_cluster.ini: 16 servers of 8 GPUs): ``--compat synergy``'s
SYNERGY_CLUSTER = "16x8"
#: Old names still accepted by the API and sweeps (with a DeprecationWarning), mapped to the option.
ALIASES = {"scheduler": "policy", "series": "record_series"}
#: Old boolean options kept as aliases of a value of an option (no warning: still documented).
VALUE_ALIASES = {"blox_compat": ("compat", "blox")}


class OptionError(ConfigError):
    """A bad value of one run option; ``str()`` names it as a flag (``--restart-s: ...``)."""

    def __init__(self, name: str, reason: str):
        self.option, self.reason = name, reason
        super().__init__(f"{flag(name)}: {reason}")


def flag(name: str) -> str:
    """The CLI flag of run option ``name`` (its ``cli`` flag when it has its own, e.g. ``--policy-opt``)."""
    f = {f.name: f for f in dataclasses.fields(RunSpec)}.get(name) if "RunSpec" in globals() else None
    own = f.metadata.get("cli", {}).get("flag") if f is not None else None
    return own or "--" + name.replace("_", "-")


#: The engines a run option may reach, each with how a run picks it (the columns of :func:`engines_table`).
ENGINES = {"native": "no --compat (the native engine)", "elastic": "no --compat, --policy pollux or elastic-*",
           **{m: f"--compat {m}" for m in COMPAT_MODES}}


def engines_table() -> str:
    """Which engines accept which run option (a value other than its default), as a markdown table
    read off the options' declarations; ``fastblox parts`` prints it, docs/running.md holds it.
    Where the jobs come from (--workload, --trace, ...) is not in it: each engine reads its own."""
    cols = list(ENGINES)
    rows = ["| option | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for f in dataclasses.fields(RunSpec):
        if f.metadata["api"]:
            rows.append(f"| `{flag(f.name)}` | " + " | ".join("x" if e in f.metadata["engines"] else ""
                                                             for e in cols) + " |")
    legend = "; ".join(f"{k}: {v}" for k, v in ENGINES.items())
    return "\n".join(rows) + f"\n\nx: the engine takes a value other than the option's default ({legend}); " \
        "without an x, such a value is refused with a one-line error naming the flag."


# ----------------------------------------------------------------------------- value checks
# Each takes (value, option name) and returns the value in its canonical type or raises OptionError.
def _num(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise OptionError(name, f"expected a number, got {v!r}")
    return float(v)


def positive(v, name):
    v = _num(v, name)
    if not v > 0:
        raise OptionError(name, f"expected a positive number, got {v!r}")
    return v


def nonneg(v, name):
    v = _num(v, name)
    if not v >= 0:
        raise OptionError(name, f"expected zero or a positive number, got {v!r}")
    return v


def factor(v, name):
    v = positive(v, name)
    if v > 1:
        raise OptionError(name, f"a speed multiplier in (0, 1], got {v:g}")
    return v


def positive_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int):
        raise OptionError(name, f"expected an integer, got {v!r}")
    if v <= 0:
        raise OptionError(name, f"expected a positive integer, got {v!r}")
    return int(v)


def at_least(lo: float, what: str):
    """A positive number no smaller than ``lo`` (below it a run never ends or loses its precision)."""

    def check(v, name):
        v = positive(v, name)
        if v < lo:
            raise OptionError(name, f"{v!r} is below the smallest supported value, {lo:g} {what}")
        return v

    return check


def job_count(v, name):
    v = positive_int(v, name)
    if v > MAX_JOBS:
        raise OptionError(name, f"{v:,} jobs is more than the {MAX_JOBS:,} a run supports")
    return v


def seed_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int):
        raise OptionError(name, f"expected an integer, got {v!r}")
    if not 0 <= v < 2**63:
        raise OptionError(name, f"expected an integer in [0, 2**63), got {v!r}")
    return int(v)


def text(v, name):
    if not isinstance(v, str):
        raise OptionError(name, f"expected a string, got {v!r}")
    return v


def lower_text(v, name):
    return text(v, name).strip().lower()


def boolean(v, name):
    if not isinstance(v, bool):
        raise OptionError(name, f"expected true or false, got {v!r}")
    return v


def choice(*allowed):
    def check(v, name):
        v = lower_text(v, name)
        if v not in allowed:
            raise OptionError(name, f"expected one of {', '.join(allowed)}, got {v!r}")
        return v

    return check


def track(v, name):
    """``(first, last)`` job ids, inclusive: a pair of integers or ``"FIRST:LAST"``."""
    if isinstance(v, str):
        try:
            a, b = v.split(":")
            v = (int(a), int(b))
        except ValueError:
            raise OptionError(name, f"expected FIRST:LAST job ids like 3000:4000, got {v!r}") from None
    if not (isinstance(v, (list, tuple)) and len(v) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        raise OptionError(name, f"expected FIRST:LAST job ids like 3000:4000, got {v!r}")
    a, b = int(v[0]), int(v[1])
    if a < 0:
        raise OptionError(name, f"job ids are not negative, got {a}:{b}")
    if a > b:
        raise OptionError(name, f"the first id {a} is after the last id {b}")
    return a, b


def failures(v, name):
    """``(mtbf_s, repair_s)``: ``"MTBF_H:REPAIR_H"`` in hours, or a pair of seconds."""
    if isinstance(v, str):
        try:
            a, b = v.split(":")
            v = (float(a) * 3600.0, float(b) * 3600.0)
        except ValueError:
            raise OptionError(name, f"expected MTBF_H:REPAIR_H in hours like 500:2, got {v!r}") from None
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        raise OptionError(name, f"expected MTBF_H:REPAIR_H in hours like 500:2, got {v!r}")
    mtbf, rep = _num(v[0], name), _num(v[1], name)
    if not (mtbf > 0 and rep >= 0):
        raise OptionError(name, f"the mean time between failures must be positive and the repair time >= 0, got {v!r}")
    return mtbf, rep


def policy_opts(v, name):
    """Policy parameters as sorted ``(name, value)`` pairs: a dict, pairs, or ``"a=1,b=2"``."""
    if isinstance(v, str):
        v = [kv.split("=", 1) for kv in v.split(",") if kv.strip()]
        if any(len(kv) != 2 for kv in v):
            raise OptionError(name, "expected NAME=VALUE pairs like f=0.5")
    if isinstance(v, dict):
        v = list(v.items())
    if not isinstance(v, (list, tuple)) or not all(isinstance(kv, (list, tuple)) and len(kv) == 2 for kv in v):
        raise OptionError(name, f"expected a table of NAME = VALUE like {{ f = 0.5 }}, got {v!r}")
    out = {}
    for k, x in v:
        k = str(k).strip()
        if not k:
            raise OptionError(name, "an option name is empty")
        out[k] = tuple(x) if isinstance(x, list) else x
    return tuple(sorted(out.items()))


def policy_name(v, name):
    if callable(v) or isinstance(v, parts.Policy):
        return v  # a user policy given to the API
    from .compat_gavel import POLICIES as GAVEL_POLICIES
    from .compat_pollux import POLICIES as POLLUX_POLICIES
    from .compat_synergy import POLICIES as SYNERGY_POLICIES
    from .compat_sia import POLICIES as SIA_POLICIES
    from .compat_tiresias import NATIVE_EQUIVALENTS, SCHEDULES

    v = lower_text(v, name)
    known = (parts.POLICIES, parts.BLOX_POLICIES, SCHEDULES, NATIVE_EQUIVALENTS, GAVEL_POLICIES, POLLUX_POLICIES,
             SYNERGY_POLICIES, SIA_POLICIES, ELASTIC_POLICIES)
    if not any(v in k for k in known) and v != DYNAMIC:
        others = [("elastic and rigid jobs, without --compat", ELASTIC_POLICIES),
                  ("Gavel's (--compat gavel)", GAVEL_POLICIES),
                  ("Tiresias' (--compat tiresias)", [*SCHEDULES, *NATIVE_EQUIVALENTS]),
                  ("the Pollux simulator's (--compat pollux)", POLLUX_POLICIES),
                  ("Synergy's (--compat synergy)", SYNERGY_POLICIES), ("Sia's (--compat sia)", SIA_POLICIES)]
        every = [*parts.POLICIES.names(), *(n for _, names in others for n in names)]
        near = difflib.get_close_matches(v, every, n=1)
        raise OptionError(name, f"unknown policy {v!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                          + f"; known: {', '.join(parts.POLICIES.names())}"
                          + "".join(f"; {what}: {', '.join(names)}" for what, names in others))
    return v


def placement(v, name):
    v = lower_text(v, name)
    if v not in parts.PLACEMENTS:
        raise OptionError(name, _unknown("placement", v, parts.PLACEMENTS.names()))
    return v


def time_model(v, name):
    v = lower_text(v, name)
    if v not in parts.TIME_MODELS:
        raise OptionError(name, _unknown("time model", v, parts.TIME_MODELS.names()))
    return v


def admission(v, name):
    if isinstance(v, bool) or not isinstance(v, (str, int, float, parts.Admission)):
        raise OptionError(name, f"expected 'accept-all' or 'load:THETA', got {v!r}")
    try:
        return parts.Admission.parse(v).name
    except ConfigError as e:
        raise OptionError(name, str(e).removeprefix("--admission: ")) from None


def cluster(v, name):
    from .cluster import Cluster

    from .compat_gavel import cluster_from_gavel, is_gavel_cluster

    if isinstance(v, Cluster):
        return v
    v = text(v, name)
    try:
        if is_gavel_cluster(v):  # Gavel's V:P:K counts, one GPU per server
            v = cluster_from_gavel(v)
        Cluster.parse(v)
    except ConfigError as e:
        raise OptionError(name, str(e).removeprefix("--cluster: ")) from None
    return v


def anything(v, name):
    return v


def _unknown(kind: str, v: str, names) -> str:
    near = difflib.get_close_matches(v, list(names), n=1)
    return f"unknown {kind} {v!r}" + (f" (did you mean {near[0]!r}?)" if near else "") + f"; known: {', '.join(names)}"


# ----------------------------------------------------------------------------- the declaration
def option(default, check: Callable, help: str, *, engines=BOTH, api: bool = True, group: str = "scheduler",
           metavar: str | None = None, cli: dict | None = None, column: str = "str"):
    """A field of :class:`RunSpec`: its default, value check, help, the engines that accept a
    non-default value, whether it is a keyword of ``simulate`` (``api``; the workload source is
    not: it builds the workload), its flag's group and argparse settings (``cli``), and the dtype
    of its column in sweep results."""
    meta = dict(check=check, help=help, engines=engines, api=api, group=group, metavar=metavar, cli=cli or {},
                column=column)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunSpec:
    """One run: where the jobs come from, the cluster, the scheduler's parts and the realism
    options. ``None`` means "the default for the rest of the spec" (see :meth:`resolved`)."""

    # ---- the workload source (the CLI and sweeps build the workload; the API is given one)
    workload: str | None = option(None, choice(*WORKLOAD_KINDS), "a built-in workload: 'blox' (Blox's paper "
                                  "generator, the default), 'gavel' (Gavel-style Poisson multi-GPU generator), 'sample' "
                                  "(the bundled Philly sample); 'trace' is implied by --trace", api=False, group="workload")
    trace: str | None = option(None, text, "a trace file (normalized CSV, Parquet, or any format of `fastblox trace`)",
                               api=False, group="workload", metavar="PATH")
    format: str | None = option(None, lower_text, "trace format when it cannot be detected", api=False,
                                group="workload")
    on_bad_rows: str = option("error", choice("error", "drop"), "unusable trace rows: stop with an error (error, the "
                              "default) or drop and count them (drop; jobs larger than the cluster's largest GPU type "
                              "included)", api=False, group="workload")
    load: float | None = option(None, at_least(MIN_LOAD, "jobs per hour"), "arrival rate in jobs per hour of a generated workload (blox: 6; "
                                "gavel: 9, one job per 400 s)", api=False, group="workload", column="float")
    num_jobs: int | None = option(None, job_count, "number of jobs of a generated workload (blox: an endless "
                                  "stream ended by --track; gavel: 2000; sample: all)", api=False, group="workload",
                                  column="int")
    target_load: float | None = option(None, at_least(MIN_TARGET_LOAD, "GPU-seconds asked for per GPU-second"),
                                        "stretch or compress the arrival times of a trace or the sample so that its "
                                        "offered load on --cluster is X (GPU-seconds asked for / GPU-seconds between "
                                        "the first and last arrival; 1 = just enough GPUs on average); default: the "
                                        "times as recorded", api=False, group="workload", column="float")
    seed: int | None = option(None, seed_int, "seed of the generator and of --failures (blox: 1 as in Blox; others: 0)",
                              api=False, group="workload", column="int")
    # ---- the scheduler
    cluster: str | None = option(None, cluster, "[type:]NODESxGPUS[,...][@NODES_PER_RACK] or a cluster CSV, e.g. 32x4 or "
                                 "v100:12x4,k80:12x4; also Gavel's V100:P100:K80 counts like 36:0:0 (one GPU per node) "
                                 "(default 32x4; --compat pollux: 16x4; --compat sia: aws:6x4,dgx-ext:2x8,rtx:3x8; "
                                 "--compat synergy: 16x8, servers x GPUs, their CPUs and memory: --policy-opt cpus=, mem_gb=)",
                                 engines=ALL_ENGINES)
    policy: Any = option("fifo", policy_name, "scheduling policy (`fastblox parts` lists them with their meaning)",
                         engines=ALL_ENGINES)
    placement: str | None = option(None, placement, "placement: " + ", ".join(parts.PLACEMENTS.names())
                                   + " (default first-fit; blox with --blox-compat; elastic-tiresias and elastic-optimus: "
                                   "the Pollux simulator's, most free GPUs first)", engines=BOTH | {"elastic"})
    admission: str = option("accept-all", admission, "accept-all or load:THETA (Blox's load-based accept, e.g. load:1.2)",
                            engines=BOTH | {"pollux", "synergy", "sia", "elastic"})
    time_model: str | None = option(None, time_model, "events (every arrival, completion and event) or rounds of "
                                    "--round-s (default: the policy's, else events; rounds with --blox-compat)")
    round_s: float | None = option(None, at_least(MIN_ROUND_S, "seconds"), "round length in seconds (default 300; Gavel's policies 360; "
                                   "--compat pollux and sia, and --policy pollux: their scheduling interval, 60)", column="float",
                                   engines=BOTH | {"gavel", "pollux", "synergy", "sia", "elastic"})
    restart_s: float | None = option(None, nonneg, "seconds lost at every (re)launch (default 0; the elastic engine, "
                                     "--policy pollux and elastic-*: Pollux's 30)", engines=NATIVE | {"elastic"},
                                     column="float")
    preempt: bool | None = option(None, boolean, "let waiting jobs suspend lower-priority running ones (default: the "
                                  "policy's; FIFO and SJF never do)", column="bool",
                                  cli=dict(negate="--no-preempt", negate_help="never suspend running jobs"))
    policy_opts: tuple = option((), policy_opts, "a policy parameter NAME=VALUE (repeatable), e.g. f=0.5; "
                                "`fastblox parts` lists each policy's parameters with their defaults", engines=NATIVE | {"tiresias", "gavel", "synergy"},
                                metavar="NAME=VALUE",
                                cli=dict(flag="--policy-opt", action="append"))
    track: tuple | None = option(None, track, "job ids A..B (inclusive) count in the averages and end the run "
                                 "(blox's endless stream: 3000:4000)", metavar="A:B", engines=ALL_ENGINES)
    compat: str | None = option(None, choice(*COMPAT_MODES), "reproduce a peer simulator exactly: blox (Blox's "
                                "simulator: its policies, rounds and placement; also --blox-compat) or tiresias "
                                "(Tiresias' run_sim.py: its schedules by their names, dlas-gpu... in whole seconds at its "
                                "decision points; `fastblox parts` lists them; docs/fidelity.md) or gavel (Gavel's Scheduler.simulate: its "
                                "policies fifo, fifo_perf, max_min_fairness[_perf], finish_time_fairness[_perf] on a "
                                "Gavel trace, in its integer-step rounds) or pollux (the Pollux simulator's elastic jobs and its "
                                "policies tiresias, optimus and pollux; a Pollux workload CSV), synergy (Synergy's simulator: "
                                "servers with GPUs, CPUs and memory, its orderings fifo, srtf, las, ftf with +fair "
                                "(GPU-proportional), no suffix (Synergy-Greedy) or +tune (Synergy-Tune); a Synergy trace) "
                                "or sia (the Sia simulator's policy sia on its heterogeneous cluster; a Sia workload CSV, as "
                                "Pollux's)", engines=ALL_ENGINES,
                                metavar="SIMULATOR",
                                cli=dict(const_aliases={"--blox-compat": "blox"}))
    sia_profiles: str | None = option(None, text, "--compat sia: the Sia artifact's sia-simulator/traces folder (its "
                                      "per-GPU-type throughput profiles; not bundled: the artifact has no licence); "
                                      "default: the Pollux artifact's profiles (bundled) for every GPU type",
                                      engines=frozenset({"sia"}), metavar="DIR")
    record_series: bool = option(False, boolean, "record a time series per scheduling step (free GPUs, queue, "
                                 "demand) into DIR/series.parquet", group="output", column="bool",
                                 cli=dict(aliases=("--series",)))
    # ---- cluster realism (native engine)
    throughput: Any = option(None, anything, "throughput table: 'gavel' (built-in), a CSV/JSON file, or 'none' "
                             "(default: gavel on a cluster of several GPU types, else none)", engines=NATIVE,
                             group="realism", metavar="TABLE")
    reference_gpu: str | None = option(None, lower_text, "the GPU type trace durations refer to (default v100 when "
                                       "the table has it)", engines=NATIVE, group="realism", metavar="TYPE")
    checkpoint_s: float = option(0.0, nonneg, "checkpoint interval in productive seconds: a stopped job loses its "
                                 "progress since the last one (0: loses nothing)", engines=NATIVE, group="realism",
                                 column="float")
    multi_node_factor: float = option(1.0, factor, "speed multiplier of a gang spread over several nodes, where the "
                                      "table has none", engines=NATIVE, group="realism", column="float")
    rack_factor: float = option(1.0, factor, "further speed multiplier of a gang spread over several racks",
                                engines=NATIVE, group="realism", column="float")
    placement_effects: bool = option(True, boolean, "run gangs spread over nodes or racks at full speed, as Gavel's and "
                                     "Tiresias' simulators do (default: slowed by --multi-node-factor, --rack-factor "
                                     "and the throughput table)", engines=NATIVE, group="realism",
                                     column="bool", cli=dict(negate="--no-placement-effects", only_negate=True))
    cluster_events: Any = option(None, anything, "node events over time: CSV time_s,event,node with events "
                                 "fail/remove/recover/add", engines=NATIVE, group="realism", metavar="CSV")
    failures: tuple | None = option(None, failures, "random independent node failures: mean hours between failures "
                                    "per node, hours to repair (seeded by --seed)", engines=NATIVE, group="realism",
                                    metavar="MTBF_H:REPAIR_H")

    # ---- run limits: a run a limit ends early is marked incomplete (summary "complete": false,
    # "stopped_by", "stop_reason"; `fastblox run` exits 3)
    max_sim_time: float | None = option(None, positive, "stop after this much simulated time, in seconds (no step "
                                        "after it is taken)", group="limits", metavar="SECONDS", column="float")
    max_jobs: int | None = option(None, positive_int, "stop at the N-th arrival; Blox's endless stream (--workload blox "
                                  "without --num-jobs): generate at most N jobs (default: 16 x (the last tracked id + "
                                  "1), 64,016 for 3000:4000)", group="limits", metavar="N", column="int")
    max_wall: float | None = option(None, positive, "stop after this much wall-clock time, in seconds (the result "
                                    "then depends on the machine)", group="limits", metavar="SECONDS", column="float")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.default is not None:  # None: the default, for every option
                object.__setattr__(self, f.name, f.default)
            elif v is not None and v != f.default:
                object.__setattr__(self, f.name, f.metadata["check"](v, f.name))

    # ---- building
    @classmethod
    def from_kwargs(cls, where: str = "simulate", **kw) -> "RunSpec":
        """A spec from keywords (the API): unknown names raise naming the closest option."""
        return cls(**canonical_keys(kw, where))

    def replace(self, **kw) -> "RunSpec":
        return dataclasses.replace(self, **canonical_keys(kw, "RunSpec.replace"))

    def api_kwargs(self) -> dict:
        """The keywords of ``simulate`` this spec sets (the non-default run options)."""
        return {f.name: getattr(self, f.name) for f in api_fields() if getattr(self, f.name) != f.default}

    # ---- resolving
    def resolved(self, defaults: "parts.Policy | None" = None, source: bool = True) -> "RunSpec":
        """Defaults filled in and the checks between options made. ``defaults``: a policy whose
        default time model and round apply instead of this spec's policy's (dynamic selection).
        ``source=False`` (the API, given a workload) leaves the workload source alone."""
        return _resolve(self, defaults, source)

    def limits(self):
        """The run limits (``fastblox.slices.RunLimits``)."""
        from .slices import RunLimits

        return RunLimits(self.max_sim_time, self.max_jobs, self.max_wall)

    def as_dict(self) -> dict:
        """JSON-able values (the run's configuration in ``summary.json`` and sweep parameters)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "policy":
                v = v if isinstance(v, str) else parts.resolve_policy(v).name
            elif f.name == "policy_opts":
                v = {k: (list(x) if isinstance(x, tuple) else x) for k, x in v}
            elif f.name == "cluster":
                v = str(v)
            elif f.name in ("throughput", "cluster_events") and v is not None and not isinstance(v, str):
                v = getattr(v, "source", None) or getattr(v, "name", None) or type(v).__name__
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out


def api_fields() -> list:
    return [f for f in dataclasses.fields(RunSpec) if f.metadata["api"]]


def value_alias(k: str, v):
    """``(option, value)`` of an old boolean option of :data:`VALUE_ALIASES` (``blox_compat=True``
    is ``compat="blox"``; false is the option's default)."""
    name, value = VALUE_ALIASES[k]
    return name, (value if boolean(v, k) else None)


def canonical_keys(kw: dict, where: str) -> dict:
    """Keywords with deprecated aliases renamed (warned) and unknown names refused."""
    names = [f.name for f in dataclasses.fields(RunSpec)]
    out = {}
    for k, v in kw.items():
        if k in VALUE_ALIASES:
            k, v = value_alias(k, v)
        if k in ALIASES:
            warnings.warn(f"{where}: {k!r} is now called {ALIASES[k]!r}", DeprecationWarning, stacklevel=4)
            k = ALIASES[k]
        if k not in names:
            near = difflib.get_close_matches(k, names, n=1)
            raise ConfigError(f"{where}: unknown option {k!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                              + "; options: " + ", ".join(names))
        out[k] = v
    return out


def _resolve(s: RunSpec, defaults, source: bool) -> RunSpec:
    from .cluster import Cluster

    c = Cluster.parse(s.cluster or DEFAULT_CLUSTER)
    upd = _resolve_source(s) if source else {}
    endless = source and upd["workload"] == "blox" and upd["num_jobs"] is None
    if s.policy == DYNAMIC:
        upd.update(_resolve_dynamic(s))
    elif s.compat == "blox":
        upd.update(_resolve_compat(s, c))
    elif s.compat == "tiresias":
        upd.update(_resolve_tiresias(s, c))
    elif s.compat == "gavel":
        upd.update(_resolve_gavel(s, c))
    elif s.compat == "pollux":
        upd.update(_resolve_pollux(s, c, source))
    elif s.compat == "synergy":
        upd.update(_resolve_synergy(s, source))
    elif s.compat == "sia":
        upd.update(_resolve_sia(s, source))
    elif s.compat is None and s.policy in ELASTIC_POLICIES:
        upd.update(_resolve_elastic(s, c))
    else:
        upd.update(_resolve_native(s, c, defaults))
    upd.setdefault("cluster", s.cluster or DEFAULT_CLUSTER)
    if endless and s.compat is None and s.policy in ELASTIC_POLICIES:
        raise OptionError("policy", f"--policy {s.policy} replays a finite workload: --trace (elastic and rigid jobs: "
                          "docs/elastic.md), or --num-jobs N with --workload blox")
    if endless and s.failures is not None:
        raise OptionError("failures", "needs a finite workload: --trace, or --num-jobs N with --workload blox")
    if s.failures is not None and s.cluster_events is not None:
        raise OptionError("failures", "give either --cluster-events or --failures, not both")
    return dataclasses.replace(s, **upd)


def _resolve_source(s: RunSpec) -> dict:
    kind = s.workload or ("trace" if s.trace is not None else "blox")
    _check_source(s, kind)
    upd: dict = {"workload": kind}
    if kind != "trace":
        upd["load"] = s.load if s.load is not None else DEFAULT_LOAD.get(kind)
        upd["num_jobs"] = s.num_jobs if s.num_jobs is not None else DEFAULT_NUM_JOBS.get(kind)
    upd["seed"] = DEFAULT_SEED[kind] if s.seed is None else s.seed
    endless = kind == "blox" and upd["num_jobs"] is None
    upd["track"] = BLOX_DEFAULT_TRACK if (s.track is None and endless) else s.track
    return upd


def _check_source(s: RunSpec, kind: str) -> None:
    if s.trace is not None and s.workload not in (None, "trace"):
        raise OptionError("trace", f"give either --trace or --workload {s.workload}, not both")
    if kind == "trace" and s.trace is None:
        raise OptionError("workload", "workload 'trace' needs --trace PATH")
    if kind == "trace":
        for k in ("load", "num_jobs"):
            if getattr(s, k) is not None:
                raise OptionError(k, "applies to generated workloads only, not to a trace")
    else:
        if s.format is not None:
            raise OptionError("format", f"applies to --trace only, not to --workload {kind}")
        if kind == "sample" and s.load is not None:
            raise OptionError("load", "applies to the generated workloads (blox, gavel) only, not to the sample")
        if kind in ("blox", "gavel") and s.target_load is not None:
            raise OptionError("target_load", f"rescales the arrivals of a trace or the sample; a generated workload "
                              f"({kind}) sets its arrival rate with --load JOBS_PER_HOUR")


def _resolve_dynamic(s: RunSpec) -> dict:
    if s.compat is not None:
        raise OptionError("policy", "policy 'dynamic' pauses the run to look ahead, which only the native engine can "
                          f"do; drop --compat {s.compat}")
    if s.policy_opts:
        raise OptionError("policy_opts", "policy parameters need a named policy (not 'dynamic')")
    return dict(placement=s.placement or DEFAULT_PLACEMENT, time_model=s.time_model or "events",
                round_s=s.round_s or DEFAULT_ROUND_S, restart_s=s.restart_s or 0.0)


def _resolve_compat(s: RunSpec, c) -> dict:
    pol = s.policy
    if not isinstance(pol, str) or pol not in parts.BLOX_POLICIES:
        what = f"Blox has no policy {pol!r}" if isinstance(pol, str) else "Blox cannot run a user policy"
        raise OptionError("policy", f"--blox-compat runs Blox's own policies only; {what}; Blox has: "
                          + ", ".join(parts.BLOX_POLICIES))
    if s.time_model not in (None, "rounds"):
        raise OptionError("time_model", "--blox-compat simulates Blox's fixed rounds; --time-model events is not "
                          "available with it")
    if s.preempt is False:
        raise OptionError("preempt", "--blox-compat always preempts, as Blox does; drop --no-preempt")
    for f in dataclasses.fields(RunSpec):
        if "blox" not in f.metadata["engines"] and getattr(s, f.name) != f.default:
            raise OptionError(f.name, f"--blox-compat replays Blox as it is (none of its missing costs or realism "
                              f"options); drop {flag(f.name)}")
    if len(c.gpu_types) > 1 or c.node_rack is not None:
        raise OptionError("cluster", "--blox-compat: Blox's clusters have one GPU type and no racks")
    pl = s.placement or "blox"
    if pl == "topology":
        raise OptionError("placement", "--blox-compat: use placement blox, first-fit or consolidated (Blox has no racks)")
    return dict(placement=pl, time_model="rounds", round_s=s.round_s or DEFAULT_ROUND_S, preempt=True)


def _resolve_tiresias(s: RunSpec, c) -> dict:
    from .compat_tiresias import NATIVE_EQUIVALENTS, SCHEDULES, parse_options

    pol = s.policy
    if not isinstance(pol, str) or (pol not in SCHEDULES and pol not in NATIVE_EQUIVALENTS):
        raise OptionError("policy", "--compat tiresias runs Tiresias' own schedules: "
                          + ", ".join([*SCHEDULES, *NATIVE_EQUIVALENTS])
                          + (f"; not {pol!r}" if isinstance(pol, str) else "; not a user policy"))
    if pol in NATIVE_EQUIVALENTS and s.policy_opts:
        raise OptionError("policy_opts", f"Tiresias' {pol!r} has no options")
    _peer_options_only(s, "tiresias", "Tiresias' simulator as it is (one pool of GPUs, whole seconds, no costs)")
    if len(c.gpu_types) > 1:
        raise OptionError("cluster", "--compat tiresias: Tiresias' clusters have one GPU type")
    if pol in SCHEDULES:
        try:
            parse_options(pol, dict(s.policy_opts))
        except ConfigError as e:
            raise OptionError("policy_opts", str(e)) from None
    return {}


def _peer_checks(s: RunSpec, mode: str, whose: str, policies, replays: str) -> None:
    """``--compat MODE``: the policy is one of the peer's ``policies`` (``whose`` names them) and
    no option it does not accept is set (it ``replays`` its simulator as it is)."""
    if not isinstance(s.policy, str) or s.policy not in policies:
        raise OptionError("policy", f"--compat {mode} runs {whose}: " + ", ".join(policies)
                          + (f"; not {s.policy!r}" if isinstance(s.policy, str) else "; not a user policy"))
    _peer_options_only(s, mode, replays)


def _peer_options_only(s: RunSpec, mode: str, replays: str, who: str | None = None) -> None:
    """Refuse, naming its flag, any option set that ``--compat MODE`` (``who``, default that) does not accept."""
    for f in dataclasses.fields(RunSpec):
        if f.metadata["api"] and mode not in f.metadata["engines"] and getattr(s, f.name) != f.default:
            raise OptionError(f.name, f"{who or '--compat ' + mode} replays {replays}; drop {flag(f.name)}")


def _resolve_pollux(s: RunSpec, c, source: bool) -> dict:
    from .cluster import Cluster
    from .compat_pollux import POLICIES, check_cluster

    if s.policy in ELASTIC_POLICIES and ELASTIC_RUNS[s.policy] != s.policy:
        raise OptionError("policy", f"{s.policy!r} is the elastic engine's name for the Pollux simulator's "
                          f"{ELASTIC_RUNS[s.policy]}: drop --compat, or run --compat pollux --policy {ELASTIC_RUNS[s.policy]}")
    _peer_checks(s, "pollux", "the Pollux simulator's policies", POLICIES,
                 "the Pollux simulator as it is (its cluster, intervals and restart cost)")
    if source and s.trace is None:
        raise OptionError("trace", "--compat pollux replays a Pollux workload CSV (name,time,application,"
                          "num_replicas,batch_size): give --trace PATH")
    cl = s.cluster or POLLUX_CLUSTER
    try:
        check_cluster(Cluster.parse(cl))
    except ConfigError as e:
        raise OptionError("cluster", str(e)) from None
    return dict(cluster=cl, round_s=s.round_s or 60.0)


def _resolve_synergy(s: RunSpec, source: bool) -> dict:
    from .cluster import Cluster
    from .compat_synergy import POLICIES, check_cluster, parse_options

    _peer_checks(s, "synergy", "Synergy's schedulers", POLICIES,
                 "Synergy's simulator as it is (its rounds, leases and GPU pick)")
    if source and s.trace is None:
        raise OptionError("trace", "--compat synergy replays a Synergy trace (job_id,model,arrival_s,iterations,gpus "
                          "per line, as its runner.py --record_trace writes) or any trace (each job's model drawn "
                          "from Synergy's zoo, seeded by --seed): give --trace PATH")
    cl = s.cluster or SYNERGY_CLUSTER
    try:
        check_cluster(Cluster.parse(cl), parse_options(dict(s.policy_opts)))
    except ConfigError as e:
        raise OptionError("cluster" if "servers" in str(e) else "policy_opts", str(e)) from None
    return dict(cluster=cl, round_s=s.round_s or 300.0)


def _resolve_sia(s: RunSpec, source: bool) -> dict:
    from .cluster import Cluster
    from .compat_sia import POLICIES, SIA_CLUSTER, cluster_types

    _peer_checks(s, "sia", "the Sia simulator's policy", POLICIES,
                 "the Sia simulator as it is (its cluster, intervals and restart costs)")
    if source and s.trace is None:
        raise OptionError("trace", "--compat sia replays a Sia workload CSV (name,time,application,num_replicas,"
                          "batch_size): give --trace PATH")
    cl = s.cluster or SIA_CLUSTER
    try:
        cluster_types(Cluster.parse(cl), s.sia_profiles is None)
    except ConfigError as e:
        raise OptionError("cluster", str(e)) from None
    return dict(cluster=cl, round_s=s.round_s or 60.0)


def default_throughput(throughput, c):
    """The throughput table of a run: ``throughput`` as given, else the built-in one (``gavel``) on
    a cluster of several GPU types (the native engine, and Pollux's rigid jobs), else none."""
    return "gavel" if throughput is None and len(c.gpu_types) > 1 else throughput


def _resolve_elastic(s: RunSpec, c) -> dict:
    """``--policy pollux`` without --compat: elastic and rigid jobs on any cluster of alike nodes
    (fastblox.mixed; the nodes' size is checked against the workload's elastic rows when it runs)."""
    from .elastic import RESTART_S
    from .mixed import POLLUX_PLACES, check_cluster

    _peer_options_only(s, "elastic", "the Pollux simulator's intervals on elastic and rigid jobs",
                       who=f"--policy {s.policy}")
    if s.policy == "pollux" and s.placement is not None:
        raise OptionError("placement", f"{POLLUX_PLACES} (elastic-tiresias and elastic-optimus take one)")
    try:
        check_cluster(c, False, s.policy)
    except ConfigError as e:
        raise OptionError("cluster", str(e).removeprefix("--cluster: ")) from None
    return dict(round_s=s.round_s or 60.0, restart_s=RESTART_S if s.restart_s is None else s.restart_s)


def _gavel_only() -> set:
    """Gavel's policy names that only ``--compat gavel`` runs (its ``fifo`` is also fastblox's)."""
    from .compat_gavel import POLICIES

    return {p for p in POLICIES if p not in parts.POLICIES}


def _resolve_gavel(s: RunSpec, c) -> dict:
    from .compat_gavel import POLICIES, parse_options, type_counts

    pol = s.policy
    _peer_checks(s, "gavel", "Gavel's own policies", POLICIES,
                 "Gavel's simulator as it is (GPU counts per type, its rounds, no costs)")
    try:
        counts = type_counts(c)
    except ConfigError as e:
        raise OptionError("cluster", str(e).removeprefix("--cluster: ")) from None
    try:
        parse_options(dict(s.policy_opts))
    except ConfigError as e:
        raise OptionError("policy_opts", str(e)) from None
    if pol == "finish_time_fairness" and not counts.get("v100"):
        raise OptionError("cluster", "Gavel's finish_time_fairness takes every type's throughput as the v100's: "
                          "the cluster needs V100s")
    return dict(round_s=s.round_s or 360.0)


def _resolve_native(s: RunSpec, c, defaults) -> dict:
    if isinstance(s.policy, str) and s.policy in _gavel_only():
        raise OptionError("policy", f"{s.policy!r} is one of Gavel's policies, run only with --compat gavel "
                          f"(native Gavel policies: gavel, gavel-fifo, gavel-las-agnostic, gavel-ftf, gavel-ftf-agnostic)")
    if isinstance(s.policy, str) and s.policy not in parts.POLICIES and s.policy not in parts.BLOX_POLICIES:
        raise OptionError("policy", f"{s.policy!r} is one of Tiresias' schedules, run only with --compat tiresias; "
                          f"native policies: {', '.join(parts.POLICIES.names())}")
    if isinstance(s.policy, str) and s.policy not in parts.POLICIES:
        raise OptionError("policy", f"{s.policy!r} is one of Blox's policies, run only with --blox-compat; "
                          f"native policies: {', '.join(parts.POLICIES.names())}")
    pol = parts.resolve_policy(s.policy)
    dflt = defaults or pol
    tm = s.time_model or dflt.default_time_model or "events"
    round_s = s.round_s or dflt.default_round_s or DEFAULT_ROUND_S
    preempt = pol.preemptive if s.preempt is None else s.preempt
    try:
        pol.resolve_options(dict(s.policy_opts))
    except ConfigError as e:
        raise OptionError("policy_opts", str(e).removeprefix("--policy-opt: ").removeprefix("--policy-opt ")) from None
    restart_s = 0.0 if s.restart_s is None else s.restart_s
    if (tm == "rounds" and preempt and pol.dynamic and pol.kind != parts.enums.KIND_PLAN and s.checkpoint_s > 0
            and s.checkpoint_s + restart_s >= round_s):
        raise OptionError("checkpoint_s", f"{s.checkpoint_s:g} with rounds of {round_s:g} s: a job that {pol.name} "
                          f"preempts every round never reaches a checkpoint (restart {restart_s:g} s + checkpoint > "
                          "round), so a contended run may never finish; use a checkpoint interval shorter than the "
                          "round minus the restart cost, or --no-preempt")
    if not s.placement_effects and (s.multi_node_factor != 1.0 or s.rack_factor != 1.0):
        raise OptionError("placement_effects", "--no-placement-effects turns off the multi-node and rack factors; "
                          "drop them")
    throughput = default_throughput(s.throughput, c)
    return dict(placement=s.placement or DEFAULT_PLACEMENT, time_model=tm, round_s=float(round_s), preempt=bool(preempt),
                throughput=throughput, restart_s=restart_s)


# ----------------------------------------------------------------------------- the command line
GROUP_TITLES = {"workload": "workload", "scheduler": "scheduler", "realism": "cluster realism (native engine)",
                "output": "output", "limits": "run limits (Ctrl-C stops any run within a second: exit code 130, "
                "nothing written)"}


def _cli_type(f) -> Callable:
    """argparse ``type``: the flag's text read as the field's type, then the field's check."""
    check = f.metadata["check"]
    kind = f.metadata["column"]

    def parse(s: str):
        v: Any = s
        try:
            if kind == "float":
                v = float(s)
            elif kind == "int":
                v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'a number' if kind == 'float' else 'an integer'}, got {s!r}") from None
        try:
            return check(v, f.name)
        except OptionError as e:
            raise argparse.ArgumentTypeError(e.reason) from None

    parse.__name__ = f.name
    return parse


def add_cli_options(p: argparse.ArgumentParser) -> None:
    """Add one flag per option of :class:`RunSpec` to ``p`` (``fastblox run``), grouped."""
    groups = {}
    for f in dataclasses.fields(RunSpec):
        m = f.metadata
        g = groups.get(m["group"]) or groups.setdefault(m["group"], p.add_argument_group(GROUP_TITLES[m["group"]]))
        cli = m["cli"]
        shown = not (f.default is None or f.default == () or isinstance(f.default, bool) or "default" in m["help"])
        help_ = m["help"] + (f" (default {f.default:g})" if shown and isinstance(f.default, float)
                             else f" (default {f.default})" if shown else "")
        names = [cli.get("flag", flag(f.name)), *cli.get("aliases", ())]
        if "negate" in cli:
            _add_bool(g, f, names, help_)
        elif m["column"] == "bool":
            g.add_argument(*names, dest=f.name, action="store_true", default=f.default, help=help_)
        elif cli.get("action") == "append":
            g.add_argument(*names, dest=f.name, action="append", default=None, metavar=m["metavar"],
                           type=_pair, help=help_)
        else:
            g.add_argument(*names, dest=f.name, default=None if f.default is None else f.default,
                           type=_cli_type(f), metavar=m["metavar"] or f.name.upper(), help=help_)
        for alias, value in cli.get("const_aliases", {}).items():
            g.add_argument(alias, dest=f.name, action="store_const", const=value, help=f"the same as {names[0]} {value}")


def _pair(s: str) -> tuple:
    k, eq, v = s.partition("=")
    if not eq or not k.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE like f=0.8, got {s!r}")
    return k.strip(), v.strip()


def _add_bool(g, f, names, help_) -> None:
    cli = f.metadata["cli"]
    if cli.get("only_negate"):
        g.add_argument(cli["negate"], dest=f.name, action="store_false", default=f.default, help=help_)
        return
    ex = g.add_mutually_exclusive_group()
    ex.add_argument(*names, dest=f.name, action="store_true", default=f.default, help=help_)
    ex.add_argument(cli["negate"], dest=f.name, action="store_false", help=cli.get("negate_help"))


def cli_spec(ns: argparse.Namespace) -> RunSpec:
    """The :class:`RunSpec` of parsed ``fastblox run`` flags (repeated --policy-opt collected)."""
    vals = {f.name: getattr(ns, f.name) for f in dataclasses.fields(RunSpec)}
    vals["policy_opts"] = tuple(vals["policy_opts"] or ())
    return RunSpec(**vals)
