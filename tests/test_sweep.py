"""fastblox.sweep: config validation, executors giving identical bytes, resume, kill, failures, CLI."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import need_shared

import fastblox
from fastblox.errors import ConfigError
from fastblox.sweep import SweepResult, load_config, run_sweep
from fastblox.sweep.cli import add_sweep_commands

ROOT = Path(__file__).resolve().parents[1]
BLOX = {"base": {"workload": "blox", "num_jobs": 300}, "grid": {"policy": ["fifo", "las"], "load": [4, 8]}}
# gavel-like jobs ask for up to 8 GPUs: the 1x4 cluster cannot run them
GAVEL = {"base": {"workload": "gavel", "num_jobs": 300, "restart_s": 30},
         "grid": {"policy": ["srtf", "las-gpu"], "cluster": ["8x4", "4x8"]}}


def _files(out: Path) -> dict:
    """Every data file of a sweep, as comparable values: Parquet bytes for the per-job tables, the
    JSON (minus sim_wall_s) for point documents, the frame (minus sim_wall_s) for summary.parquet."""
    got = {}
    for p in sorted((out / "points").iterdir()):
        if p.suffix == ".parquet":
            got[p.name] = p.read_bytes()
        else:
            doc = json.loads(p.read_text())
            doc["summary"].pop("sim_wall_s")
            got[p.name] = doc
    got["summary"] = pl.read_parquet(out / "summary.parquet").drop("sim_wall_s")
    got["errors"] = (out / "errors.json").read_text()
    return got


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], pl.DataFrame):
            assert a[k].equals(b[k], null_equal=True), k
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("cfg", [BLOX, GAVEL], ids=["blox", "gavel"])
def test_executors_give_identical_results(tmp_path, cfg):
    outs = {}
    for ex in ("serial", "threads", "local"):
        res = run_sweep(cfg, tmp_path / ex, executor=ex, workers=2, progress=False)
        assert isinstance(res, SweepResult) and res.ok and len(res.ran) == 4 == res.num_points
        assert res.summary["point_id"].to_list() == sorted(res.ran)
        outs[ex] = _files(tmp_path / ex)
    _same(outs["serial"], outs["threads"])
    _same(outs["serial"], outs["local"])
    # the per-job tables carry the point's parameters
    pid = sorted(res.ran)[0]
    jobs = pl.read_parquet(tmp_path / "serial" / "points" / f"{pid}.parquet")
    assert jobs.height == 300 and (jobs["point_id"] == pid).all()
    assert {"policy", "cluster", "seed", "jct_s"} <= set(jobs.columns)
    summ = pl.read_parquet(tmp_path / "serial" / "summary.parquet")
    assert summ.height == 4 and "avg_jct_s" in summ.columns and "compile_s" not in summ.columns


def test_points_match_plain_simulate(tmp_path):
    import fastblox

    res = run_sweep(BLOX, tmp_path, executor="serial", progress=False)
    row = res.summary.filter((pl.col("policy") == "las") & (pl.col("load") == 8.0)).row(0, named=True)
    direct = fastblox.simulate_blox_workload(8, num_jobs=300, track=None, policy="las")
    assert row["avg_jct_s"] == direct.summary["avg_jct_s"]
    jobs = pl.read_parquet(tmp_path / "points" / f"{row['point_id']}.parquet")
    assert jobs.select(direct.jobs.columns).equals(direct.jobs)


def test_resume_runs_only_missing_points(tmp_path):
    first = run_sweep(GAVEL, tmp_path, executor="serial", progress=False)
    assert len(first.ran) == 4
    victim = first.ran[1]
    for suffix in (".parquet", ".json"):
        (tmp_path / "points" / f"{victim}{suffix}").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "points").iterdir()}
    again = run_sweep(GAVEL, tmp_path, executor="threads", workers=2, progress=False)
    assert again.ran == [victim] and sorted(again.skipped) == sorted(set(first.ran) - {victim})
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "points").iterdir()}
    assert {k: v for k, v in after.items() if not k.startswith(victim)} == before
    assert again.summary.height == 4
    third = run_sweep(GAVEL, tmp_path, executor="serial", progress=False)
    assert third.ran == [] and len(third.skipped) == 4


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import fastblox.sweep.points as r
    from fastblox.sweep.run import run_sweep
    real = r._simulate_point
    def slow(point):
        res = real(point)
        time.sleep(0.25)
        return res
    r._simulate_point = slow
    run_sweep({cfg!r}, sys.argv[1], executor="serial", progress=False)
""")


