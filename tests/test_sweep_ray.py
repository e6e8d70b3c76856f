"""The Ray executor on a real local Ray instance: the same bytes as the serial executor, an
existing cluster joined by address from another process, and bad addresses as one-line errors.

Ray is installed by the ``test`` extra; without it these tests are skipped (and fail under CI,
where the extra must have installed it). Every test runs under a deadline, so a Ray that hangs
fails the test instead of the CI run; the module's Ray instance is shut down and its temp folder
removed at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import polars as pl
import pytest

from fastblox.errors import ConfigError
from fastblox.sweep import load_config, run_sweep
from fastblox.sweep.points import get_workload

from test_sweep import BLOX, GAVEL, _files, _same

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 300

try:
    import ray
except ImportError:  # pragma: no cover - the test extra installs Ray
    if os.environ.get("CI"):
        raise
    pytest.skip("Ray is not installed (pip install '.[test]')", allow_module_level=True)


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise TimeoutError in the test if it runs longer than ``seconds`` (Ray's waits check signals)."""

    def expired(signum, frame):
        raise TimeoutError(f"the test ran over its {seconds:g} s deadline")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(autouse=True)
def _deadline():
    with deadline(DEADLINE_S):
        yield


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance of 2 CPUs for this module; yields its GCS address."""
    assert not ray.is_initialized()
    tmp = tempfile.mkdtemp(prefix="fbray")  # short: Ray's socket paths live under it
    with deadline(DEADLINE_S):
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def trace_cfg(tmp_path_factory):
    """A sweep over a trace file (so the driver ships the workload to the workers)."""
    import fastblox

    d = tmp_path_factory.mktemp("trace")
    w = fastblox.gavel_like_workload(250, seed=3)
    pl.DataFrame({"job_id": w.job_id, "submit_s": w.submit_s, "num_gpus": w.num_gpus,
                  "duration_s": w.duration_s}).write_parquet(d / "w.parquet")
    return {"base": {"trace": str(d / "w.parquet"), "cluster": "8x4", "record_series": True},
            "grid": {"policy": ["fifo", "las", "srtf"], "restart_s": [0, 30]}}


def test_ray_executor_gives_the_serial_bytes(tmp_path, ray_cluster, trace_cfg):
    for name, cfg in (("blox", BLOX), ("gavel", GAVEL), ("trace", trace_cfg)):
        serial = run_sweep(cfg, tmp_path / f"{name}-serial", executor="serial", progress=False)
        on_ray = run_sweep(cfg, tmp_path / f"{name}-ray", executor="ray", progress=False)
        assert on_ray.ok and sorted(on_ray.ran) == sorted(serial.ran) and len(on_ray.ran) == on_ray.num_points
        _same(_files(tmp_path / f"{name}-serial"), _files(tmp_path / f"{name}-ray"))
    # series files too (record_series in the trace sweep)
    assert len(list((tmp_path / "trace-ray" / "points").glob("*.series.parquet"))) == 6
    # the sweep ran on this process's connection and left it open
    assert ray.is_initialized()


def test_ray_resumes_and_records_failures(tmp_path, ray_cluster):
    cfg = {"base": {"workload": "gavel", "num_jobs": 200}, "grid": {"cluster": ["8x4", "1x4", "4x8"]}}
    first = run_sweep(cfg, tmp_path, executor="ray", progress=False)
    assert len(first.ran) == 2 and len(first.errors) == 1
    (err,) = first.errors.values()
    assert err["params"]["cluster"] == "1x4" and err["type"] == "WorkloadError"
    victim = first.ran[0]
    (tmp_path / "points" / f"{victim}.json").unlink()
    again = run_sweep(cfg, tmp_path, executor="ray", progress=False)
    assert again.ran == [victim] and len(again.skipped) == 1 and len(again.errors) == 1


def test_workers_never_open_the_drivers_trace(tmp_path, ray_cluster, trace_cfg):
    """The driver reads a trace and ships it: the workers succeed with the file gone (as on a
    cluster whose nodes do not see the driver's disk)."""
    src = Path(trace_cfg["base"]["trace"])
    moved = tmp_path / "w.parquet"
    shutil.copy(src, moved)
    cfg = load_config({**trace_cfg, "base": {**trace_cfg["base"], "trace": str(moved)}})
    get_workload(cfg.points[0].workload_spec)  # the driver has it in memory ...
    moved.unlink()  # ... and no process can open the file any more
    res = run_sweep(cfg, tmp_path / "out", executor="ray", progress=False)
    assert res.ok and len(res.ran) == 6
    ref = run_sweep(trace_cfg, tmp_path / "ref", executor="serial", progress=False)
    assert ref.ok
    got = pl.read_parquet(tmp_path / "out" / "summary.parquet").drop("sim_wall_s", "trace", "point_id")
    want = pl.read_parquet(tmp_path / "ref" / "summary.parquet").drop("sim_wall_s", "trace", "point_id")
    assert got.sort("policy", "restart_s").equals(want.sort("policy", "restart_s"))


def _cli(args, timeout=240):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "fastblox.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_cli_joins_an_existing_cluster(tmp_path, ray_cluster):
    """Another process joins this module's Ray instance by its address and gets the serial bytes."""
    toml = tmp_path / "s.toml"
    toml.write_text('[base]\nworkload = "blox"\nnum_jobs = 300\n[grid]\npolicy = ["fifo", "srtf"]\nload = [5, 8]\n')
    p = _cli(["sweep", str(toml), "--out", str(tmp_path / "ray"), "--executor", "ray", "--ray-address", ray_cluster])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "4 points: 4 run" in p.stdout
    run_sweep(str(toml), tmp_path / "serial", executor="serial", progress=False)
    _same(_files(tmp_path / "serial"), _files(tmp_path / "ray"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _http_server():
    """A TCP server that answers like an HTTP/1 server (as Ray's dashboard port does)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(5)
        srv.close()


def test_bad_address_is_one_line_from_the_cli(tmp_path):
    """Without the checks, ray.init keeps retrying an address where no cluster answers for minutes."""
    toml = tmp_path / "s.toml"
    toml.write_text('[base]\nworkload = "gavel"\nnum_jobs = 50\n')
    port = _closed_port()
    p = _cli(["sweep", str(toml), "--out", str(tmp_path / "o"), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"],
             timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert lines == [f"fastblox: error: --ray-address '127.0.0.1:{port}': nothing listens at 127.0.0.1:{port} "
                     "(no Ray head node there?)"], p.stderr
    assert not (tmp_path / "o").exists()  # nothing written before the connection


def test_bad_addresses_are_config_errors():
    from fastblox.sweep.ray_exec import check_address

    port = _closed_port()
    cases = {
        f"127.0.0.1:{port}": "nothing listens",
        f"ray://127.0.0.1:{port}": "nothing listens",
        "nosuchhost.invalid:6379": "unknown host",
        "http://127.0.0.1:8265": "HTTP address",
        "headnode": "expected HOST:PORT",
        "headnode:port": "expected HOST:PORT",
        "headnode:70000": "expected HOST:PORT",
    }
    for addr, msg in cases.items():
        with pytest.raises(ConfigError, match=msg) as e:
            check_address(addr)
        assert "\n" not in str(e.value) and repr(addr) in str(e.value)
    with _http_server() as http_port:
        with pytest.raises(ConfigError, match="not a Ray cluster"):
            check_address(f"127.0.0.1:{http_port}")


def test_live_gcs_passes_the_check(ray_cluster):
    from fastblox.sweep.ray_exec import check_address

    check_address(ray_cluster)
    with pytest.raises(ConfigError, match="--ray-address needs --executor ray"):
        run_sweep(GAVEL, "unused", executor="serial", ray_address=ray_cluster)
