"""Sweep configurations: a ``[base]`` table of run options, a ``[grid]`` of lists, seeds/repeats.

A config is read from TOML (:func:`load_config` with a path) or given as a dict of the same shape::

    seeds = [0, 1]            # optional: one point per seed (or ``repeats = N``: seeds base..base+N-1)

    [base]                    # any keyword of fastblox.simulate, plus the workload source
    workload = "gavel"        # "blox" (load, seed, num_jobs), "gavel" (num_jobs, seed), "sample" (num_jobs)
    num_jobs = 2000           # ... or trace = "path.csv" (+ format, on_bad_rows)
    cluster = "12x4"

    [grid]                    # the sweep is the cross product of these lists
    policy = ["fifo", "las"]  # any field of fastblox.RunSpec
    restart_s = [0, 30]

Everything is validated up front by building fastblox's own parts (policy and placement
registries, ``Admission.parse``, ``Cluster.parse``); a bad value raises
:class:`fastblox.errors.ConfigError` naming the key. Each point gets a fixed set of parameters
(defaults filled in), an explicit ``seed``, the SHA-256 of every input file it reads (``inputs``:
trace, throughput table, cluster events, cluster CSV) and a stable id: the first 12 hex digits of
the SHA-1 of the canonical JSON of its parameters, its inputs' digests and
:data:`RESULTS_FORMAT`. So a file whose bytes change, or a new format of the results, is a new
point that runs again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..spec import ALIASES, VALUE_ALIASES, OptionError, RunSpec, value_alias

#: The run options (``fastblox.RunSpec``'s fields, workload source included), in declaration order.
SPEC_KEYS = tuple(f.name for f in dataclasses.fields(RunSpec))
#: Keys of dynamic policy selection (``policy = "dynamic"``, :mod:`fastblox.dynamic`); None otherwise.
DYNAMIC_KEYS = ("candidates", "period_s", "horizon_s", "lookahead")
#: Every point has exactly these parameters, in this order (``point_id`` is added in front).
PARAM_KEYS = SPEC_KEYS + DYNAMIC_KEYS
#: The grid key whose values are tables of keys set together (a zipped axis).
CASES_KEY = "cases"
DYNAMIC_POLICY = "dynamic"
TOP_KEYS = ("base", "grid", "seeds", "repeats", "name", "description")
#: Options whose value is a path, relative to the config file's folder (and the values that are not).
PATH_KEYS = {"trace": (), "throughput": ("gavel", "none", "builtin"), "cluster_events": ()}
#: Options kept as text in a point's parameters (``track = "3000:4000"``, ``policy_opts = "f=0.5"``).
TEXT_KEYS = ("track", "policy_opts", "failures")

#: The version of what a point's files hold. Bump it whenever the same point would now write
#: different bytes (a new column or summary figure, a changed meaning): every id changes, so every
#: point of an older folder runs again instead of being mixed with the new ones.
RESULTS_FORMAT = 3  # 3: the summary's offered_load
#: Options naming files a point reads: their contents are part of its id.
INPUT_KEYS = ("trace", "throughput", "cluster_events", "cluster")

#: Polars dtype names of the parameter columns (fixed, so every point's table has one schema).
PARAM_TYPES = {"point_id": "str",
               **{f.name: ("str" if f.name in TEXT_KEYS else f.metadata["column"]) for f in dataclasses.fields(RunSpec)},
               "candidates": "str", "period_s": "float", "horizon_s": "float", "lookahead": "str"}


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: ``params`` (flat, JSON-able, defaults filled in) and
    ``inputs``, ``{option: SHA-256 of the file's bytes}`` of the files it reads (not a parameter:
    the point's JSON records it; the id covers it)."""

    id: str
    params: dict
    inputs: dict = field(default_factory=dict)

    @property
    def spec(self) -> RunSpec:
        """The point's :class:`fastblox.RunSpec` (resolved)."""
        kw = {k: self.params[k] for k in SPEC_KEYS}
        if kw["policy_opts"] is not None:
            kw["policy_opts"] = _opts_dict(kw["policy_opts"])
        return RunSpec(**kw)

    @property
    def workload_spec(self) -> dict:
        """What a worker needs to build (and cache) the workload; no arrays. A trace's carries
        the SHA-256 of its bytes (``build_workload`` ignores it; caches are keyed by it)."""
        from ..runner import workload_key

        key = workload_key(self.spec)
        if key["kind"] == "trace":
            key["sha256"] = self.inputs["trace"]
        return key

    @property
    def dynamic_kwargs(self) -> dict | None:
        """Keywords of ``fastblox.dynamic.simulate_dynamic`` (None unless ``policy = "dynamic"``)."""
        p = self.params
        if p["policy"] != DYNAMIC_POLICY:
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


