"""A whole run from a :class:`fastblox.RunSpec`: build its workload, run it, return the result.

``fastblox run`` and every sweep point go through :func:`run_spec`, so a spec means the same
run wherever it is given (the same jobs dropped, the same generator arguments, the same track).
"""

from __future__ import annotations

from .errors import ConfigError
from .spec import ELASTIC_POLICIES, RunSpec


def workload_key(r: RunSpec) -> dict:
    """What building the workload of a resolved spec depends on (JSON-able; a cache key), with
    ``num_jobs`` None for Blox's endless stream."""
    kind = r.workload
    if kind == "trace" and r.compat in ("pollux", "sia"):  # (a Pollux workload: its jobs' applications and batch sizes)
        key = {"kind": "pollux-trace", "path": r.trace}
    elif kind == "trace" and r.compat is None and r.policy in ELASTIC_POLICIES and r.format is None:
        key = {"kind": "elastic-trace", "path": r.trace}  # (elastic and rigid rows: fastblox.mixed.read_any)
    elif kind == "trace":  # (--compat synergy: a Synergy trace, its jobs' models and iterations, or any trace)
        key = {"kind": "synergy-trace" if r.compat == "synergy" else "trace", "path": r.trace, "format": r.format,
               "on_bad_rows": r.on_bad_rows}
        if r.on_bad_rows == "drop":
            key["max_gpus"] = drop_limit(r.cluster)
    else:
        key = {"kind": kind, "num_jobs": r.num_jobs, "seed": r.seed}
        if kind in ("blox", "gavel") and r.load is not None:
            key["load"] = r.load
    if r.target_load is not None:
        from .cluster import Cluster

        key.update(target_load=r.target_load, gpus=Cluster.parse(r.cluster).total_gpus)
    return key


def drop_limit(cluster) -> int:
    """With ``on_bad_rows = "drop"``: the largest job kept, the most GPUs one job can hold on
    ``cluster`` (all the GPUs of its largest type: a gang never mixes types)."""
    from .cluster import Cluster

    return Cluster.parse(cluster).largest_gang()


def build_workload(key: dict):
    """The workload of :func:`workload_key`'s ``key`` (Blox's stream: ``num_jobs`` must be set)."""
    w = _source_workload(key)
    return w if key.get("target_load") is None else w.at_offered_load(key["target_load"], key["gpus"])


def _source_workload(key: dict):
    kind = key["kind"]
    if kind == "trace":
        from .traces import read_trace

        return read_trace(key["path"], format=key["format"], on_bad_rows=key["on_bad_rows"],
                          max_gpus=key.get("max_gpus"))
    if kind == "pollux-trace":
        from .compat_pollux import read_workload

        return read_workload(key["path"])
    if kind == "elastic-trace":
        from .mixed import read_any

        return read_any(key["path"])
    if kind == "synergy-trace":
        from .compat_synergy import read_any

        return read_any(key["path"], format=key["format"], on_bad_rows=key["on_bad_rows"],
                        max_gpus=key.get("max_gpus"))
    if kind == "blox":
        from .generators import blox_paper_workload

        return blox_paper_workload(key["load"], key["num_jobs"], key["seed"])
    if kind == "gavel":
        from .generators import gavel_like_workload

        if key.get("load") is not None:
            return gavel_like_workload(key["num_jobs"], mean_interarrival_s=3600.0 / key["load"], seed=key["seed"])
        return gavel_like_workload(key["num_jobs"], seed=key["seed"])
    if kind == "sample":
        from .datasets import load_sample

        w = load_sample()
        return w.head(key["num_jobs"]) if key["num_jobs"] else w
    raise ConfigError(f"unknown workload kind {kind!r}")


def run_spec(spec: RunSpec, get_workload=build_workload, runner=None, margin_s: float = 0.0):
    """Build the workload of ``spec`` and run it (``runner(workload, spec)``, default
    :func:`fastblox.simulate`); ``get_workload`` may cache workloads by key.

    Blox's endless stream (``workload = "blox"`` without ``num_jobs``) is emulated by
    :func:`fastblox.engine.endless_stream` (``margin_s``: how far past the end the stream must
    reach, for look-ahead that sees arrivals); a ``runner`` of its own runs each prefix whole
    (it takes no limits)."""
    from .engine import endless_stream, simulate

    r = spec.resolved()
    key = workload_key(r)
    if not (key["kind"] == "blox" and key["num_jobs"] is None):
        return (runner or simulate)(get_workload(key), r)

    def run(w, **lim):
        if runner is not None:
            return runner(w, r)
        res = simulate(w, r.replace(max_jobs=None, **lim))  # max_jobs: the jobs generated, not arrivals
        res.config.update(max_sim_time=r.max_sim_time, max_jobs=r.max_jobs, max_wall=r.max_wall)
        return res

    return endless_stream(lambda n: get_workload({**key, "num_jobs": n}), run, r.track, r.limits(), margin=margin_s,
                          can_stop=runner is None, what=f"load {r.load:g} jobs/h")
