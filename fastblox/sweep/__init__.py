"""Parameter sweeps: a grid of run configurations, run resumably on a choice of executors.

``load_config(path_or_dict)`` validates a sweep config; ``run_sweep(config, out_dir, executor=...)``
runs it and returns a :class:`SweepResult`. See ``docs/sweeps.md``. ``run_search(config, out_dir)``
finds the best values of knobs for an objective (random search or Optuna's TPE) on the same
executors and returns a :class:`SearchResult`; see ``docs/search.md``.
"""

from ..errors import SweepBusyError

__all__ = ["run_sweep", "load_config", "SweepResult", "SweepInterrupted", "SweepBusyError", "SweepConfig",
           "Point", "run_search", "load_search_config", "SearchResult", "SearchInterrupted", "SearchConfig"]

# imported on first use: ``fastblox``'s parser adds the sweep command (``sweep.cli``) at every
# start, and a run that is no sweep never needs the executors (multiprocessing, thread pools)
_LAZY = {"Point": "config", "SweepConfig": "config", "load_config": "config",
         "SweepInterrupted": "run", "SweepResult": "run", "run_sweep": "run",
         "run_search": "search", "SearchResult": "search", "SearchInterrupted": "search",
         "load_search_config": "search_config", "SearchConfig": "search_config"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
