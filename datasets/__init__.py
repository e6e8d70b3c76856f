"""Small sample traces bundled with fastblox (package data, not a library of its own).

``load_sample()`` reads ``philly_sample.csv.gz``: the first 2,000 usable jobs of the Microsoft
Philly trace (CC BY 4.0; see README.md for sources and licenses). ``sample_path(name)`` gives the
path of any bundled file.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

SAMPLES = {
    "philly": "philly_sample.csv.gz",
    "philly-log": "philly_cluster_job_log_sample.json",
    "helios": "helios_sample.csv",
    "pai-2020": "pai_job_table_sample.csv",
    "swf": "hpc_sample.swf",
    "pollux-workload-6": "pollux/workload-6.csv",
    "synergy-200": "synergy/traces/synth_200job_multigpu.csv",
}


def sample_path(name: str = "philly") -> Path:
    """Path of a bundled sample, by short name (see :data:`SAMPLES`) or file name."""
    from ..errors import ConfigError

    fname = SAMPLES.get(name, name)
    p = HERE / fname
    if not p.is_file():
        raise ConfigError(f"no bundled sample {name!r}; choose one of: {', '.join(SAMPLES)}")
    return p


def load_sample(name: str = "philly", **kw):
    """The bundled sample as a Workload (``philly``: 2,000 Philly jobs, all valid)."""
    from ..traces import read_trace

    w = read_trace(sample_path(name), **kw)
    return w
