"""Kernel variants: a native kernel compiled for one policy and one placement.

The native driver (``kernels.engine._advance``) takes a marker as its first argument whose numba
*type* says which code it runs: its scheduling path (``queue``, ``static``, ``full``, ``plan``)
and, when known, the run's built-in policy and placement. numba compiles one kernel per marker
type, and the overloads that dispatch on it (``engine.policy_key``, ``walk.fit_by``,
``engine.next_wake``...) compile only the code that policy and placement use: a FIFO run on
first-fit does not compile Tiresias' queues and wake-ups, the other policies' keys or the other
four placements. On an empty cache that is about a third of the default run's compile time
(``docs/performance.md``, *Compile time*). A marker that leaves the policy or the placement open
(``ANY``) compiles all of them with a choice at run time: the *generic* kernel of the path.

``FASTBLOX_KERNELS=generic`` makes every run use the generic kernel of its path (one kernel for all
policies and placements of a path: fewer compiles for a process that runs many combinations, as
the test suite does). A generic kernel is also compiled with node events' handling, which a run
without node events passes empty (a specialized kernel gets None instead and compiles none of it),
so that runs with and without failures share it. The default, ``specialized``, compiles a kernel
per policy and placement on first use. Results are the same either way, to the byte.

Markers are instances of small NamedTuple classes, one per variant, made on first use and
reachable as attributes of this module (numba's on-disk cache pickles the classes by name).
"""

from __future__ import annotations

import collections
import os

import numpy as np

#: a variant's policy or placement left open: chosen at run time from ``ci``
ANY = -1
PATH_NAMES = ("queue", "static", "full", "plan")
#: the paths whose kernels may be specialized on the policy (a ``full`` or ``plan`` kernel re-keys
#: every job through the policy's own keys function or a plan from Python: one per path)
POLICY_PATHS = ("queue", "static")
KERNELS_ENV = "FASTBLOX_KERNELS"
KERNEL_CHOICES = ("specialized", "generic")


def kernels_choice() -> str:
    """``FASTBLOX_KERNELS``: ``specialized`` (default) or ``generic``; anything else is an error
    naming the variable."""
    v = os.environ.get(KERNELS_ENV, "") or KERNEL_CHOICES[0]
    if v not in KERNEL_CHOICES:
        from fastblox.errors import ConfigError

        raise ConfigError(f"environment variable {KERNELS_ENV}={v!r}: expected one of {', '.join(KERNEL_CHOICES)}")
    return v


def _class(name: str, **attrs):
    cls = collections.namedtuple(name, ["v"])
    cls.__module__ = __name__
    for k, v in attrs.items():
        setattr(cls, k, v)
    globals()[name] = cls
    return cls


def _code_name(code: int) -> str:
    return "x" if code == ANY else str(int(code))


def variant_name(path: str, policy: int = ANY, placement: int = ANY) -> str:
    """The class name of a variant: ``V_<path>_<policy code or x>_<placement code or x>``."""
    return f"V_{path}_{_code_name(policy)}_{_code_name(placement)}"


_MARKERS: dict = {}


def marker(path: str, policy: int = ANY, placement: int = ANY):
    """The marker of a variant (one instance per variant)."""
    key = (path, int(policy), int(placement))
    m = _MARKERS.get(key)
    if m is None:
        if path not in PATH_NAMES:
            raise ValueError(f"unknown kernel path {path!r}")
        cls = globals().get(variant_name(*key)) or _class(variant_name(*key), path=path, policy=key[1],
                                                            placement=key[2])
        m = _MARKERS[key] = cls(np.int8(0))
    return m


def is_generic(m) -> bool:
    """Whether variant marker ``m`` leaves both its policy and its placement open (its path's
    generic kernel)."""
    return type(m).policy == ANY and type(m).placement == ANY


def marker_named(name: str):
    """The marker of the variant whose :func:`variant_name` (or bare path name) is ``name``."""
    if name in PATH_NAMES:
        return marker(name)
    _, path, pol, pl = name.split("_")
    return marker(path, ANY if pol == "x" else int(pol), ANY if pl == "x" else int(pl))


def _code_class(prefix: str, code: int, attr: str):
    name = f"{prefix}{int(code)}"
    return globals().get(name) or _class(name, **{attr: int(code)})


def policy_class(code: int):
    """The marker class of built-in policy ``code`` inside a specialized kernel."""
    return _code_class("Pol", code, "policy_code")


def placement_class(code: int):
    """The marker class of placement ``code`` inside a specialized kernel."""
    return _code_class("Pl", code, "placement_code")


def info(typ):
    """``(path, policy, placement)`` of a variant marker's numba type, else None."""
    cls = getattr(typ, "instance_class", None)
    if cls is None or getattr(cls, "__module__", None) != __name__ or not hasattr(cls, "path"):
        return None
    return cls.path, cls.policy, cls.placement


def fixed_code(typ, attr: str):
    """The code a policy (``attr="policy_code"``) or placement (``"placement_code"``) marker's
    numba type stands for, or None for a plain integer (chosen at run time)."""
    cls = getattr(typ, "instance_class", None)
    return getattr(cls, attr, None) if cls is not None and getattr(cls, "__module__", None) == __name__ else None


def __getattr__(name: str):
    """Variant and code classes by name, made on demand (unpickling a cached kernel's signature)."""
    parts = name.split("_")
    if name.startswith("V_") and len(parts) == 4:
        return type(marker_named(name))
    if name.startswith("Pol") and name[3:].isdigit():
        return policy_class(int(name[3:]))
    if name.startswith("Pl") and name[2:].isdigit():
        return placement_class(int(name[2:]))
    raise AttributeError(name)
