"""fastblox: a vectorized, numba-compiled trace-replay engine for deep-learning cluster schedulers.

    import fastblox
    w = fastblox.blox_paper_workload(load=6, num_jobs=4000)
    res = fastblox.simulate(w, cluster="32x4", policy="las", time_model="rounds")
    res.summary["avg_jct_s"], res.jobs   # a dict and a polars DataFrame
"""

__version__ = "0.1.0"

from .cluster import Cluster
from .dynamic import simulate_dynamic
from .engine import prepare_native, simulate, simulate_blox_workload
from .errors import ConfigError, FastbloxError, NoProgressError, SimulationError, TraceError, WorkloadError
from .generators import blox_paper_workload, gavel_like_workload
from .parts import POLICIES, PLACEMENTS, Admission, JobView, Policy, policy
from . import policies as _policies  # noqa: F401  (registers Tiresias, Themis, Gavel, Optimus)
from .results import Result
from .runner import run_spec
from .spec import RunSpec
from .workload import Workload

__all__ = [
    "Admission", "Cluster", "ConfigError", "FastbloxError", "JobView", "NoProgressError", "PLACEMENTS", "POLICIES", "Policy",
    "Result", "RunSpec", "SimulationError", "TraceError", "Workload", "WorkloadError", "blox_paper_workload",
    "gavel_like_workload", "policy", "prepare_native", "run_spec", "simulate", "simulate_blox_workload", "simulate_dynamic",
]
