"""fastblox: a vectorized, numba-compiled trace-replay engine for deep-learning cluster schedulers.

    import fastblox
    w = fastblox.blox_paper_workload(load=6, num_jobs=4000)
    res = fastblox.simulate(w, cluster="32x4", policy="las", time_model="rounds")
    res.summary["avg_jct_s"], res.jobs   # a dict and a polars DataFrame
"""

__version__ = "0.1.0"


def _source_checkout_subpackages() -> None:
    """An install puts ``kernels/`` and ``datasets/`` inside the package (``fastblox.kernels``,
    ``fastblox.datasets``: pyproject's package-dir). In a source checkout they sit beside it, and
    Python finds this folder first when it runs from the checkout's root (``python -m fastblox.cli``
    puts the working folder first on ``sys.path``): the checkout's root then joins this package's
    search path, so that they import under the same names. They never import as ``kernels``."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if not os.path.isdir(os.path.join(here, "kernels")) and os.path.isfile(os.path.join(root, "kernels", "__init__.py")):
        __path__.append(root)


_source_checkout_subpackages()

from .cluster import Cluster
from .dynamic import simulate_dynamic
from .engine import DriveCode, prepare_native, simulate, simulate_blox_workload
from .errors import ConfigError, FastbloxError, NoProgressError, SimulationError, TraceError, WorkloadError
from .generators import blox_paper_workload, gavel_like_workload
from .parts import POLICIES, PLACEMENTS, Admission, JobView, Policy, policy
from . import policies as _policies  # noqa: F401  (registers Tiresias, Themis, Gavel, Optimus)
from .results import Result
from .runner import run_spec
from .spec import RunSpec
from .workload import Workload

__all__ = [
    "Admission", "Cluster", "ConfigError", "DriveCode", "FastbloxError", "JobView", "NoProgressError", "PLACEMENTS", "POLICIES", "Policy",
    "Result", "RunSpec", "SimulationError", "TraceError", "Workload", "WorkloadError", "blox_paper_workload",
    "gavel_like_workload", "policy", "prepare_native", "run_spec", "simulate", "simulate_blox_workload", "simulate_dynamic",
]

#: subpackages loaded on first use (``fastblox.datasets.load_sample()``), not at import: start-up
#: stays small for a run that needs none of them
_LAZY_SUBMODULES = ("datasets", "traces", "plots", "report", "sweep", "experiments", "throughput")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'fastblox' has no attribute {name!r}")
