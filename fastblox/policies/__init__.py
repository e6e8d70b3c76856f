"""The built-in scheduling policies, one file each.

A policy's file holds its rule (the module docstring), its kernel key function and its
registration in ``fastblox.parts.POLICIES``. The simple orderings (``fifo``, ``las``,
``las-gpu``, ``srtf``, ``sjf``) are a key function of one job; Tiresias keeps multi-level
queues (``tiresias``, ``tiresias-gittins``), Themis orders all active jobs at once, and Gavel
and Optimus are planners solved in Python. docs/policies.md says how to add one.

``PREPARE`` maps a policy name to a function ``(options, workload, speed_model) -> options``
that derives what a policy needs from the workload before a run (e.g. the Gittins index table).
"""

from __future__ import annotations

from pathlib import Path

PREPARE: dict = {}

_HERE = Path(__file__).resolve().parent


def is_builtin(fn) -> bool:
    """Whether a (jitted) key function is defined in a file of this package: only those are
    compiled into the kernels, whose cache digest covers these files."""
    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    return code is not None and Path(code.co_filename).resolve().parent == _HERE


# the registry: one line per built-in policy (each module registers itself when imported)
from . import fifo  # noqa: E402,F401
from . import las  # noqa: E402,F401
from . import las_gpu  # noqa: E402,F401
from . import srtf  # noqa: E402,F401
from . import sjf  # noqa: E402,F401
from . import tiresias  # noqa: E402,F401
from . import themis  # noqa: E402,F401
from . import gavel  # noqa: E402,F401
from . import optimus  # noqa: E402,F401
