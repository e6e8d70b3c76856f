"""fastblox.sweep under faults: changed inputs, damaged point files, two sweeps on one folder,
dead workers, Ctrl-C and per-point time limits (docs/sweeps.md, "Guarantees").

Points are made deadly or slow by a script that replaces ``_simulate_point`` at import time:
the ``local`` executor's workers are spawned, so they import the script as ``__mp_main__`` and
run the replacement too. The package itself has no hook for this."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

import fastblox
from fastblox.errors import ConfigError
from fastblox.sweep import load_config, run_sweep
from fastblox.sweep.cli import add_sweep_commands  # noqa: F401 - the CLI is what the scripts run

from test_sweep import _files, _same

POLICIES = ["fifo", "las", "srtf", "sjf"]
TOML = '[base]\nworkload = "gavel"\nnum_jobs = 40\n[grid]\npolicy = {policies}\n'

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import fastblox.sweep.points as points

    real = points._simulate_point
    MODE = os.environ["FB_TEST_MODE"]

    def patched(point):
        las = point.params["policy"] == "las"
        if MODE == "kill-once" and las and not os.path.exists(os.environ["FB_TEST_MARK"]):
            open(os.environ["FB_TEST_MARK"], "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if MODE == "kill-always" and las:
            os.kill(os.getpid(), signal.SIGKILL)
        if MODE == "hang" and las:
            time.sleep(120)
        if MODE == "slow":
            time.sleep(float(os.environ.get("FB_TEST_SLEEP", "1")))
        return real(point)

    points._simulate_point = patched

    if __name__ == "__main__":
        from fastblox.cli import main
        sys.exit(main(sys.argv[1:]))
""")


def _config(tmp_path: Path, policies=POLICIES, extra: str = "") -> Path:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(TOML.format(policies=json.dumps(policies)) + extra)
    return cfg


def _script(tmp_path: Path) -> Path:
    s = tmp_path / "faulty_sweep.py"
    s.write_text(SCRIPT)
    return s


def _sweep_cmd(script: Path, cfg: Path, out: Path, *flags: str) -> list:
    return [sys.executable, str(script), "sweep", str(cfg), "--out", str(out), "--quiet", *flags]


def _run(cmd, mode: str, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "FB_TEST_MODE": mode, "FB_TEST_MARK": str(tmp_path / "killed-once")}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _done(out: Path) -> set:
    return {p.name.removesuffix(".json") for p in (out / "points").glob("*.json")}


# ----------------------------------------------------------------------------- identity
def _trace(path: Path, seed: int) -> None:
    w = fastblox.gavel_like_workload(40, seed=seed)
    pl.DataFrame({"job_id": w.job_id, "submit_s": w.submit_s, "num_gpus": w.num_gpus,
                  "duration_s": w.duration_s}).write_parquet(path)


def test_changed_trace_contents_rerun_the_point(tmp_path):
    trace = tmp_path / "jobs.parquet"
    _trace(trace, seed=0)
    cfg = {"base": {"trace": str(trace)}, "grid": {"policy": ["fifo"]}}
    first = run_sweep(cfg, tmp_path / "out", executor="serial", progress=False)
    assert len(first.ran) == 1
    _trace(trace, seed=1)  # same path, other jobs
    second = run_sweep(cfg, tmp_path / "out", executor="serial", progress=False)
    assert len(second.ran) == 1 and second.skipped == [] and second.ran != first.ran
    assert second.summary["point_id"].to_list() == second.ran  # the old point is not in the summary
    assert second.summary["avg_jct_s"][0] != first.summary["avg_jct_s"][0]
    assert _done(tmp_path / "out") == set(first.ran) | set(second.ran)  # old files are left alone
    doc = json.loads((tmp_path / "out" / "points" / f"{second.ran[0]}.json").read_text())
    assert doc["inputs"]["trace"] == fastblox.sweep.config.file_digest(trace)
    assert run_sweep(cfg, tmp_path / "out", executor="serial", progress=False).ran == []


