"""Parameter sweeps: a grid of run configurations, run resumably on a choice of executors.

``load_config(path_or_dict)`` validates a sweep config; ``run_sweep(config, out_dir, executor=...)``
runs it and returns a :class:`SweepResult`. See ``docs/sweeps.md``.
"""

from ..errors import SweepBusyError
from .config import Point, SweepConfig, load_config
from .run import SweepInterrupted, SweepResult, run_sweep

__all__ = ["run_sweep", "load_config", "SweepResult", "SweepInterrupted", "SweepBusyError", "SweepConfig",
           "Point"]