def test_killed_sweep_resumes_to_the_same_result(tmp_path):
    cfg = {"base": {"workload": "gavel", "num_jobs": 200}, "grid": {"policy": ["fifo", "las", "srtf", "sjf"],
                                                                    "restart_s": [0, 60]}}
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT.format(cfg=cfg), str(out)])
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if (out / "points").exists() and any((out / "points").glob("*.json")):
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    done = [p for p in (out / "points").glob("*.json")]
    assert 0 < len(done) < 8, "the sweep should have been killed part-way"
    res = run_sweep(cfg, out, executor="serial", progress=False)
    assert len(res.skipped) == len(done) and len(res.ran) == 8 - len(done) and res.ok
    assert not [p for p in (out / "points").iterdir() if p.name.endswith(".tmp")]
    clean = tmp_path / "clean"
    run_sweep(cfg, clean, executor="serial", progress=False)
    _same(_files(out), _files(clean))


def test_failing_point_is_recorded_and_others_finish(tmp_path):
    cfg = {"base": {"workload": "gavel", "num_jobs": 200}, "grid": {"cluster": ["8x4", "1x4", "4x8"]}}
    res = run_sweep(cfg, tmp_path, executor="threads", workers=2, progress=False)
    assert len(res.ran) == 2 and len(res.errors) == 1
    (bad_id, err), = res.errors.items()
    assert err["params"]["cluster"] == "1x4" and err["type"] == "WorkloadError" and "GPUs" in err["error"]
    on_disk = json.loads((tmp_path / "errors.json").read_text())
    assert on_disk.keys() == {bad_id}
    assert not (tmp_path / "points" / f"{bad_id}.json").exists()
    assert res.summary.height == 2
    # the CLI reports the failure with exit code 1; the failed point is retried, the others skipped
    toml = tmp_path / "s.toml"
    toml.write_text('[base]\nworkload = "gavel"\nnum_jobs = 200\n[grid]\ncluster = ["8x4", "1x4", "4x8"]\n')
    ap = argparse.ArgumentParser()
    add_sweep_commands(ap.add_subparsers())
    a = ap.parse_args(["sweep", str(toml), "--out", str(tmp_path), "--executor", "serial"])
    assert a.func(a) == 1


@pytest.mark.parametrize("cfg, key", [
    ({"base": {"polcy": "las"}}, "polcy"),
    ({"bse": {}}, "bse"),
    ({"policy": ["las"]}, "policy"),
    ({"grid": {"policy": "las"}}, "[grid] policy"),
    ({"grid": {"policy": []}}, "[grid] policy"),
    ({"grid": {"policy": ["fifo", "nope"]}}, "[grid] policy"),
    ({"base": {"cluster": "32by4"}}, "[base] cluster"),
    ({"grid": {"placement": ["first-fit", "scatter"]}}, "[grid] placement"),
    ({"base": {"admission": "load:-1"}}, "[base] admission"),
    ({"base": {"restart_s": -5}}, "[base] restart_s"),
    ({"base": {"round_s": "300"}}, "[base] round_s"),
    ({"base": {"workload": "philly"}}, "[base] workload"),
    ({"base": {"trace": "no/such/file.csv"}}, "[base] trace"),
    ({"base": {"workload": "sample", "load": 3}}, "[base] load"),
    ({"base": {"workload": "gavel", "load": 0}}, "[base] load"),
    ({"grid": {"cases": {"cluster": "8x4"}}}, "[grid] cases"),
    ({"grid": {"cases": []}}, "[grid] cases"),
    ({"grid": {"cases": [{"cluster": "8x4"}, {"clustr": "4x8"}]}}, "[grid] cases[1] clustr"),
    ({"base": {"cluster": "8x4"}, "grid": {"cases": [{"cluster": "4x8"}]}}, "[grid] cases[0] cluster"),
    ({"grid": {"load": [1, 2], "cases": [{"load": 3}]}}, "[grid] cases[0] load"),
    ({"grid": {"cases": [{"cluster": "8x4"}, {"cluster": "8by4"}]}}, "[grid] cases[1] cluster"),
    ({"base": {"workload": "gavel", "num_jobs": 0}}, "[base] num_jobs"),
    ({"base": {"blox_compat": True, "policy": "las-gpu"}}, "[base] policy"),
    ({"base": {"blox_compat": True, "policy": "las-gpu"}}, "[base] policy"),
    ({"base": {"track": "10-20"}}, "[base] track"),
    ({"base": {"policy": "las"}, "grid": {"policy": ["fifo"]}}, "[grid] policy"),
    ({"seeds": [1, 1]}, "seeds"),
    ({"seeds": [1], "repeats": 2}, "repeats"),
    ({"repeats": 0}, "repeats"),
])
def test_bad_config_names_the_key(cfg, key):
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    assert key in str(e.value)


