"""Sweep configurations: a ``[base]`` table of run options, a ``[grid]`` of lists, seeds/repeats.

A config is read from TOML (:func:`load_config` with a path) or given as a dict of the same shape::

    seeds = [0, 1]            # optional: one point per seed (or ``repeats = N``: seeds base..base+N-1)

    [base]                    # any keyword of fastblox.simulate, plus the workload source
    workload = "gavel"        # "blox" (load, seed, num_jobs), "gavel" (num_jobs, seed), "sample" (num_jobs)
    num_jobs = 2000           # ... or trace = "path.csv" (+ format, on_bad_rows)
    cluster = "12x4"

    [grid]                    # the sweep is the cross product of these lists
    policy = ["fifo", "las"]  # ``policy`` is an alias of ``scheduler``
    restart_s = [0, 30]

Everything is validated up front by building fastblox's own parts (policy and placement
registries, ``Admission.parse``, ``Cluster.parse``); a bad value raises
:class:`fastblox.errors.ConfigError` naming the key. Each point gets a fixed set of parameters
(defaults filled in), an explicit ``seed``, and a stable id: the first 12 hex digits of the SHA-1
of the parameters' canonical JSON.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .. import parts
from ..cluster import Cluster
from ..errors import ConfigError

#: Keys of the workload source.
WORKLOAD_KEYS = ("workload", "trace", "format", "on_bad_rows", "load", "num_jobs", "seed")
#: Keys of the run (keywords of ``fastblox.simulate``).
RUN_KEYS = ("cluster", "scheduler", "placement", "admission", "time_model", "round_s", "restart_s", "preempt",
            "track", "blox_compat", "record_series")
#: Keys of dynamic policy selection (``policy = "dynamic"``, :mod:`fastblox.dynamic`); None otherwise.
DYNAMIC_KEYS = ("candidates", "period_s", "horizon_s", "lookahead")
#: Run options of cluster realism and policy parameters (keywords of ``fastblox.simulate``); None:
#: simulate's default. ``policy_opts`` is a table (``{ f = 0.5 }``) kept as ``"f=0.5"`` text.
REALISM_KEYS = ("checkpoint_s", "throughput", "reference_gpu", "multi_node_factor", "rack_factor",
                "placement_effects", "cluster_events", "policy_opts")
#: Every point has exactly these parameters, in this order (``point_id`` is added in front).
PARAM_KEYS = WORKLOAD_KEYS + RUN_KEYS + DYNAMIC_KEYS + REALISM_KEYS
#: Keys left out of a point's id while they are None, so that adding them kept every older id.
OPTIONAL_KEYS = DYNAMIC_KEYS + REALISM_KEYS
#: The grid key whose values are tables of keys set together (a zipped axis).
CASES_KEY = "cases"
DYNAMIC_POLICY = "dynamic"
ALIASES = {"policy": "scheduler"}
TOP_KEYS = ("base", "grid", "seeds", "repeats", "name", "description")
WORKLOAD_KINDS = ("blox", "gavel", "sample", "trace")
DEFAULT_SEED = {"blox": 1, "gavel": 0, "sample": 0, "trace": 0}
BLOX_DEFAULT_TRACK = (3000, 4000)

#: Polars dtype names of the parameter columns (fixed, so every point's table has one schema).
PARAM_TYPES = {
    "point_id": "str", "workload": "str", "trace": "str", "format": "str", "on_bad_rows": "str", "load": "float",
    "num_jobs": "int", "seed": "int", "cluster": "str", "scheduler": "str", "placement": "str", "admission": "str",
    "time_model": "str", "round_s": "float", "restart_s": "float", "preempt": "bool", "track": "str",
    "blox_compat": "bool", "record_series": "bool", "candidates": "str", "period_s": "float", "horizon_s": "float",
    "lookahead": "str", "checkpoint_s": "float", "throughput": "str", "reference_gpu": "str",
    "multi_node_factor": "float", "rack_factor": "float", "placement_effects": "bool", "cluster_events": "str",
    "policy_opts": "str",
}


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: ``params`` (flat, JSON-able, defaults filled in)."""

    id: str
    params: dict

    @property
    def workload_spec(self) -> dict:
        """What a worker needs to build (and cache) the workload; no arrays."""
        p = self.params
        kind = p["workload"]
        if kind == "trace":
            spec = {"kind": "trace", "path": p["trace"], "format": p["format"], "on_bad_rows": p["on_bad_rows"]}
            if p["on_bad_rows"] == "drop":
                spec["max_gpus"] = Cluster.parse(p["cluster"]).total_gpus
            return spec
        if kind == "blox":
            return {"kind": "blox", "load": p["load"], "num_jobs": p["num_jobs"], "seed": p["seed"]}
        if kind == "gavel" and p["load"] is not None:
            return {"kind": kind, "num_jobs": p["num_jobs"], "seed": p["seed"], "load": p["load"]}
        return {"kind": kind, "num_jobs": p["num_jobs"], "seed": p["seed"]}

    @property
    def run_kwargs(self) -> dict:
        """Keywords of ``fastblox.simulate`` for this point."""
        kw = {k: self.params[k] for k in RUN_KEYS}
        kw["track"] = _parse_track(kw["track"], "track") if kw["track"] is not None else None
        for k in REALISM_KEYS:
            if self.params.get(k) is not None:
                kw[k] = self.params[k]
        if "policy_opts" in kw:
            kw["policy_opts"] = _opts_dict(kw["policy_opts"])
        return kw

    @property
    def dynamic_kwargs(self) -> dict | None:
        """Keywords of ``fastblox.dynamic.simulate_dynamic`` (None unless ``policy = "dynamic"``)."""
        p = self.params
        if p["scheduler"] != DYNAMIC_POLICY:
            return None
        return {"candidates": p["candidates"].split(","), "period_s": p["period_s"], "horizon_s": p["horizon_s"],
                "lookahead": p["lookahead"]}