def test_every_input_file_is_part_of_the_id(tmp_path):
    ev = tmp_path / "events.csv"
    cl = tmp_path / "cluster.csv"
    tp = tmp_path / "speed.csv"
    cfg = {"base": {"workload": "gavel", "num_jobs": 10, "cluster_events": str(ev), "cluster": str(cl),
                    "throughput": str(tp), "reference_gpu": "v100"}}

    def write(events, nodes, speed):
        ev.write_text("time_s,event,node\n" + events)
        cl.write_text("gpus,gpu_type\n" + nodes)
        tp.write_text("model,gpu_type,num_gpus,iters_per_s\n" + speed)

    base = ("100,fail,0\n200,recover,0\n", "4,v100\n4,v100\n", "resnet50,v100,1,1.0\n")
    other = ("150,fail,0\n200,recover,0\n", "4,v100\n2,v100\n", "resnet50,v100,1,2.0\n")
    write(*base)
    ids = {load_config(cfg).points[0].id}
    for i in range(3):
        changed = list(base)
        changed[i] = other[i]
        write(*changed)
        ids.add(load_config(cfg).points[0].id)
    assert len(ids) == 4
    write(*base)
    assert load_config(cfg).points[0].id in ids


# ----------------------------------------------------------------------------- damaged files
def test_damaged_point_files_are_reported_and_recomputed(tmp_path, capsys):
    from fastblox.cli import main

    cfg = _config(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    clean = _files(out)
    ids = sorted(_done(out))
    pts = out / "points"
    js = pts / f"{ids[0]}.json"
    js.write_bytes(js.read_bytes()[:50])  # a truncated JSON
    pq = pts / f"{ids[1]}.parquet"
    pq.write_bytes(pq.read_bytes()[:-20])  # a truncated Parquet file (its footer cut off)
    other = pts / f"{ids[2]}.json"
    other.write_text(other.read_text().replace(ids[2], ids[3]))  # names another point
    capsys.readouterr()
    assert main(["sweep", str(cfg), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    got = capsys.readouterr()
    lines = got.err.splitlines()
    assert len(lines) == 3 and all("damaged" in ln and "running it again" in ln for ln in lines), got.err
    assert {ln.split()[3].rstrip(":") for ln in lines} == set(ids[:3])
    assert "1 already done, 0 failed, 3 damaged and run again" in got.out
    _same(_files(out), clean)


# ----------------------------------------------------------------------------- lock
def test_second_sweep_into_one_folder_is_refused(tmp_path):
    cfg = _config(tmp_path, ["fifo"])
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as f:  # a sweep running into out/ holds this lock
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write(f"{os.getpid()}\n")
        f.flush()
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "fastblox.cli", "sweep", str(cfg), "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("fastblox: error: ")
    assert str(out) in r.stderr and f"pid {os.getpid()}" in r.stderr
    assert not (out / "points").exists()
    # the lock is released with its holder: now the sweep runs
    res = run_sweep(cfg, out, executor="serial", progress=False)
    assert len(res.ran) == 1 and (out / ".lock").read_text().strip() == str(os.getpid())


# ----------------------------------------------------------------------------- dead workers
def test_killed_worker_point_is_retried_and_the_sweep_completes(tmp_path):
    cfg, out = _config(tmp_path), tmp_path / "out"
    r = _run(_sweep_cmd(_script(tmp_path), cfg, out, "--executor", "local", "--workers", "2"), "kill-once", tmp_path)
    assert (tmp_path / "killed-once").exists(), "the las point should have killed its worker once"
    assert r.returncode == 0, r.stderr
    assert "4 points: 4 run, 0 already done, 0 failed" in r.stdout
    assert "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "died" in ln]
    assert line.endswith("its worker process died, killed by signal 9 (SIGKILL); running it again")
    assert json.loads((out / "errors.json").read_text()) == {}
    run_sweep(str(cfg), tmp_path / "clean", executor="serial", progress=False)
    _same(_files(out), _files(tmp_path / "clean"))


def test_point_that_always_kills_its_worker_is_recorded(tmp_path):
    cfg, out = _config(tmp_path), tmp_path / "out"
    r = _run(_sweep_cmd(_script(tmp_path), cfg, out, "--executor", "local", "--workers", "2"), "kill-always", tmp_path)
    assert r.returncode == 1, r.stderr
    assert "4 points: 3 run, 0 already done, 1 failed" in r.stdout and "Traceback" not in r.stderr
    errors = json.loads((out / "errors.json").read_text())
    ((pid, err),) = errors.items()
    assert err["params"]["policy"] == "las" and err["type"] == "WorkerDied"
    assert "died 2 times" in err["error"] and "SIGKILL" in err["error"]
    assert pl.read_parquet(out / "summary.parquet").height == 3 and pid not in _done(out)


def _children(pid: int) -> list:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers die with the driver on Linux")
def test_kill_9_of_a_local_sweep_takes_its_workers_and_resumes(tmp_path):
    cfg, out = _config(tmp_path, POLICIES, "restart_s = [0, 30, 60]\n"), tmp_path / "out"
    env = {**os.environ, "FB_TEST_MODE": "slow", "FB_TEST_SLEEP": "4"}  # a dead driver's workers would finish theirs
    proc = subprocess.Popen(_sweep_cmd(_script(tmp_path), cfg, out, "--executor", "local", "--workers", "2"),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not _done(out):
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert workers and proc.poll() is None
        proc.kill()
    finally:
        proc.wait()
    t0 = time.monotonic()
    while any(_alive(w) for w in workers) and time.monotonic() - t0 < 2:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "the workers outlived their driver"
    done = _done(out)
    assert 0 < len(done) < 12
    again = run_sweep(str(cfg), out, executor="local", workers=2, progress=False)
    assert sorted(again.skipped) == sorted(done) and len(again.ran) == 12 - len(done) and again.ok
    run_sweep(str(cfg), tmp_path / "clean", executor="serial", progress=False)
    _same(_files(out), _files(tmp_path / "clean"))


# ----------------------------------------------------------------------------- Ctrl-C
@pytest.mark.parametrize("executor", ["local", "serial", pytest.param("threads", marks=pytest.mark.slow)])
def test_ctrl_c_stops_promptly_writes_what_finished_and_resumes(tmp_path, executor):
    cfg = _config(tmp_path, POLICIES, "restart_s = [0, 30, 60]\n")  # 12 points of >= 1 s each
    out = tmp_path / "out"
    env = {**os.environ, "FB_TEST_MODE": "slow"}
    # a session of its own: Ctrl-C in a terminal signals the whole process group, workers included
    proc = subprocess.Popen(_sweep_cmd(_script(tmp_path), cfg, out, "--executor", executor, "--workers", "2"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not _done(out):
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    # threads: the points running (1 s each here) end first, as a thread cannot be stopped
    assert took < (5.0 if executor == "threads" else 3.0), f"took {took:.1f} s to stop"
    done = _done(out)
    assert 0 < len(done) < 12
    assert stdout == "" and stderr == (f"fastblox: interrupted: {len(done)} of 12 points done (written to {out}); "
                                       "run the same command again to resume\n")
    assert sorted(pl.read_parquet(out / "summary.parquet")["point_id"]) == sorted(done)
    again = run_sweep(str(cfg), out, executor="serial", progress=False)
    assert sorted(again.skipped) == sorted(done) and len(again.ran) == 12 - len(done) and again.ok


# ----------------------------------------------------------------------------- time limit
@pytest.mark.parametrize("executor", ["local", pytest.param("serial", marks=pytest.mark.slow)])
def test_point_timeout_stops_the_point_and_records_it(tmp_path, executor):
    cfg, out = _config(tmp_path), tmp_path / "out"
    t0 = time.monotonic()
    r = _run(_sweep_cmd(_script(tmp_path), cfg, out, "--executor", executor, "--workers", "2",
                        "--point-timeout", "3"), "hang", tmp_path)
    assert time.monotonic() - t0 < 100  # the hanging point sleeps 120 s
    assert r.returncode == 1, r.stderr
    assert "4 points: 3 run, 0 already done, 1 failed" in r.stdout and "Traceback" not in r.stderr
    ((pid, err),) = json.loads((out / "errors.json").read_text()).items()
    assert err["params"]["policy"] == "las" and err["type"] == "PointTimeout"
    assert err["error"].startswith("timed out: still running after 3 s (--point-timeout)")


def test_point_timeout_needs_an_executor_that_can_stop_a_point(tmp_path):
    for ex in ("threads", "ray"):
        with pytest.raises(ConfigError, match=f"--point-timeout needs --executor local or serial.*{ex}"):
            run_sweep(_config(tmp_path), tmp_path / "out", executor=ex, point_timeout=5)
    with pytest.raises(ConfigError, match="positive number of seconds"):
        run_sweep(_config(tmp_path), tmp_path / "out", executor="local", point_timeout=0)