def test_bad_executor_and_missing_ray(tmp_path):
    with pytest.raises(ConfigError, match="executor"):
        run_sweep(BLOX, tmp_path, executor="dask")
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"pip install 'fastblox\[ray\]'"):
            run_sweep(BLOX, tmp_path, executor="ray")


def test_ids_seeds_and_repeats():
    a = load_config(BLOX)
    b = load_config({"base": BLOX["base"], "grid": {"load": [4, 8], "policy": ["fifo", "las"]}})
    assert sorted(p.id for p in a.points) == sorted(p.id for p in b.points)
    assert len({p.id for p in a.points}) == 4 and all(len(p.id) == 12 for p in a.points)
    assert all(p.params["seed"] == 1 for p in a.points)  # Blox's default seed, explicit
    r = load_config({"base": {"workload": "gavel", "num_jobs": 50}, "repeats": 3})
    assert [p.params["seed"] for p in r.points] == [0, 1, 2]
    s = load_config({"base": {"workload": "gavel", "num_jobs": 50}, "grid": {"policy": ["fifo", "las"]}, "seeds": [7, 9]})
    assert sorted((p.params["policy"], p.params["seed"]) for p in s.points) == [("fifo", 7), ("fifo", 9), ("las", 7), ("las", 9)]
    # a grid value equal to the default collapses onto one point
    d = load_config({"grid": {"placement": ["first-fit", "first-fit"]}, "base": {"num_jobs": 10}})
    assert len(d.points) == 1


def test_example_configs_and_toml_copy(tmp_path, capsys):
    fig6 = load_config(ROOT / "datasets" / "sweeps" / "blox_fig6.toml")
    assert len(fig6) == 27 and {p.params["policy"] for p in fig6.points} == {"fifo", "las", "srtf"}
    assert all(p.params["compat"] == "blox" and p.params["track"] == "3000:4000" for p in fig6.points)
    peer = ROOT / "datasets" / "sweeps" / "peer_2000.toml"
    need_shared(ROOT.parent / "shared" / "peer-traces" / "gavel_n2000_lam400_s0.neutral.csv")
    assert len(load_config(peer)) == 40
    toml = tmp_path / "s.toml"
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    import fastblox

    w = fastblox.blox_paper_workload(5, 120)
    pl.DataFrame({"job_id": w.job_id, "submit_s": w.submit_s, "num_gpus": w.num_gpus,
                  "duration_s": w.duration_s}).write_parquet(trace_dir / "w.parquet")
    toml.write_text('# a trace relative to this file\n[base]\ntrace = "traces/w.parquet"\n[grid]\npolicy = ["fifo", "srtf"]\n')
    ap = argparse.ArgumentParser()
    add_sweep_commands(ap.add_subparsers())
    a = ap.parse_args(["sweep", str(toml), "--out", str(tmp_path / "o"), "--executor", "serial"])
    assert a.func(a) == 0
    out = capsys.readouterr()
    assert "2 points: 2 run" in out.out and out.err == ""  # no progress line: stderr is not a TTY
    assert (tmp_path / "o" / "sweep.toml").read_text() == toml.read_text()
    summ = pl.read_parquet(tmp_path / "o" / "summary.parquet")
    assert summ["trace"].to_list() == [str((trace_dir / "w.parquet").resolve())] * 2