@dataclass
class SweepConfig:
    base: dict
    grid: dict
    seeds: list | None
    points: list
    source_path: Path | None = None
    source_text: str | None = None
    name: str | None = None
    raw: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.points)

    def to_toml(self) -> str:
        """The config as TOML text: the file it was read from, verbatim, else a rendering of the dict."""
        if self.source_text is not None:
            return self.source_text
        return dump_toml(self.raw)


# ----------------------------------------------------------------------------- helpers
def _err(key: str, msg: str) -> ConfigError:
    return ConfigError(f"sweep config: {key}: {msg}")


def _canon_key(k: str) -> str:
    return ALIASES.get(k, k)


def _parse_track(v, key: str):
    if isinstance(v, str):
        try:
            a, b = v.split(":")
            return int(a), int(b)
        except ValueError:
            raise _err(key, f"expected FIRST:LAST job ids like '3000:4000' or [3000, 4000], got {v!r}") from None
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return int(v[0]), int(v[1])
    raise _err(key, f"expected FIRST:LAST job ids like '3000:4000' or [3000, 4000], got {v!r}")


def _number(v, key: str, positive: bool = False, nonneg: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _err(key, f"expected a number, got {v!r}")
    if positive and not v > 0:
        raise _err(key, f"expected a positive number, got {v!r}")
    if nonneg and not v >= 0:
        raise _err(key, f"expected zero or a positive number, got {v!r}")
    return float(v)


def _int(v, key: str, positive: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(key, f"expected an integer, got {v!r}")
    if positive and v <= 0:
        raise _err(key, f"expected a positive integer, got {v!r}")
    return int(v)


def _bool(v, key: str) -> bool:
    if not isinstance(v, bool):
        raise _err(key, f"expected true or false, got {v!r}")
    return v


def _str(v, key: str) -> str:
    if not isinstance(v, str):
        raise _err(key, f"expected a string, got {v!r}")
    return v


def _check_keys(table: dict, where: str, labels: dict) -> dict:
    out = {}
    for k, v in table.items():
        ck = _canon_key(str(k))
        if ck not in PARAM_KEYS:
            raise _err(f"[{where}] {k}", "unknown key; known keys: " + ", ".join(PARAM_KEYS + tuple(ALIASES)))
        if ck in out:
            raise _err(f"[{where}] {k}", f"given twice (as {ck!r} and its alias)")
        out[ck] = v
        labels[ck] = f"[{where}] {k}"
    return out


def _check_cases(cases, base: dict, labels: dict, grid: dict, glabels: dict) -> list:
    """``[grid] cases``: a list of tables, each a set of keys that vary together."""
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise _err(f"[grid] {CASES_KEY}", "expected a non-empty list of tables, e.g. "
                   "[{cluster = '32x4', load = 6}, {cluster = '128x4', load = 24}]")
    out = []
    for i, c in enumerate(cases):
        lab: dict = {}
        c = _check_keys(c, f"grid] {CASES_KEY}[{i}", lab)
        for k in c:
            if k in base:
                raise _err(f"[grid] {CASES_KEY}[{i}] {k}", f"also set in [base] (as {labels[k]!r}); set it in one table only")
            if k in grid:
                raise _err(f"[grid] {CASES_KEY}[{i}] {k}", f"also a [grid] list (as {glabels[k]!r}); set it in one place only")
        out.append(c)
    return out


def _resolve(raw: dict, base_dir: Path, where: dict) -> dict:
    """Validate one point's raw parameters and fill in defaults. ``where[key]`` names the key as
    the config spelt it (``[grid] policy``), for messages."""

    def name(k):
        return where.get(k, f"[base] {k}")

    p = dict(raw)
    # ---- workload source
    kind = p.get("workload")
    if kind is not None:
        kind = _str(kind, name("workload")).lower()
        if kind not in WORKLOAD_KINDS:
            raise _err(name("workload"), f"unknown workload {raw['workload']!r}; choose one of: {', '.join(WORKLOAD_KINDS)} "
                                        "(or give trace = PATH)")
    if p.get("trace") is not None:
        if kind not in (None, "trace"):
            raise _err(name("trace"), f"give either trace = PATH or workload = {kind!r}, not both")
        kind = "trace"
    kind = kind or "blox"
    if kind == "trace":
        if p.get("trace") is None:
            raise _err(name("workload"), "workload = 'trace' needs trace = PATH")
        path = Path(_str(p["trace"], name("trace"))).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        path = path.resolve()
        if not path.exists():
            raise _err(name("trace"), f"no such file: {path} (relative paths are relative to the config file's folder)")
        p["trace"] = str(path)
        fmt = p.get("format")
        if fmt is not None:
            from ..traces.registry import FORMATS

            fmt = _str(fmt, name("format"))
            try:
                FORMATS.get(fmt)
            except ConfigError as e:
                raise _err(name("format"), str(e)) from None
        p["format"] = fmt
        obr = p.get("on_bad_rows", "error")
        if obr not in ("error", "drop"):
            raise _err(name("on_bad_rows"), f"expected 'error' or 'drop', got {obr!r}")
        p["on_bad_rows"] = obr
        for k in ("load", "num_jobs"):
            if p.get(k) is not None:
                raise _err(name(k), "applies to generated workloads only, not to a trace")
    else:
        for k in ("format", "on_bad_rows"):
            if p.get(k) is not None:
                raise _err(name(k), f"applies to trace = PATH only, not to workload = {kind!r}")
        p["trace"] = p["format"] = p["on_bad_rows"] = None
        if kind == "blox":
            p["load"] = _number(p.get("load", 6.0), name("load"), positive=True)
        elif kind == "gavel" and p.get("load") is not None:
            p["load"] = _number(p["load"], name("load"), positive=True)  # jobs/h (default: 3600/400 s)
        elif p.get("load") is not None:
            raise _err(name("load"), "applies to workload = 'blox' or 'gavel' only")
        else:
            p["load"] = None
        nj = p.get("num_jobs")
        if nj is None and kind == "gavel":
            nj = 2000
        p["num_jobs"] = None if nj is None else _int(nj, name("num_jobs"), positive=True)
    p["workload"] = kind
    p["seed"] = _int(p.get("seed", DEFAULT_SEED[kind]), name("seed"))

    # ---- run options (built with fastblox's own parts)
    def built(k, fn):
        try:
            return fn()
        except ConfigError as e:
            raise _err(name(k), str(e)) from None

    p["blox_compat"] = _bool(p.get("blox_compat", False), name("blox_compat"))
    p["record_series"] = _bool(p.get("record_series", False), name("record_series"))
    cl = _str(p.get("cluster", "32x4"), name("cluster"))
    built("cluster", lambda: Cluster.parse(cl))
    p["cluster"] = cl
    sched = p.get("scheduler", "fifo")
    sched = _str(sched, name("scheduler")).lower()
    if sched == DYNAMIC_POLICY:
        if p["blox_compat"]:
            raise _err(name("scheduler"), "policy 'dynamic' pauses the run to look ahead, which only the native engine "
                                          "can do; set blox_compat = false")
    elif p["blox_compat"]:
        if sched not in parts.BLOX_POLICIES:
            raise _err(name("scheduler"), f"blox_compat runs Blox's policies only: {', '.join(parts.BLOX_POLICIES)}; got {sched!r}")
    else:
        built("scheduler", lambda: parts.POLICIES.get(sched))
    p["scheduler"] = sched
    pl_name = p.get("placement")
    pl_name = ("blox" if p["blox_compat"] else "first-fit") if pl_name is None else _str(pl_name, name("placement")).lower()
    built("placement", lambda: parts.PLACEMENTS.get(pl_name))
    p["placement"] = pl_name
    adm = p.get("admission", "accept-all")
    if isinstance(adm, bool) or not isinstance(adm, (str, int, float)):
        raise _err(name("admission"), f"expected 'accept-all' or 'load:THETA', got {adm!r}")
    p["admission"] = built("admission", lambda: parts.Admission.parse(adm)).name
    pol_obj = None if (p["blox_compat"] or sched == DYNAMIC_POLICY) else parts.POLICIES.get(sched)
    tm = p.get("time_model")
    if tm is None:
        tm = "rounds" if p["blox_compat"] else ((pol_obj.default_time_model if pol_obj is not None else None) or "events")
    tm = _str(tm, name("time_model")).lower()
    built("time_model", lambda: parts.TIME_MODELS.get(tm))
    if p["blox_compat"] and tm != "rounds":
        raise _err(name("time_model"), "blox_compat simulates Blox's fixed rounds; time_model must be 'rounds'")
    p["time_model"] = tm
    default_round = (pol_obj.default_round_s if pol_obj is not None and pol_obj.default_round_s else None) or 300.0
    p["round_s"] = _number(p.get("round_s", default_round), name("round_s"), positive=True)
    p["restart_s"] = _number(p.get("restart_s", 0.0), name("restart_s"), nonneg=True)
    if p["blox_compat"] and p["restart_s"]:
        raise _err(name("restart_s"), "blox_compat has no restart cost (Blox has none)")
    pre = p.get("preempt")
    p["preempt"] = None if pre is None else _bool(pre, name("preempt"))
    if p["blox_compat"] and p["preempt"] is False:
        raise _err(name("preempt"), "blox_compat always preempts, as Blox does")
    tr = p.get("track", "default")
    if tr == "default":
        tr = BLOX_DEFAULT_TRACK if (kind == "blox" and p["num_jobs"] is None) else None
    elif tr is not None:
        tr = _parse_track(tr, name("track"))
        if tr[0] > tr[1]:
            raise _err(name("track"), f"the first id {tr[0]} is after the last id {tr[1]}")
    if kind == "blox" and p["num_jobs"] is None and tr is None:
        raise _err(name("track"), "Blox's workload is an endless stream: give track = '3000:4000' or num_jobs")
    p["track"] = None if tr is None else f"{tr[0]}:{tr[1]}"
    _resolve_dynamic(p, name)
    _resolve_realism(p, name, base_dir, pol_obj, cl)
    return {k: p.get(k) for k in PARAM_KEYS}


def _opts_text(d: dict) -> str:
    return ",".join(f"{k}={';'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in sorted(d.items()))


def _opts_dict(text: str) -> dict:
    return dict(kv.split("=", 1) for kv in text.split(",") if kv)


def _resolve_realism(p: dict, name, base_dir: Path, pol, cluster: str) -> None:
    """Validate the realism keys and policy parameters (None: simulate's default)."""
    given = {k: p.get(k) for k in REALISM_KEYS if p.get(k) is not None}
    if p["blox_compat"] and given:
        raise _err(name(next(iter(given))), "blox_compat replays Blox as it is: no realism options or policy parameters")
    for k in ("checkpoint_s",):
        if k in given:
            p[k] = _number(given[k], name(k), nonneg=True)
    for k in ("multi_node_factor", "rack_factor"):
        if k in given:
            v = _number(given[k], name(k), positive=True)
            if v > 1:
                raise _err(name(k), f"a speed multiplier in (0, 1], got {v:g}")
            p[k] = v
    if "placement_effects" in given:
        p["placement_effects"] = _bool(given["placement_effects"], name("placement_effects"))
    for k in ("reference_gpu",):
        if k in given:
            p[k] = _str(given[k], name(k)).lower()
    for k in ("throughput", "cluster_events"):
        if k not in given:
            continue
        v = _str(given[k], name(k))
        if k == "throughput" and v.lower() in ("gavel", "none", "builtin"):
            p[k] = v.lower()
            continue
        path = Path(v).expanduser()
        path = (path if path.is_absolute() else base_dir / path).resolve()
        if not path.exists():
            raise _err(name(k), f"no such file: {path} (relative paths are relative to the config file's folder)")
        p[k] = str(path)
    if p.get("throughput") not in (None, "gavel", "none", "builtin"):
        from ..speed import resolve_table

        try:
            resolve_table(p["throughput"])
        except ConfigError as e:
            raise _err(name("throughput"), str(e)) from None
    if p.get("cluster_events") is not None:
        from ..cluster_events import ClusterEvents

        try:
            ClusterEvents.read(p["cluster_events"], Cluster.parse(cluster))
        except ConfigError as e:
            raise _err(name("cluster_events"), str(e)) from None
    po = given.get("policy_opts")
    if po is not None:
        if isinstance(po, str):
            po = _opts_dict(po)
        if not isinstance(po, dict):
            raise _err(name("policy_opts"), f"expected a table like {{ f = 0.5 }}, got {po!r}")
        if pol is None:
            raise _err(name("policy_opts"), "policy parameters need a named policy (not 'dynamic')")
        try:
            pol.resolve_options(po)
        except ConfigError as e:
            raise _err(name("policy_opts"), str(e)) from None
        p["policy_opts"] = _opts_text(po)


def _resolve_dynamic(p: dict, name) -> None:
    """Fill in (policy ``dynamic``) or clear (any other policy) the keys of dynamic selection."""
    if p["scheduler"] != DYNAMIC_POLICY:
        for k in DYNAMIC_KEYS:
            p[k] = None  # ignored by other policies: one point, one id, whatever [base] says
        return
    from ..dynamic import DEFAULT_CANDIDATES, DEFAULT_PERIOD_S, check_dynamic_args

    cands = p.get("candidates", list(DEFAULT_CANDIDATES))
    if isinstance(cands, str):
        cands = [c.strip() for c in cands.split(",") if c.strip()]
    if not isinstance(cands, list) or not all(isinstance(c, str) for c in cands):
        raise _err(name("candidates"), f"expected a list of policy names like ['fifo', 'las', 'srtf'], got {cands!r}")
    period = p.get("period_s", DEFAULT_PERIOD_S)
    horizon = p.get("horizon_s")
    lookahead = p.get("lookahead", "known")
    labels = {"candidate": "candidates", "period_s": "period_s", "horizon_s": "horizon_s", "lookahead": "lookahead"}
    try:
        pols, period, horizon, lookahead = check_dynamic_args(cands, period, horizon, lookahead)
    except ConfigError as e:
        msg = str(e).removeprefix("dynamic: ")
        key = next((v for k, v in labels.items() if msg.startswith(k)), "candidates")
        raise _err(name(key), msg) from None
    p["candidates"] = ",".join(x.name for x in pols)
    p["period_s"], p["horizon_s"], p["lookahead"] = period, horizon, lookahead


def point_id(params: dict) -> str:
    canon = json.dumps({k: params[k] for k in PARAM_KEYS if not (k in OPTIONAL_KEYS and params[k] is None)},
                       sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(canon.encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------- loading
def load_config(src, base_dir=None) -> SweepConfig:
    """A validated :class:`SweepConfig` from a TOML file path, TOML text read elsewhere, or a dict.

    Relative trace paths are relative to the config file's folder (for a dict: ``base_dir``,
    default the current directory)."""
    if isinstance(src, SweepConfig):
        return src
    text = path = None
    if isinstance(src, dict):
        raw = src
        bdir = Path(base_dir) if base_dir is not None else Path.cwd()
    else:
        path = Path(src)
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"sweep config: cannot read {path}: {e.strerror or e}") from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"sweep config: {path}: not valid TOML: {e}") from None
        bdir = Path(base_dir) if base_dir is not None else path.resolve().parent
    return _build(raw, bdir, path, text)


def _build(raw: dict, base_dir: Path, path, text) -> SweepConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"sweep config: expected a table, got {type(raw).__name__}")
    for k in raw:
        if k not in TOP_KEYS:
            hint = " (run options go in [base] or [grid])" if _canon_key(k) in PARAM_KEYS else ""
            raise _err(str(k), f"unknown top-level key{hint}; known keys: {', '.join(TOP_KEYS)}")
    base = raw.get("base", {})
    grid = raw.get("grid", {})
    if not isinstance(base, dict):
        raise _err("base", "expected a table of run options")
    if not isinstance(grid, dict):
        raise _err("grid", "expected a table of lists")
    labels: dict = {}
    base = _check_keys(base, "base", labels)
    glabels: dict = {}
    cases = grid.get(CASES_KEY)
    grid = _check_keys({k: v for k, v in grid.items() if k != CASES_KEY}, "grid", glabels)
    if cases is not None:
        cases = _check_cases(cases, base, labels, grid, glabels)
    for k, v in grid.items():
        if not isinstance(v, list):
            raise _err(glabels[k], f"expected a list of values, got {v!r}")
        if not v:
            raise _err(glabels[k], "an empty list gives an empty sweep")
        if k == "track" and all(isinstance(x, int) for x in v) and len(v) == 2:
            raise _err("[grid] track", "a list of ranges is expected, e.g. [[0, 199], [3000, 4000]] or ['0:199']")
        if k in base:
            raise _err(glabels[k], f"also set in [base] (as {labels[k]!r}); set it in one table only")
    seeds = raw.get("seeds")
    repeats = raw.get("repeats")
    if seeds is not None:
        if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise _err("seeds", f"expected a non-empty list of integers, got {seeds!r}")
        if len(set(seeds)) != len(seeds):
            raise _err("seeds", f"repeated seed in {seeds!r}")
    if repeats is not None:
        _int(repeats, "repeats", positive=True)
        if seeds is not None:
            raise _err("repeats", "give either seeds = [..] or repeats = N, not both")
    if (seeds is not None or repeats is not None) and ("seed" in grid or "seed" in base):
        raise _err("seeds" if seeds is not None else "repeats", "cannot be combined with a seed in [base] or [grid]")
    name = raw.get("name")
    if name is not None:
        _str(name, "name")

    keys = list(grid)
    axes = [grid[k] for k in keys] + ([cases] if cases is not None else [])
    combos = list(itertools.product(*axes)) if axes else [()]
    where = {**labels, **glabels}
    points, seen = [], {}
    for combo in combos:
        p0 = dict(base)
        p0.update(zip(keys, combo))
        if cases is not None:
            p0.update(combo[-1])
            where = {**labels, **glabels, **{k: f"[grid] cases[{cases.index(combo[-1])}] {k}" for k in combo[-1]}}
        if seeds is not None or repeats is not None:
            kind_probe = _resolve(p0, base_dir, where)  # validates; gives the workload's default seed
            seed_list = seeds if seeds is not None else [kind_probe["seed"] + i for i in range(repeats)]
        else:
            seed_list = [None]
        for s in seed_list:
            p1 = dict(p0)
            if s is not None:
                p1["seed"] = s
            params = _resolve(p1, base_dir, where if s is None else {**where, "seed": "seeds" if seeds is not None else "repeats"})
            pid = point_id(params)
            if pid in seen:
                continue  # two grid combinations that resolve to one configuration: run it once
            seen[pid] = True
            points.append(Point(pid, {"point_id": pid, **params}))
    return SweepConfig(base, grid, seeds, points, path, text, name, raw)


# ----------------------------------------------------------------------------- a tiny TOML writer
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # an inline table (e.g. an entry of [grid] cases)
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise ConfigError(f"sweep config: cannot write {v!r} as TOML")


def dump_toml(raw: dict) -> str:
    """TOML text of a config dict (scalars and lists at the top level, then its tables)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in raw.items() if not isinstance(v, dict) and v is not None]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += ["", f"[{k}]"] + [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items() if vv is not None]
    return "\n".join(lines).lstrip("\n") + "\n"
