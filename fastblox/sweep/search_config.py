"""Search configurations: a sweep config's ``[base]`` (and ``seeds`` / ``repeats``) plus a
``[search]`` table that names an objective and the knobs to search::

    seeds = [1, 2]                       # optional: every trial runs once per seed (the objective is their mean)

    [base]                               # run options, as in a sweep; "{name}" is a knob's value
    workload = "blox"
    load = 8
    num_jobs = 1000
    policy = "las"
    admission = "load:{threshold}"

    [search]
    objective = "avg_jct_s"              # a summary figure (OBJECTIVES); direction from OBJECTIVES
    sampler = "random"                   # or "tpe" (Optuna: pip install 'fastblox[search]')
    trials = 24
    batch = 4                            # trials per round, run in parallel
    seed = 0                             # the sampler's seed

    [search.space]
    threshold = {low = 0.8, high = 2.5}  # a template variable: used as {threshold} in [base]
    restart_s = {low = 0, high = 120}    # a run option (a field of fastblox.RunSpec)
    placement = ["first-fit", "consolidated"]

A knob is a run option (a key of a sweep's ``[grid]``: its values are checked by the same code)
or a *template variable*, a name used as ``{name}`` in a ``[base]`` string (``"load:{threshold}"``;
a string that is exactly ``"{name}"`` takes the knob's value itself, number or text). Everything
is validated before anything runs: the ``[base]`` and every knob's bounds and choices go through
:func:`fastblox.sweep.config.load_config`, as a sweep's points do.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .config import PARAM_KEYS, PARAM_TYPES, _canon_key, dump_toml, load_config, read_toml

#: The summary figures a search can optimise and whether lower ("min") or higher ("max") is better.
OBJECTIVES = {
    "avg_jct_s": "min", "p50_jct_s": "min", "p95_jct_s": "min", "p99_jct_s": "min", "max_jct_s": "min",
    "avg_queue_s": "min", "makespan_s": "min", "num_preemptions": "min",
    "rho_mean": "min", "rho_p50": "min", "rho_p95": "min", "rho_p99": "min", "rho_max": "min",
    "jain_index": "max", "utilisation": "max",
}
SAMPLERS = ("random", "tpe")
TOP_KEYS = ("base", "search", "seeds", "repeats", "name", "description")
SEARCH_KEYS = ("objective", "direction", "sampler", "trials", "batch", "seed", "space")
RANGE_KEYS = ("low", "high", "log", "step", "type")
DEFAULTS = {"sampler": "random", "trials": 20, "batch": 4, "seed": 0}
#: Significant digits kept of a float knob's value (what a run is given is what the table shows).
FLOAT_DIGITS = 6
#: The columns of search.parquet besides the knobs' (which follow KNOBS_AFTER), with their types;
#: a knob cannot have one of these names.
TRIAL_COLUMNS = {"trial": "int", "round": "int", "status": "str", "objective": "float", "objective_std": "float",
                 "best_so_far": "float", "num_seeds": "int", "complete": "bool", "unfinished": "int", "seeds": "str", "point_ids": "str",
                 "error": "str"}
KNOBS_AFTER = "status"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _err(key: str, msg: str) -> ConfigError:
    return ConfigError(f"search config: {key}: {msg}")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def round_sig(x: float, digits: int = FLOAT_DIGITS) -> float:
    return float(f"{x:.{digits}g}")


@dataclass(frozen=True)
class Knob:
    """One searched variable: a range (``kind`` "float" or "int", optional ``log`` or ``step``)
    or a list of ``choices``. ``option``: True for a run option, False for a template variable."""

    name: str
    kind: str  # "float" | "int" | "choice"
    option: bool
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple = ()

    def describe(self) -> dict:
        """The knob as JSON-able data (part of the search's definition)."""
        if self.kind == "choice":
            return {"choices": list(self.choices)}
        d = {"type": self.kind, "low": self.low, "high": self.high}
        if self.log:
            d["log"] = True
        if self.step is not None:
            d["step"] = self.step
        return d

    def clean(self, v):
        """A sampled value as a run gets it (floats rounded to FLOAT_DIGITS significant digits)."""
        if self.kind == "int":
            return int(v)
        if self.kind == "float":
            return round_sig(float(v))
        return v

    def probes(self) -> list:
        """The values checked before anything runs: both bounds, or every choice."""
        return list(self.choices) if self.kind == "choice" else [self.clean(self.low), self.clean(self.high)]


@dataclass
class SearchConfig:
    """A validated search config; :meth:`points_for` gives a trial's points (one per seed)."""

    base: dict
    knobs: list
    objective: str
    direction: str
    sampler: str
    trials: int
    batch: int
    seed: int
    base_dir: Path
    top: dict = field(default_factory=dict)  # seeds / repeats / name, passed on to the sweep config
    source_text: str | None = None
    raw: dict = field(default_factory=dict, repr=False)

    def to_toml(self) -> str:
        return self.source_text if self.source_text is not None else dump_toml(self.raw)

    def definition(self) -> dict:
        """What decides the trials and their results, but not how many: a folder holds one search,
        and a rerun with more trials extends it (the first trials are the same)."""
        return {"base": self.base, "space": {k.name: k.describe() for k in self.knobs}, "objective": self.objective,
                "direction": self.direction, "sampler": self.sampler, "batch": self.batch, "seed": self.seed,
                **{k: v for k, v in self.top.items() if k in ("seeds", "repeats")}}

    def definition_digest(self) -> str:
        canon = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    def sweep_dict(self, values: dict) -> dict:
        """The sweep config (one point per seed) of a trial with these knob values: template
        variables substituted into ``[base]``, run-option knobs as one-value ``[grid]`` lists."""
        base = {k: _substitute(v, values) for k, v in self.base.items()}
        grid = {k.name: [values[k.name]] for k in self.knobs if k.option}
        return {**self.top, "base": base, "grid": grid}

    def points_for(self, values: dict) -> list:
        """The trial's points (a :class:`fastblox.sweep.config.Point` per seed); a
        :class:`ConfigError` (worded for a search config) if the values make a bad run."""
        try:
            return load_config(self.sweep_dict(values), base_dir=self.base_dir).points
        except ConfigError as e:
            raise _relabel(e, values) from None


def _relabel(e: ConfigError, values: dict) -> ConfigError:
    msg = str(e).removeprefix("sweep config: ").replace("[grid] ", "[search.space] ")
    shown = ", ".join(f"{k} = {v!r}" for k, v in values.items())
    return ConfigError(f"search config: {msg} (with {shown})")


def _substitute(v, values: dict):
    if isinstance(v, str):
        m = _PLACEHOLDER.fullmatch(v)
        if m:
            return values[m.group(1)]
        return _PLACEHOLDER.sub(lambda m: _text(values[m.group(1)]), v)
    if isinstance(v, list):
        return [_substitute(x, values) for x in v]
    if isinstance(v, dict):
        return {k: _substitute(x, values) for k, x in v.items()}
    return v


def _text(v) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _placeholders(v) -> set:
    if isinstance(v, str):
        return set(_PLACEHOLDER.findall(v))
    if isinstance(v, list):
        return set().union(*map(_placeholders, v)) if v else set()
    if isinstance(v, dict):
        return set().union(*map(_placeholders, v.values())) if v else set()
    return set()


# ----------------------------------------------------------------------------- loading
def load_search_config(src, base_dir=None) -> SearchConfig:
    """A validated :class:`SearchConfig` from a TOML file path or a dict of the same shape
    (relative paths: from the file's folder, for a dict ``base_dir`` or the current directory)."""
    if isinstance(src, SearchConfig):
        return src
    raw, bdir, _, text = read_toml(src, base_dir, "search config")
    return _build(raw, bdir, text)


def _build(raw: dict, base_dir: Path, text) -> SearchConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"search config: expected a table, got {type(raw).__name__}")
    for k in raw:
        if k not in TOP_KEYS:
            hint = " (a search has no grid: put the knobs in [search.space])" if k == "grid" else (
                " (run options go in [base])" if _canon_key(str(k)) in PARAM_KEYS else "")
            raise _err(str(k), f"unknown top-level key{hint}; known keys: {', '.join(TOP_KEYS)}")
    base = raw.get("base", {})
    if not isinstance(base, dict):
        raise _err("base", "expected a table of run options")
    search = raw.get("search")
    if not isinstance(search, dict):
        raise _err("search", "missing: a [search] table with an objective and a [search.space] of knobs")
    for k in search:
        if k not in SEARCH_KEYS:
            raise _err(f"[search] {k}", f"unknown key; known keys: {', '.join(SEARCH_KEYS)}")
    objective, direction = _objective(search)
    sampler = search.get("sampler", DEFAULTS["sampler"])
    if sampler not in SAMPLERS:
        raise _err("[search] sampler", f"unknown sampler {sampler!r}; choose one of: {', '.join(SAMPLERS)}")
    trials = _positive_int(search.get("trials", DEFAULTS["trials"]), "[search] trials")
    batch = _positive_int(search.get("batch", DEFAULTS["batch"]), "[search] batch")
    seed = search.get("seed", DEFAULTS["seed"])
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _err("[search] seed", f"expected a non-negative integer, got {seed!r}")
    canon_base = {}
    for k, v in base.items():
        ck = _canon_key(str(k))
        canon_base[ck if ck in PARAM_KEYS else str(k)] = v  # unknown keys: load_config names them
    knobs = _knobs(search.get("space"), canon_base)
    top = {k: raw[k] for k in ("seeds", "repeats", "name") if k in raw}
    cfg = SearchConfig(canon_base, knobs, objective, direction, sampler, trials, batch, seed, base_dir, top, text, raw)
    _probe(cfg)
    return cfg