def _int(v, key: str, positive: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(key, f"expected an integer, got {v!r}")
    if positive and v <= 0:
        raise _err(key, f"expected a positive integer, got {v!r}")
    return int(v)


def _str(v, key: str) -> str:
    if not isinstance(v, str):
        raise _err(key, f"expected a string, got {v!r}")
    return v


def _check_keys(table: dict, where: str, labels: dict) -> dict:
    out = {}
    for k, v in table.items():
        ck = _canon_key(str(k))
        if ck in VALUE_ALIASES:  # e.g. blox_compat = true: compat = "blox" (each value of a grid list)
            try:
                ck, v = (value_alias(ck, v)[0], [value_alias(ck, x)[1] for x in v] if isinstance(v, list)
                         else value_alias(ck, v)[1])
            except OptionError as e:
                raise _err(f"[{where}] {k}", e.reason) from None
        if ck not in PARAM_KEYS:
            raise _err(f"[{where}] {k}", "unknown key; known keys: " + ", ".join(PARAM_KEYS + tuple(ALIASES)
                                                                                  + tuple(VALUE_ALIASES)))
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
    """Validate one point's raw parameters and fill in defaults (``fastblox.RunSpec`` does both,
    as for every run). ``where[key]`` names the key as the config spelt it (``[grid] policy``)."""

    def name(k):
        return where.get(k, f"[base] {k}")

    p = dict(raw)
    for k, keywords in PATH_KEYS.items():
        if p.get(k) is not None:
            p[k] = _path(p[k], keywords, name(k), base_dir)
    dyn = {k: p.pop(k) for k in DYNAMIC_KEYS if k in p}
    try:
        r = RunSpec(**p).resolved()
    except OptionError as e:
        raise _err(name(e.option), e.reason) from None
    _check_files(r, name)
    params = {k: getattr(r, k) for k in SPEC_KEYS}
    params["cluster"] = str(params["cluster"])
    params["track"] = None if r.track is None else f"{r.track[0]}:{r.track[1]}"
    params["policy_opts"] = _opts_text(dict(r.policy_opts)) if r.policy_opts else None
    params["failures"] = None if r.failures is None else f"{r.failures[0] / 3600!r}:{r.failures[1] / 3600!r}"
    params.update(dyn)
    _resolve_dynamic(params, name)
    return {k: params.get(k) for k in PARAM_KEYS}


def _path(v, keywords, label: str, base_dir: Path) -> str:
    v = _str(v, label)
    if v.lower() in keywords:
        return v.lower()
    path = Path(v).expanduser()
    path = (path if path.is_absolute() else base_dir / path).resolve()
    if not path.exists():
        raise _err(label, f"no such file: {path} (relative paths are relative to the config file's folder)")
    return str(path)


def _check_files(r: RunSpec, name) -> None:
    """What can be checked of the named files before any run: the trace format, the throughput
    table and the cluster events."""
    from ..cluster import Cluster

    try:
        if r.format is not None:
            from ..traces.registry import FORMATS

            FORMATS.get(r.format)
    except ConfigError as e:
        raise _err(name("format"), str(e)) from None
    if r.throughput not in (None, "gavel", "none", "builtin"):
        from ..speed import resolve_table

        try:
            resolve_table(r.throughput)
        except ConfigError as e:
            raise _err(name("throughput"), str(e)) from None
    if r.cluster_events is not None:
        from ..cluster_events import ClusterEvents

        try:
            ClusterEvents.read(r.cluster_events, Cluster.parse(r.cluster))
        except ConfigError as e:
            raise _err(name("cluster_events"), str(e)) from None


def _opts_text(d: dict) -> str:
    return ",".join(f"{k}={';'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in sorted(d.items()))


def _opts_dict(text: str) -> dict:
    return dict(kv.split("=", 1) for kv in text.split(",") if kv)


def _resolve_dynamic(p: dict, name) -> None:
    """Fill in (policy ``dynamic``) or clear (any other policy) the keys of dynamic selection."""
    if p["policy"] != DYNAMIC_POLICY:
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


def point_id(params: dict, inputs: dict | None = None) -> str:
    """The first 12 hex digits of the SHA-1 of the canonical JSON of the parameters (None values
    left out, so a new option at its default keeps every older id), the digests of the input
    files (:func:`input_digests`) and :data:`RESULTS_FORMAT`."""
    doc = {k: params[k] for k in PARAM_KEYS if params[k] is not None}
    doc = {"params": doc, "inputs": dict(inputs or {}), "format": RESULTS_FORMAT}
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(canon.encode()).hexdigest()[:12]


_DIGESTS: dict = {}


def file_digest(path) -> str:
    """SHA-256 of a file's bytes, computed once per process for each (path, size, mtime_ns)."""
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        got = _DIGESTS.get(key)
        if got is None:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            got = _DIGESTS[key] = h.hexdigest()
    except OSError as e:
        raise ConfigError(f"sweep config: cannot read {path}: {e.strerror or e}") from None
    return got


def input_digests(params: dict) -> dict:
    """``{option: SHA-256}`` of every file a point's run reads (a trace, a throughput table file,
    a cluster events file, a cluster CSV); keywords (``gavel``, ``32x4``) are not files."""
    out = {}
    for k in INPUT_KEYS:
        v = params.get(k)
        if v is None or (k == "throughput" and v in PATH_KEYS["throughput"]):
            continue
        if k == "cluster" and not v.strip().lower().endswith(".csv"):
            continue
        out[k] = file_digest(v)
    return out


# ----------------------------------------------------------------------------- loading
def load_config(src, base_dir=None) -> SweepConfig:
    """A validated :class:`SweepConfig` from a TOML file path, TOML text read elsewhere, or a dict.

    Relative trace paths are relative to the config file's folder (for a dict: ``base_dir``,
    default the current directory)."""
    if isinstance(src, SweepConfig):
        return src
    raw, bdir, path, text = read_toml(src, base_dir, "sweep config")
    return _build(raw, bdir, path, text)


def read_toml(src, base_dir, what: str) -> tuple:
    """``(raw, base folder, path, text)`` of a config given as a TOML file path or a dict (path and
    text None); relative paths resolve against the file's folder, for a dict ``base_dir`` or the
    current directory. Errors name ``what`` and the file."""
    if isinstance(src, dict):
        return src, Path(base_dir) if base_dir is not None else Path.cwd(), None, None
    path = Path(src)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: {path}: not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{what}: {path}: not valid TOML: {e}") from None
    return raw, Path(base_dir) if base_dir is not None else path.resolve().parent, path, text


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
            inputs = input_digests(params)
            pid = point_id(params, inputs)
            if pid in seen:
                continue  # two grid combinations that resolve to one configuration: run it once
            seen[pid] = True
            points.append(Point(pid, {"point_id": pid, **params}, inputs))
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
