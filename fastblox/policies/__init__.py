"""The built-in scheduling policies, one file each.

A policy's file holds its rule (the module docstring), its kernel key function and its
registration in ``fastblox.parts.POLICIES``. The simple orderings (``fifo``, ``las``,
``las-gpu``, ``srtf``, ``sjf``) are a key function of one job; Tiresias keeps multi-level
queues (``tiresias``, ``tiresias-gittins``), Themis orders all active jobs at once, and Gavel,
Optimus and Sia are planners solved in Python. docs/policies.md says how to add one.

``PREPARE`` maps a policy name to a function ``(options, workload, speed_model) -> options``
that derives what a policy needs from the workload before a run (e.g. the Gittins index table).
"""

from __future__ import annotations

PREPARE: dict = {}


def is_builtin(fn) -> bool:
    """Whether a (jitted) key function is defined in a file the kernel cache's digest covers
    (this package's, or ``kernels/``): only those are compiled into the kernels."""
    from ..kernels._jit import is_source

    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    return code is not None and is_source(code.co_filename)


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
from . import sia  # noqa: E402,F401