def _objective(search: dict) -> tuple[str, str]:
    objective = search.get("objective")
    if objective is None:
        raise _err("[search] objective", "missing: name the summary figure to optimise, one of: " + ", ".join(OBJECTIVES))
    if objective not in OBJECTIVES:
        raise _err("[search] objective", f"unknown figure {objective!r}; one of: {', '.join(OBJECTIVES)}")
    direction = search.get("direction", OBJECTIVES[objective])
    if direction not in ("min", "max"):
        raise _err("[search] direction", f"expected 'min' or 'max', got {direction!r}")
    return objective, direction


def _positive_int(v, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _err(key, f"expected a positive integer, got {v!r}")
    return v


def _knobs(space, base: dict) -> list:
    if not isinstance(space, dict) or not space:
        raise _err("[search.space]", "missing or empty: a table of knobs, e.g. threshold = {low = 0.8, high = 2.5} "
                   "or policy = ['las', 'srtf']")
    used = {name: key for key, v in base.items() for name in _placeholders(v)}
    for name, key in used.items():
        if name not in space:
            raise _err(f"[base] {key}", f"{{{name}}} is not a knob of [search.space] (knobs: {', '.join(space)})")
    knobs = []
    for name, spec in space.items():
        label = f"[search.space] {name}"
        if name in TRIAL_COLUMNS:
            raise _err(label, f"{name!r} is a column of search.parquet; give the knob another name")
        ck = _canon_key(name)
        option = ck in PARAM_KEYS and name not in used
        if option:
            if ck in base:
                raise _err(label, "also set in [base]; a knob's value comes from the search, set it in one place only")
            if ck == "seed":
                raise _err(label, "the workload's seed is not a knob: give seeds = [..] to average every trial over seeds")
            name = ck
        elif name not in used:
            raise _err(label, "unknown knob: not a run option and not used as {" + name + "} in a [base] string; "
                       "run options: " + ", ".join(PARAM_KEYS))
        knobs.append(_knob(name, spec, option, label))
    return knobs


def _knob(name: str, spec, option: bool, label: str) -> Knob:
    if isinstance(spec, list):
        if not spec:
            raise _err(label, "an empty list of choices")
        if not all(isinstance(x, (str, int, float, bool)) for x in spec):
            raise _err(label, f"choices must be numbers, text or booleans, got {spec!r}")
        if len({json.dumps(x) for x in spec}) != len(spec):
            raise _err(label, f"a choice is given twice in {spec!r}")
        return Knob(name, "choice", option, choices=tuple(spec))
    if not isinstance(spec, dict):
        raise _err(label, f"expected a range {{low = .., high = ..}} or a list of choices, got {spec!r}")
    for k in spec:
        if k not in RANGE_KEYS:
            raise _err(f"{label}.{k}", f"unknown key; a range has: {', '.join(RANGE_KEYS)}")
    column = PARAM_TYPES.get(name) if option else None
    if option and column not in ("int", "float"):
        raise _err(label, f"{name} is not a number: give a list of choices, e.g. {name} = [...]")
    kind = spec.get("type", column or "float")
    if kind not in ("int", "float"):
        raise _err(f"{label}.type", f"expected 'int' or 'float', got {kind!r}")
    low, high = spec.get("low"), spec.get("high")
    for k, v in (("low", low), ("high", high)):
        if not _number(v) or not math.isfinite(v):
            raise _err(f"{label}.{k}", f"expected a number, got {v!r}" if v is not None else "missing")
        if kind == "int" and not float(v).is_integer():
            raise _err(f"{label}.{k}", f"an integer range needs integer bounds, got {v!r}")
    if not low < high:
        raise _err(label, f"low ({low!r}) must be below high ({high!r})")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise _err(f"{label}.log", f"expected true or false, got {log!r}")
    if log and low <= 0:
        raise _err(f"{label}.log", f"a log range needs low > 0, got {low!r}")
    step = spec.get("step")
    if step is not None:
        if log:
            raise _err(f"{label}.step", "give either log = true or a step, not both")
        if not _number(step) or not step > 0 or (kind == "int" and not float(step).is_integer()):
            raise _err(f"{label}.step", f"expected a positive {'integer' if kind == 'int' else 'number'}, got {step!r}")
        n = (high - low) / step
        if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
            raise _err(f"{label}.step", f"high - low ({high - low!r}) is not a multiple of the step {step!r}")
    if kind == "int":
        low, high = int(low), int(high)
        step = None if step is None or step == 1 else int(step)
    else:
        low, high = float(low), float(high)
        step = None if step is None else float(step)
    return Knob(name, kind, option, low, high, log, step)


def _probe(cfg: SearchConfig) -> None:
    """Check the [base] and every knob's bounds or choices (each with the others at their first
    probe) by building the runs' points, before anything runs."""
    first = {k.name: k.probes()[0] for k in cfg.knobs}
    cfg.points_for(first)
    for k in cfg.knobs:
        for v in k.probes()[1:]:
            cfg.points_for({**first, k.name: v})
