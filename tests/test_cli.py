"""The command line: the default run, outputs, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from fastblox.cli import main


def test_default_run_prints_summary(capsys):
    assert main(["run"]) == 0
    out = capsys.readouterr().out
    for word in ("jobs", "JCT", "p50", "p99", "makespan", "utilisation", "preemptions"):
        assert word in out


def test_offered_load_is_stated_and_warned_about_above_one(tmp_path, capsys):
    """Every run states its offered load; above 1 the CLI warns (once, before the run)."""
    import fastblox

    sub = [0.0, 100.0, 200.0, 300.0, 400.0]
    gpus = [1, 2, 4, 1, 2]
    dur = [300.0, 200.0, 100.0, 50.0, 400.0]
    w = fastblox.Workload.from_arrays(submit_s=sub, num_gpus=gpus, duration_s=dur)
    want = sum(g * d for g, d in zip(gpus, dur)) / (4 * 400.0)  # GPU-seconds / (GPUs x arrival span)
    assert want > 1
    assert fastblox.simulate(w, cluster="1x4").summary["offered_load"] == pytest.approx(want, rel=1e-12)
    assert fastblox.simulate(w, cluster="2x4").summary["offered_load"] == pytest.approx(want / 2, rel=1e-12)
    w.to_polars().write_parquet(tmp_path / "t.parquet")
    for cluster, warned in (("1x4", True), ("2x4", False)):
        assert main(["run", "--trace", str(tmp_path / "t.parquet"), "--cluster", cluster]) == 0
        out, err = capsys.readouterr()
        assert f"offered {want * (1 if warned else 0.5):.2f}" in out
        assert err.count("offered load is") == (1 if warned else 0), err
    # Blox's endless stream runs in growing parts: still one warning (overloaded, it stops
    # incomplete at its bound: exit code 3)
    assert main(["run", "--load", "9", "--cluster", "8x4", "--track", "10:30"]) == 3
    assert capsys.readouterr().err.count("offered load is") == 1


def test_out_dir_contract(tmp_path):
    assert main(["run", "--policy", "las", "--time-model", "rounds", "--out", str(tmp_path), "--series"]) == 0
    jobs = pl.read_parquet(tmp_path / "jobs.parquet")
    for col in ("job_id", "submit_s", "first_start_s", "finish_s", "jct_s", "num_gpus", "num_preemptions", "tracked"):
        assert col in jobs.columns
    s = json.loads((tmp_path / "summary.json").read_text())["summary"]
    for k in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "num_tracked", "makespan_s", "num_preemptions", "sim_wall_s", "num_rounds"):
        assert k in s
    assert s["num_tracked"] == 1001  # Blox's default tracked ids 3000..4000
    tracked = jobs.filter(pl.col("tracked"))
    assert abs(tracked["jct_s"].mean() - s["avg_jct_s"]) < 1e-6
    # the percentiles are those of the tracked jobs (a p99 computed as the p95 must fail: this
    # workload's tail tells them apart), for the JCT and for finish-time fairness
    for col, prefix, suffix in (("jct_s", "p", "_jct_s"), ("rho", "rho_p", "")):
        x = tracked[col].to_numpy()
        pcts = [s[f"{prefix}{q}{suffix}"] for q in (50, 95, 99)]
        np.testing.assert_allclose(pcts, np.percentile(x, [50, 95, 99]), rtol=1e-12)
        assert pcts[0] < pcts[1] < pcts[2]
    series = pl.read_parquet(tmp_path / "series.parquet")
    assert {"free_gpus", "queued_jobs", "gpu_demand"} <= set(series.columns)
    assert (series["free_gpus"] >= 0).all() and (series["free_gpus"] <= 128).all()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--policy", "nosuch"], "unknown policy 'nosuch'"),
        (["run", "--policy", "polux"], "unknown policy 'polux' (did you mean 'pollux'?)"),  # (a name of any engine)
        (["run", "--policy", "synergy-tun"], "Synergy's (--compat synergy): "),
        (["run", "--placement", "bogus"], "unknown placement 'bogus'"),
        (["run", "--cluster", "32by4"], "--cluster: cannot read '32by4'"),
        (["run", "--cluster", "0x4"], "at least one node"),
        (["run", "--admission", "load:-1"], "positive"),
        (["run", "--admission", "sometimes"], "unknown admission"),
        (["run", "--blox-json"], "--out"),
        (["run", "--blox-compat", "--policy", "sjf"], "Blox has"),
        (["run", "--track", "10:5"], "after the last id"),
        (["run", "--workload", "blox", "--num-jobs", "100", "--track", "5000:6000"], "no job has an id"),
        (["run", "--policy-opt", "backfil=no"], "--policy-opt: policy 'fifo' has no option 'backfil' (its options: backfill)"),
        (["run", "--policy-opt", "backfill=maybe"], "--policy-opt: backfill='maybe' for policy 'fifo': expected true or false"),
    ],
)
def test_bad_input_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert "\n" not in err and "Traceback" not in err


def test_job_larger_than_cluster(capsys):
    assert main(["run", "--workload", "gavel", "--num-jobs", "200", "--cluster", "1x4"]) == 2
    err = capsys.readouterr().err
    assert "asks for 8 GPUs but the cluster '1x4' has 4" in err


def test_malformed_trace_file(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("job_id,submit_time_s,duration_s,num_gpus\n0,0,100,1\n1,10,abc,1\n")
    assert main(["run", "--trace", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "\n" not in err.strip()


def test_bad_flag_value_exits_2():
    r = subprocess.run([sys.executable, "-m", "fastblox.cli", "run", "--round-s", "-5"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "--round-s" in r.stderr and "Traceback" not in r.stderr


def test_trace_parquet_round_trip(tmp_path):
    import fastblox

    w = fastblox.gavel_like_workload(300, seed=2)
    pl.DataFrame({"job_id": w.job_id, "submit_time_s": w.submit_s, "duration_s": w.duration_s,
                  "num_gpus": w.num_gpus}).write_parquet(tmp_path / "t.parquet")
    assert main(["run", "--trace", str(tmp_path / "t.parquet"), "--cluster", "8x8", "--out", str(tmp_path / "o")]) == 0
    direct = fastblox.simulate(w, cluster="8x8")
    got = pl.read_parquet(tmp_path / "o" / "jobs.parquet")
    assert got["finish_s"].to_list() == direct.jobs["finish_s"].to_list()


def test_slow_kernel_load_says_it_is_compiling(monkeypatch, capsys):
    """A kernel that takes a while to load (an empty numba cache: it compiles) is announced on
    stderr while the CLI waits; a fast load says nothing."""
    from fastblox import engine

    monkeypatch.setattr(engine, "_WARM", set())
    monkeypatch.setattr(engine, "NOTICE_AFTER_S", 60.0)
    assert main(["run", "--num-jobs", "50"]) == 0
    assert "compiling" not in capsys.readouterr().err
    monkeypatch.setattr(engine, "_WARM", set())
    monkeypatch.setattr(engine, "NOTICE_AFTER_S", 0.0)  # every load counts as slow
    real = engine._warm_now
    monkeypatch.setattr(engine, "_warm_now", lambda kind: (__import__("time").sleep(0.2), real(kind))[1])
    assert main(["run", "--num-jobs", "50"]) == 0
    err = capsys.readouterr().err
    assert "fastblox: compiling the native simulation kernel" in err


def test_prewarm_loads_once_and_a_run_waits_for_it(monkeypatch):
    """The CLI starts loading the kernel in a thread while it reads the trace: the run that needs
    the kernel waits for that load instead of starting a second one, and counts the wait as
    compile time; a load that fails in the thread is raised by the run, not printed by the thread."""
    import threading
    import time

    from fastblox import engine

    calls = []
    gate = threading.Event()

    def slow_load(kind):
        calls.append(kind)
        gate.wait(5)
        if kind == "broken":
            raise RuntimeError("no kernel")
        engine._WARM.add(kind)

    monkeypatch.setattr(engine, "_WARM", set())
    monkeypatch.setattr(engine, "_warm_now", slow_load)
    th = engine.prewarm("native")
    while not calls:
        time.sleep(0.01)
    threading.Timer(0.2, gate.set).start()
    waited = engine._warm("native")  # blocks until the thread's load is done
    th.join(5)
    assert calls == ["native"] and waited >= 0.15 and "native" in engine._WARM
    assert engine._warm("native") == 0.0

    leaked = []
    monkeypatch.setattr(threading, "excepthook", leaked.append)
    gate.clear()
    th = engine.prewarm("broken")
    gate.set()
    th.join(5)
    assert not th.is_alive() and leaked == []
    with pytest.raises(RuntimeError, match="no kernel"):
        engine._warm("broken")


def test_parts_lists_every_part_with_its_meaning(capsys):
    from fastblox import parts

    assert main(["parts"]) == 0
    out = capsys.readouterr().out
    for reg in (parts.POLICIES, parts.PLACEMENTS, parts.TIME_MODELS):
        for name in reg.names():
            line = next((ln for ln in out.splitlines() if ln.split()[:1] == [name]), None)
            assert line is not None and len(line.split()) > 4, f"{name}: no one-line meaning in `fastblox parts`"
    assert "load:THETA" in out
