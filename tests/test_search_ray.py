"""fastblox search on the Ray executor (a real local Ray instance, as tests/test_sweep_ray.py's):
the same trials and bytes as the serial executor, and a rerun reads everything back."""

from __future__ import annotations

from test_search import ADMISSION, _cfg
from test_sweep_ray import _deadline, ray, ray_cluster  # noqa: F401  (skips without Ray; fixtures: a deadline per test, the instance)

from fastblox.sweep import run_search


def test_ray_search_gives_the_serial_bytes_and_resumes(tmp_path, ray_cluster):  # noqa: F811
    cfg = _cfg(ADMISSION, trials=6)
    serial = run_search(cfg, tmp_path / "serial", executor="serial", progress=False)
    on_ray = run_search(cfg, tmp_path / "ray", executor="ray", progress=False)
    assert (tmp_path / "ray" / "search.parquet").read_bytes() == (tmp_path / "serial" / "search.parquet").read_bytes()
    assert on_ray.best == serial.best and sorted(on_ray.ran) == sorted(serial.ran)
    again = run_search(cfg, tmp_path / "ray", executor="ray", progress=False)
    assert again.ran == [] and again.reused == len(serial.ran)
    assert ray.is_initialized()  # the search ran on this process's connection and left it open
