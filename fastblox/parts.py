"""Registries of the swappable parts: scheduling policies, placements, admission, time models.

Every part is registered under a name; the CLI's choices and all config validation come from
these tables, and a duplicate name raises. Built-in parts map to integer codes the kernels switch
on, so a sweep over them never recompiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from .errors import ConfigError
from .kernels import enums


class Registry:
    """Name -> part. ``get`` raises :class:`ConfigError` listing the valid names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict = {}
        self._meaning: dict = {}

    def register(self, name: str, item, replace: bool = False, meaning: str = ""):
        key = name.lower()
        if key in self._items and not replace:
            raise ConfigError(f"a {self.kind} named {name!r} is already registered")
        self._items[key] = item
        self._meaning[key] = meaning or getattr(item, "description", "")
        return item

    def meaning(self, name: str) -> str:
        """The one-line meaning ``name`` was registered with (``fastblox parts`` prints it)."""
        return self._meaning.get(str(name).lower(), "")

    def get(self, name: str):
        try:
            return self._items[str(name).lower()]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def values(self) -> list:
        return list(self._items.values())

    def __contains__(self, name) -> bool:
        return str(name).lower() in self._items


class JobView(NamedTuple):
    """The active jobs' columns handed to a user policy, all of one length A (one row per job).

    Times in seconds; ``attained_s`` wall-seconds run so far, ``attained_gpu_s`` GPU-seconds,
    ``remaining_s`` work left at the reference speed, ``running`` 1 while the job holds GPUs,
    ``since_s`` when it entered that state (its launch while running, else when it last started
    waiting: its admission, suspension or failure)."""

    job_id: np.ndarray
    submit_s: np.ndarray
    num_gpus: np.ndarray
    duration_s: np.ndarray
    attained_s: np.ndarray
    attained_gpu_s: np.ndarray
    remaining_s: np.ndarray
    running: np.ndarray
    num_preemptions: np.ndarray
    since_s: np.ndarray


@dataclass(frozen=True)
class Option:
    """A policy parameter: name, default, a parser ``str|value -> value`` that raises ValueError
    with a reason, and a one-line help."""

    name: str
    default: object
    parse: Callable
    help: str


@dataclass(frozen=True)
class Policy:
    """A scheduling policy: an ordering of the active jobs (lower key runs first), or a planner.

    ``code`` selects a built-in policy's kernel code: its ``key`` function, compiled into the
    kernel, gives ``(rank, key)`` of one job (``fastblox/policies/fifo.py`` is the simplest), or
    its ``keys`` function orders all active jobs at once (``KIND_FULL``: Themis). A user policy
    has ``fn(jobs: JobView, now_s) -> keys`` instead, called from Python.
    ``kind`` (``enums.KIND_*``) says how its keys behave: fixed while a job waits (a sorted
    queue), re-computed for every job each step, or a full plan (key, GPU type, size per job)
    from ``planner(context, options) -> object with .plan(view, now_s)``. ``dynamic`` says the
    keys move while jobs run (so no round may be skipped); ``preemptive`` is the default for
    whether waiting jobs may suspend running ones; ``options`` its parameters."""

    name: str
    code: int
    preemptive: bool
    dynamic: bool
    description: str
    fn: Callable | None = None
    blox_name: str | None = None  # the name Blox prints, for --blox-compat and its file names
    kind: int = enums.KIND_STATIC
    planner: Callable | None = None
    key: Callable | None = None  # kernel key function of one job (built-in policies)
    keys: Callable | None = None  # kernel key function of all active jobs (built-in KIND_FULL policies)
    options: tuple = ()
    default_time_model: str | None = None  # e.g. Gavel's rounds
    default_round_s: float | None = None  # e.g. Gavel's 360 s
    job_fn: Callable | None = None  # a user's per-job key function, compiled into the kernel (fastblox.userpol)
    state: tuple = ()  # a per-job user policy's state columns: ((name, numpy dtype, initial value), ...)
    rowwise: bool = False  # a Python policy whose key of a job reads that job's row only (and not now)

    def resolve_options(self, given: dict | None) -> dict:
        """Defaults overridden by ``given`` (values or strings); unknown names and bad values raise."""
        known = {o.name: o for o in self.options}
        out = {o.name: o.default for o in self.options}
        for k, v in (given or {}).items():
            key = str(k).replace("-", "_").lower()
            if key not in known or key.startswith("_"):
                avail = ", ".join(sorted(k for k in known if not k.startswith("_"))) or "none"
                raise ConfigError(f"--policy-opt: policy {self.name!r} has no option {k!r} (its options: {avail})")
            try:
                out[key] = known[key].parse(v)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"--policy-opt {k}={v!r} for policy {self.name!r}: {e}") from None
        return out