def test_gavel_load_and_cases(tmp_path):
    """``load`` of the Gavel generator is jobs per hour; ``[grid] cases`` set several keys together."""
    import fastblox.sweep.points

    c = load_config({"base": {"workload": "gavel", "num_jobs": 100, "seed": 4}, "grid": {"load": [3, 6]}})
    w = {p.params["load"]: fastblox.sweep.points.get_workload(p.workload_spec) for p in c.points}
    ref = fastblox.gavel_like_workload(100, mean_interarrival_s=600.0, seed=4)
    assert np.array_equal(w[6.0].submit_s, ref.submit_s) and np.array_equal(w[6.0].num_gpus, ref.num_gpus)
    assert w[3.0].submit_s[-1] == pytest.approx(2 * w[6.0].submit_s[-1])
    cfg = {"base": {"workload": "blox", "num_jobs": 200},
           "grid": {"policy": ["fifo", "srtf"], "cases": [{"cluster": "8x4", "load": 2}, {"cluster": "32x4", "load": 8}]}}
    cc = load_config(cfg)
    assert sorted((p.params["policy"], p.params["cluster"], p.params["load"]) for p in cc.points) == [
        ("fifo", "32x4", 8.0), ("fifo", "8x4", 2.0), ("srtf", "32x4", 8.0), ("srtf", "8x4", 2.0)]
    res = run_sweep(cfg, tmp_path, executor="serial", progress=False)
    assert res.ok and res.summary.height == 4
    # a dict config with cases is written back as TOML that reads to the same points
    again = load_config(tomllib.loads((tmp_path / "sweep.toml").read_text()))
    assert sorted(p.id for p in again.points) == sorted(p.id for p in cc.points)


@pytest.mark.slow  # (a sweep of realism options end to end: ~8 s)
def test_sweep_takes_realism_options_and_policy_parameters(tmp_path):
    cfg = load_config({
        "base": {"workload": "gavel", "num_jobs": 60, "cluster": "v100:2x4,k80:2x4", "checkpoint_s": 100},
        "grid": {"cases": [{"policy": "tiresias", "policy_opts": {"promote": 2, "thresholds": [3250, 7200]}},
                           {"policy": "gavel"}],
                 "multi_node_factor": [1.0, 0.7]},
    })
    assert len(cfg) == 4
    p = {pt.params["policy"]: pt for pt in cfg.points if pt.params["multi_node_factor"] == 0.7}
    assert dict(p["tiresias"].spec.policy_opts) == {"promote": "2", "thresholds": "3250;7200"}
    assert p["gavel"].params["time_model"] == "rounds" and p["gavel"].params["round_s"] == 360.0
    summ = run_sweep(cfg, tmp_path / "out", executor="serial", progress=False).summary

    w = fastblox.gavel_like_workload(60, seed=0)
    direct = fastblox.simulate(w, cluster="v100:2x4,k80:2x4", policy="tiresias", checkpoint_s=100,
                               multi_node_factor=0.7, policy_opts={"promote": 2, "thresholds": "3250;7200"})
    row = summ.filter((summ["policy"] == "tiresias") & (summ["multi_node_factor"] == 0.7)).row(0, named=True)
    assert row["avg_jct_s"] == direct.summary["avg_jct_s"]
    # every option has its resolved default in a point's parameters (None only where None is the default)
    plain = load_config({"base": {"workload": "gavel", "num_jobs": 10}, "grid": {"policy": ["fifo"]}}).points[0].params
    assert plain["checkpoint_s"] == 0.0 and plain["multi_node_factor"] == 1.0 and plain["placement_effects"] is True
    assert all(plain[k] is None for k in ("policy_opts", "throughput", "failures"))


@pytest.mark.parametrize("grid,msg", [
    ({"policy": ["themis"], "policy_opts": [{"g": 1}]}, "policy_opts.*has no option 'g'"),
    ({"policy": ["fifo"], "rack_factor": [1.5]}, r"rack_factor.*\(0, 1\]"),
    ({"policy": ["fifo"], "cluster_events": ["nope.csv"]}, "cluster_events.*no such file"),
])
def test_sweep_realism_errors_name_the_key(grid, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config({"base": {"workload": "gavel", "num_jobs": 10}, "grid": grid})
