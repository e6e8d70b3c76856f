"""The run specification: every option of fastblox.RunSpec is accepted identically by the
command line, the API and sweeps (same value, same result bytes), and the drift bugs of the
options' earlier copies stay fixed."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import fastblox
import fastblox.datasets
from fastblox.cli import main
from fastblox.errors import ConfigError
from fastblox.runner import drop_limit, workload_key
from fastblox.spec import BLOX_DEFAULT_TRACK, RunSpec, flag
from fastblox.sweep import run_sweep

MIXED = "v100:2x4,k80:2x4"
EVENTS_CSV = "time_s,event,node\n2000,fail,1\n9000,recover,1\n"

#: per option: the settings of one run (the option at a non-default value, plus what it needs)
EXAMPLES = {
    "cluster": {"cluster": MIXED},
    "policy": {"policy": "las"},
    "placement": {"placement": "consolidated"},
    "admission": {"admission": "load:1.2"},
    "time_model": {"time_model": "rounds"},
    "round_s": {"time_model": "rounds", "round_s": 120.0},
    "restart_s": {"policy": "las", "restart_s": 30.0},
    "preempt": {"preempt": True},
    "policy_opts": {"policy": "themis", "policy_opts": {"f": "0.5"}},
    "track": {"track": (5, 20)},
    "compat": {"compat": "tiresias", "policy": "dlas-gpu"},
    "record_series": {"record_series": True},
    "throughput": {"cluster": "v100:4x4", "throughput": "gavel"},
    "reference_gpu": {"cluster": MIXED, "reference_gpu": "k80"},
    "checkpoint_s": {"policy": "las", "checkpoint_s": 100.0},
    "multi_node_factor": {"multi_node_factor": 0.7},
    "rack_factor": {"cluster": "4x4@2", "rack_factor": 0.5},
    "placement_effects": {"placement_effects": False},
    "cluster_events": {"cluster_events": "EVENTS"},
    "failures": {"failures": "500:2"},
    "max_sim_time": {"policy": "las", "max_sim_time": 20000.0},
    "max_jobs": {"max_jobs": 25},
    "max_wall": {"max_wall": 3600.0},
}
#: the workload source: not keywords of simulate (it is given a workload), compared CLI vs sweep
SOURCE_EXAMPLES = {
    "workload": {"workload": "gavel", "num_jobs": 30},
    "trace": {"trace": "TRACE"},
    "format": {"trace": "TRACE", "format": "normalized"},
    "on_bad_rows": {"trace": "TRACE", "on_bad_rows": "drop"},
    "load": {"workload": "gavel", "num_jobs": 30, "load": 20.0},
    "num_jobs": {"workload": "sample", "num_jobs": 25},
    "seed": {"workload": "gavel", "num_jobs": 30, "seed": 3},
    "target_load": {"trace": "TRACE", "target_load": 2.5},
}


def _files(tmp_path: Path) -> dict:
    w = fastblox.gavel_like_workload(40, seed=1)
    trace = tmp_path / "jobs.csv"
    pl.DataFrame({"job_id": w.job_id, "submit_time_s": w.submit_s, "duration_s": w.duration_s,
                  "num_gpus": w.num_gpus, "model": w.extra["model"]}).write_csv(trace)
    ev = tmp_path / "events.csv"
    ev.write_text(EVENTS_CSV)
    return {"TRACE": str(trace), "EVENTS": str(ev)}


def _fill(settings: dict, files: dict) -> dict:
    return {k: files.get(v, v) if isinstance(v, str) else v for k, v in settings.items()}


def _argv(settings: dict) -> list:
    argv = []
    for k, v in settings.items():
        if k == "policy_opts":
            argv += [x for kk, vv in v.items() for x in ("--policy-opt", f"{kk}={vv}")]
        elif k == "placement_effects":
            argv += [] if v else ["--no-placement-effects"]
        elif isinstance(v, bool):
            argv += [flag(k)] if v else []
        elif isinstance(v, tuple):
            argv += [flag(k), f"{v[0]}:{v[1]}"]
        else:
            argv += [flag(k), str(v)]
    return argv


def _parquet(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


#: options of a peer simulator's replay (its own workload CSV): compared CLI vs API by their own tests
PEER_EXAMPLES = {"sia_profiles": "tests/test_compat_sia.py::test_sia_profiles_cli_equals_api"}


def test_every_option_has_an_example():
    names = {f.name for f in dataclasses.fields(RunSpec)}
    assert names == set(EXAMPLES) | set(SOURCE_EXAMPLES) | set(PEER_EXAMPLES), \
        "a new RunSpec option needs an example here"


def _cli_jobs(argv: list, out: Path) -> bytes:
    assert main(["run", *argv, "--out", str(out)]) in (0, 3)  # 3: a limit ended the run (written all the same)
    return (out / "jobs.parquet").read_bytes()


def _sweep_jobs(cases: list, out: Path) -> list:
    cases = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in c.items()} for c in cases]
    res = run_sweep({"grid": {"cases": cases}}, out, executor="serial", progress=False)
    assert not res.errors, res.errors
    by_id = {p.id: p for p in res.config.points} if hasattr(res, "config") else None
    frames = []
    for c in cases:
        from fastblox.sweep.config import load_config

        pid = load_config({"base": c}).points[0].id
        frames.append(pl.read_parquet(out / "points" / f"{pid}.parquet"))
    del by_id
    return frames


def test_every_option_means_the_same_in_cli_api_and_sweep(tmp_path, capsys):
    files = _files(tmp_path)
    from fastblox.traces import read_trace

    w = read_trace(files["TRACE"])
    cases = [{"trace": files["TRACE"], **_fill(s, files)} for s in EXAMPLES.values()]
    sweep = _sweep_jobs(cases, tmp_path / "sweep")
    for (name, settings), case, swept in zip(EXAMPLES.items(), cases, sweep):
        s = _fill(settings, files)
        api = fastblox.simulate(w, **s)
        api_bytes = _parquet(api.jobs)
        cli = _cli_jobs(["--trace", files["TRACE"], *_argv(s)], tmp_path / f"cli-{name}")
        api.write(tmp_path / f"api-{name}")
        assert cli == (tmp_path / f"api-{name}" / "jobs.parquet").read_bytes(), name
        assert _parquet(swept.select(api.jobs.columns)) == api_bytes, name
        cfg = json.loads((tmp_path / f"cli-{name}" / "summary.json").read_text())["config"]
        for k, v in api.config.items():
            if RunSpec.__dataclass_fields__[k].metadata["api"]:
                assert cfg[k] == v, (name, k)
    capsys.readouterr()


def test_every_source_option_means_the_same_in_cli_and_sweep(tmp_path, capsys):
    files = _files(tmp_path)
    cases = [_fill(s, files) for s in SOURCE_EXAMPLES.values()]
    sweep = _sweep_jobs(cases, tmp_path / "sweep")
    for (name, _), case, swept in zip(SOURCE_EXAMPLES.items(), cases, sweep):
        direct = fastblox.run_spec(RunSpec(**case))
        cli = _cli_jobs(_argv(case), tmp_path / f"cli-{name}")
        direct.write(tmp_path / f"direct-{name}")
        assert cli == (tmp_path / f"direct-{name}" / "jobs.parquet").read_bytes(), name
        assert _parquet(swept.select(direct.jobs.columns)) == _parquet(direct.jobs), name
    capsys.readouterr()


# ----------------------------------------------------------------------------- drift regressions
def test_bad_rows_dropped_alike_on_a_mixed_cluster(tmp_path, capsys):
    """A job above the largest GPU type (8) but within the total (16) is dropped by the CLI and
    by sweeps alike (sweeps used to keep it, then fail)."""
    p = tmp_path / "big.csv"
    p.write_text("job_id,submit_time_s,duration_s,num_gpus\n0,0,100,1\n1,5,100,12\n2,9,100,8\n")
    spec = RunSpec(trace=str(p), on_bad_rows="drop", cluster=MIXED).resolved()
    assert drop_limit(MIXED) == 8 and workload_key(spec)["max_gpus"] == 8
    cli = _cli_jobs(["--trace", str(p), "--on-bad-rows", "drop", "--cluster", MIXED], tmp_path / "cli")
    (swept,) = _sweep_jobs([{"trace": str(p), "on_bad_rows": "drop", "cluster": MIXED}], tmp_path / "sweep")
    assert pl.read_parquet(io.BytesIO(cli))["job_id"].to_list() == [0, 2] == swept["job_id"].to_list()
    capsys.readouterr()


def test_cli_honours_load_of_the_gavel_generator(tmp_path, capsys):
    slow = _cli_jobs(["--workload", "gavel", "--num-jobs", "30", "--load", "2"], tmp_path / "a")
    fast = _cli_jobs(["--workload", "gavel", "--num-jobs", "30", "--load", "40"], tmp_path / "b")
    sub = lambda b: pl.read_parquet(io.BytesIO(b))["submit_s"].max()  # noqa: E731
    assert sub(slow) > 10 * sub(fast)
    capsys.readouterr()


def test_failures_with_a_finite_blox_workload(tmp_path, capsys):
    assert main(["run", "--workload", "blox", "--num-jobs", "200", "--failures", "50:2", "--out",
                 str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["config"]["failures"] == [50 * 3600.0, 2 * 3600.0] and s["summary"]["cluster_events"]
    assert main(["run", "--workload", "blox", "--failures", "50:2"]) == 2
    assert "--num-jobs N with --workload blox" in capsys.readouterr().err


def test_blox_default_track_is_declared_once():
    src = Path(fastblox.__file__).parent
    hits = [p for p in src.rglob("*.py") if "3000, 4000)" in p.read_text()]
    assert [p.name for p in hits] == ["spec.py"]
    assert RunSpec().resolved().track == BLOX_DEFAULT_TRACK
    assert RunSpec(num_jobs=100).resolved().track is None


def test_one_name_for_the_policy(tmp_path, capsys):
    w = fastblox.gavel_like_workload(20, seed=0)
    assert fastblox.simulate(w, policy="las").config["policy"] == "las"
    old_name = {"scheduler": "las"}  # the keyword's old name
    with pytest.warns(DeprecationWarning, match="'scheduler' is now called 'policy'"):
        assert fastblox.simulate(w, **old_name).config["policy"] == "las"
    (swept,) = _sweep_jobs([{"workload": "gavel", "num_jobs": 20, "policy": "las"}], tmp_path / "s")
    assert "policy" in swept.columns and "scheduler" not in swept.columns
    capsys.readouterr()


@pytest.mark.parametrize("kw,needle", [
    ({"restart_s": "30"}, "--restart-s: expected a number, got '30'"),
    ({"track": "0:10x"}, "--track: expected FIRST:LAST"),
    ({"track": (-5, 3)}, "--track: job ids are not negative"),
    ({"polcy": "las"}, "unknown option 'polcy' (did you mean 'policy'?)"),
    ({"load": 3.0}, "describes where the jobs come from"),
    ({"policy": "lass"}, "did you mean 'las'?"),
    ({"multi_node_factor": 1.5}, "--multi-node-factor: a speed multiplier in (0, 1]"),
])
def test_api_refuses_bad_values_naming_the_option(kw, needle):
    w = fastblox.gavel_like_workload(5, seed=0)
    with pytest.raises(ConfigError) as e:
        fastblox.simulate(w, **kw)
    assert needle in str(e.value)


def test_signature_is_generated_from_the_spec():
    import inspect

    params = inspect.signature(fastblox.simulate).parameters
    api = [f.name for f in dataclasses.fields(RunSpec) if f.metadata["api"]]
    assert list(params)[2:] == api
    assert params["restart_s"].default is None and params["policy"].default == "fifo"  # (None: the engine's, 0 or 30)


def test_target_load_rescales_arrivals_to_the_asked_load(tmp_path):
    """--target-load X: the run's summary reports X on its cluster; durations and order are kept,
    arrivals are stretched about the first one; a generated workload refuses it (it has --load)."""
    from fastblox.runner import run_spec

    base = fastblox.datasets.load_sample().head(300)
    for x in (0.5, 3.0):
        res = run_spec(RunSpec(workload="sample", num_jobs=300, cluster="8x8", target_load=x))
        assert res.summary["offered_load"] == pytest.approx(x, rel=1e-12)
        jobs = res.jobs.sort("job_id")
        assert np.array_equal(jobs["duration_s"].to_numpy(), base.duration_s[np.argsort(base.job_id)])
    w = base.at_offered_load(1.0, 64)
    gaps = np.diff(w.submit_s) / np.where(np.diff(base.submit_s) > 0, np.diff(base.submit_s), 1)
    assert np.allclose(gaps[np.diff(base.submit_s) > 0], base.offered_load(64) / 1.0)
    with pytest.raises(ConfigError, match="--target-load: .*--load JOBS_PER_HOUR"):
        RunSpec(workload="gavel", target_load=1.0).resolved()
    with pytest.raises(ConfigError, match="--target-load: .*smallest supported"):
        RunSpec(workload="sample", target_load=1e-9).resolved()


def test_no_run_option_shares_a_name_with_a_summary_figure():
    """A sweep's summary row holds the run options and the summary figures side by side, a figure
    replacing an option of its name: only options whose figure is their resolved value may share
    it (``num_jobs``: the jobs generated; ``reference_gpu``: the type used). An option named like
    another figure (say ``offered_load`` for ``--target-load``) would hide what it asked for."""
    from fastblox.sweep.config import PARAM_KEYS

    res = fastblox.simulate(fastblox.gavel_like_workload(20, seed=0), cluster="4x4", record_series=True)
    clash = set(PARAM_KEYS) & {k for k, v in res.summary.items() if not isinstance(v, dict)}
    assert clash <= {"num_jobs", "reference_gpu"}


#: a run of each engine but the native one (``resolved(source=False)``: no workload needed)
ENGINE_BASES = {"blox": dict(compat="blox"), "tiresias": dict(compat="tiresias", policy="dlas-gpu"),
                "gavel": dict(compat="gavel", policy="fifo", cluster="36:0:0"),
                "pollux": dict(compat="pollux", policy="pollux"), "synergy": dict(compat="synergy", policy="fifo"),
                "sia": dict(compat="sia", policy="sia", cluster="aws:4x4,rtx:2x4"), "elastic": dict(policy="pollux")}


@pytest.mark.parametrize("engine", list(ENGINE_BASES))
def test_engines_table_says_what_each_engine_refuses(engine):
    """Every option without an x in an engine's column of the engines table is refused by that
    engine at its example's value, with a one-line error naming the option's flag."""
    from fastblox.spec import OptionError, api_fields

    base = ENGINE_BASES[engine]
    RunSpec(**base).resolved(source=False)  # the base itself runs
    without_x = [f.name for f in api_fields() if engine not in f.metadata["engines"]]
    assert without_x
    for name in without_x:
        v = "/tmp" if name == "sia_profiles" else EXAMPLES[name][name]
        with pytest.raises(OptionError) as e:
            RunSpec(**{**base, name: v}).resolved(source=False)
        assert e.value.option == name and str(e.value).startswith(flag(name) + ":") and "\n" not in str(e.value)


def test_docs_hold_the_engines_table():
    import re

    from fastblox.spec import engines_table

    text = (Path(__file__).resolve().parents[1] / "docs" / "running.md").read_text()
    block = re.search(r"<!-- spec:engines:start -->\n(.*?)\n<!-- spec:engines:end -->", text, re.S)
    assert block and block.group(1) == engines_table(), \
        "docs/running.md's engines table differs from the options' declarations: paste `fastblox parts`'s table"