#: every scheduling policy by name: the built-in ones register themselves from their files
#: under ``fastblox/policies/`` (imported by ``fastblox.policies``), user ones with :func:`policy`
POLICIES = Registry("policy")

#: The names Blox's simulator accepts, with the ordering each really uses there.
BLOX_POLICIES = {
    "fifo": ("Fifo", enums.POL_FIFO),
    "las": ("Las", enums.POL_LAS),
    "srtf": ("Srtf", enums.POL_SRTF),
    "tiresias": ("Tiresias", enums.POL_LAS),  # Blox builds Tiresias' queues and never uses them
    "optimus": ("Optimus", enums.POL_SRTF),  # orders like SRTF (Blox's own run crashes)
}

PLACEMENTS = Registry("placement")
PLACEMENTS.register("blox", enums.PL_BLOX, meaning="Blox's scattered walk over the nodes: the GPUs taken must add up "
                    "to the job's size exactly, else it waits (--blox-compat's placement)")
PLACEMENTS.register("first-fit", enums.PL_FIRST_FIT, meaning="any free GPUs, lowest-numbered nodes first (the default)")
PLACEMENTS.register("consolidated", enums.PL_CONSOLIDATED, meaning="the fewest nodes: the fullest node that holds the "
                    "job when one can, else the emptiest nodes, only if they make the fewest possible; else it waits")
PLACEMENTS.register("topology", enums.PL_TOPOLOGY, meaning="one node, else one rack, else anywhere (best fit at each "
                    "level; racks from --cluster ...@NODES_PER_RACK)")
PLACEMENTS.register("yarn", enums.PL_YARN, meaning="Tiresias' yarn scheme: the first node that holds the job; a larger "
                    "job takes idle nodes whole, lowest-numbered first, and the rest from the first node that holds "
                    "it; else it waits")

TIME_MODELS = Registry("time model")
TIME_MODELS.register("rounds", enums.TM_ROUNDS, meaning="schedule at fixed boundaries every --round-s seconds "
                     "(Blox, Gavel); a job finishing mid-round frees its GPUs at the next boundary")
TIME_MODELS.register("events", enums.TM_EVENTS, meaning="schedule at every arrival, completion and cluster event, at "
                     "its exact time")


@dataclass(frozen=True)
class Admission:
    """Admission control: ``accept-all`` or ``load:θ`` (Blox's load-based accept at θ × GPUs)."""

    theta: float = 0.0  # 0 = accept all

    @property
    def name(self) -> str:
        return "accept-all" if self.theta <= 0 else f"load:{self.theta:g}"

    @property
    def blox_name(self) -> str:
        return "AcceptAll" if self.theta <= 0 else f"LoadBasedAccept-{self.theta:g}x"

    @classmethod
    def parse(cls, spec: "str | float | Admission | None") -> "Admission":
        if spec is None:
            return cls()
        if isinstance(spec, Admission):
            return spec
        if isinstance(spec, (int, float)):
            return cls._checked(float(spec), str(spec))
        s = str(spec).strip().lower()
        if s in ("accept-all", "acceptall", "all"):
            return cls()
        for prefix in ("load:", "load="):
            if s.startswith(prefix):
                try:
                    theta = float(s[len(prefix):])
                except ValueError:
                    break
                return cls._checked(theta, spec)
        raise ConfigError(f"--admission: unknown admission {spec!r}; use 'accept-all' or 'load:THETA' (e.g. load:1.2)")

    @classmethod
    def _checked(cls, theta: float, spec) -> "Admission":
        if not (theta > 0 and np.isfinite(theta)):
            raise ConfigError(f"--admission: the load threshold must be a positive number, got {spec!r}")
        return cls(theta)


def policy(name: str | None = None, preemptive: bool = True, description: str = "", replace: bool = False,
           per_job: bool = False, state: dict | None = None, rowwise: bool = False):
    """Register a user policy: ``fn(jobs: JobView, now_s: float) -> keys`` (lower runs first),
    called back by the kernel at every step with the active jobs' columns (plain numpy, or a
    ``numba.njit`` function taking the same arguments). Example::

        @fastblox.policy("fewest-gpus-first")
        def fewest_gpus(jobs, now):
            return jobs.num_gpus * 1e9 + jobs.submit_s

    ``rowwise=True``: a promise that a job's key depends on its own row only (not on the other
    jobs) and the function does not read ``now_s`` (``jobs.num_gpus * 1e9 + jobs.submit_s`` is
    row-wise, ``jobs.attained_s / jobs.attained_s.max()`` is not). A waiting job's key then
    cannot move while it waits, and the run takes the sorted-queue path of the built-in
    ``las``/``srtf``: the function is called with the jobs that started waiting since the last
    step and the running ones, not with every active job (several times faster on a long
    queue; the same results for a function that keeps the promise, which is checked at the
    steps 1, 2, 4, 8, ... of a run: docs/policies.md).

    ``per_job=True``: ``fn(job, now_s) -> key`` or ``(rank, key)`` of ONE job (``job``'s fields
    are that job's numbers), compiled with numba into the simulation kernel: no Python per step
    (``fastblox.userpol``; docs/policies.md, *Write your own policy*).

    ``state={"name": (dtype, initial), ...}`` (per job only): columns the function keeps per job,
    ``fn(job, now_s, state)``, reading and writing ``state.name``; they are added to the per-job
    results. Such a function (and one returning ``(rank, key, wake_s)``) is also called when a
    job is launched, and again at the wake-up times it returns.
    """

    def deco(fn):
        pname = name or fn.__name__.replace("_", "-")
        desc = description or (fn.__doc__ or "").strip()
        if per_job:
            from .userpol import make_policy

            pol = make_policy(pname, fn, preemptive, desc, state=state)
        else:
            if state:
                raise ConfigError(f"policy {pname!r}: state= needs per_job=True (the function of one job keeps it)")
            pol = Policy(pname, enums.POL_CUSTOM, preemptive, True, desc, fn=fn, rowwise=_rowwise(pname, fn, rowwise))
        POLICIES.register(pname, pol, replace=replace)
        return fn

    return deco


def _rowwise(name: str, fn, rowwise: bool) -> bool:
    """``rowwise`` checked: a function that reads ``now`` cannot promise fixed keys while jobs wait."""
    if rowwise:
        from .userpol import reads_now

        if reads_now(fn):
            raise ConfigError(f"policy {name!r}: rowwise=True needs a key that does not read now (a waiting job's key "
                              "must not move while it waits); drop rowwise=True, or the use of now")
    return bool(rowwise)


def resolve_policy(spec) -> Policy:
    """A policy from a registered name, a :class:`Policy`, or a bare function (a user policy)."""
    if isinstance(spec, Policy):
        return spec
    if callable(spec):
        return Policy(getattr(spec, "__name__", "custom"), enums.POL_CUSTOM, True, True, "user policy", fn=spec)
    return POLICIES.get(spec)
