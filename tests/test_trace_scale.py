"""Scale-up generator (fastblox.traces.scale): determinism, exact size, whole jobs, fidelity
(KS distances, inter-arrival CV, GPU-hour shares), the `fastblox trace scale` command, and a
200k-job scale-up of the shared Philly trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import need_shared

from fastblox.cli import main
from fastblox.datasets import load_sample, sample_path
from fastblox.errors import ConfigError
from fastblox.traces import read_parquet, read_trace
from fastblox.traces.scale import ks_distance, scale_trace
from fastblox.workload import Workload

RFOLD = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly-rfold" / "jobs.csv.gz"


@pytest.fixture(scope="module")
def sample():
    return load_sample()


@pytest.fixture(scope="module")
def scaled(sample):
    return scale_trace(sample, 20_000, seed=0, total_gpus=256)


def _pairs(w):
    return set(zip(w.num_gpus.tolist(), w.duration_s.tolist()))


def test_deterministic_per_seed(sample):
    a, ra = scale_trace(sample, 7_000, seed=3)
    b, rb = scale_trace(sample, 7_000, seed=3)
    c, _ = scale_trace(sample, 7_000, seed=4)
    for col in ("job_id", "submit_s", "num_gpus", "duration_s"):
        np.testing.assert_array_equal(getattr(a, col), getattr(b, col))
    assert json.dumps(ra, sort_keys=True, default=float) == json.dumps(rb, sort_keys=True, default=float)
    assert not np.array_equal(a.submit_s, c.submit_s)


def test_exact_count_ids_sorted(scaled, sample):
    w, rep = scaled
    assert len(w) == 20_000 == rep["jobs"]
    np.testing.assert_array_equal(w.job_id, np.arange(20_000))
    assert (np.diff(w.submit_s) >= 0).all()
    assert rep["streams"] == rep["cluster_multiplier"] == 10
    assert rep["source_jobs"] == len(sample) and rep["seed"] == 0
    for n in (1, 1_999, 2_001, 12_345):  # also fewer jobs than the source, and a ragged last stream
        assert len(scale_trace(sample, n, seed=1)[0]) == n


def test_whole_jobs_only(scaled, sample):
    w, _ = scaled
    assert _pairs(w) <= _pairs(sample)


def test_fidelity_on_sample(scaled, sample):
    w, rep = scaled
    assert rep["ks_duration"] < 0.05 and rep["ks_num_gpus"] < 0.05
    assert rep["ks_duration"] == pytest.approx(ks_distance(sample.duration_s, w.duration_s))
    cv_s, cv_y = rep["interarrival_cv"]["source"], rep["interarrival_cv"]["synthetic"]
    assert cv_s / 2 <= cv_y <= cv_s * 2
    for lab, s in rep["gpu_hour_share"]["source"].items():
        assert abs(rep["gpu_hour_share"]["synthetic"][lab] - s) < 0.03
    assert len(rep["hour_of_day"]["synthetic"]) == 24
    assert sum(rep["hour_of_day"]["synthetic"]) == pytest.approx(1.0)
    ol = rep["offered_load"]
    assert ol["synthetic_gpus"] == 2560 and ol["synthetic"] == pytest.approx(ol["source"], rel=0.1)
    # the horizon stays about the source's
    assert rep["span_s"] == pytest.approx(rep["source_span_s"], rel=0.1)


def test_within_day_offsets_kept():
    """Jobs keep their offset inside their day (up to the stream's shift), so bursts survive."""
    sub = np.concatenate([d * 86400.0 + np.array([100.0, 100.0, 101.0, 5000.0]) for d in range(14)])
    w = Workload.from_arrays(sub, np.tile([1, 2, 4, 8], 14), duration_s=np.arange(1.0, 57.0))
    syn, rep = scale_trace(w, 560, seed=0, shift_s=0.0)
    assert rep["streams"] == 10
    assert set(np.mod(syn.submit_s, 86400.0).tolist()) == {100.0, 101.0, 5000.0}


def test_weekday_strata():
    """With first_weekday, weekend days are drawn from weekend days only."""
    days = np.arange(28)
    weekend = ((days + 0) % 7) >= 5  # day 0 a Monday
    sub = days * 86400.0 + 10.0
    gpus = np.where(weekend, 8, 1)
    w = Workload.from_arrays(sub, gpus, duration_s=np.full(28, 60.0))
    syn, rep = scale_trace(w, 28 * 5, seed=2, first_weekday=0, shift_s=0.0, balanced=False)
    assert rep["strata"] == "weekday/weekend"
    syn_weekend = (np.floor(syn.submit_s / 86400.0).astype(int) % 7) >= 5
    np.testing.assert_array_equal(syn.num_gpus == 8, syn_weekend)


def test_bad_arguments(sample):
    with pytest.raises(ConfigError):
        scale_trace(sample, 0)
    with pytest.raises(ConfigError):
        scale_trace(sample, 10, streams=0)
    with pytest.raises(ConfigError):
        scale_trace(sample, 10, first_weekday=7)


def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "big.parquet"
    rc = main(["trace", "scale", str(sample_path("philly")), "--jobs", "6000", "--out", str(out), "--seed", "5",
               "--cluster", "32x8"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "KS distance" in text and "K = 3" in text
    w = read_parquet(out)
    assert len(w) == 6000
    rep = json.loads((tmp_path / "big.parquet.json").read_text())
    assert rep["seed"] == 5 and rep["streams"] == 3 and rep["jobs"] == 6000
    assert rep["source_path"] == str(sample_path("philly")) and rep["total_gpus"] == 256
    ref, _ = scale_trace(load_sample(), 6000, seed=5)
    np.testing.assert_array_equal(w.submit_s, ref.submit_s)
    assert main(["trace", "scale", str(sample_path("philly")), "--jobs", "10", "--out", str(tmp_path / "x.csv")]) == 2


def test_rfold_200k():
    need_shared(RFOLD)
    src = read_trace(RFOLD, on_bad_rows="drop")
    w, rep = scale_trace(src, 200_000, seed=0, total_gpus=2490)
    assert len(w) == 200_000 and rep["streams"] == 2
    assert rep["ks_duration"] < 0.05 and rep["ks_num_gpus"] < 0.05
    assert _pairs(w) <= _pairs(src)
    cv_s, cv_y = rep["interarrival_cv"]["source"], rep["interarrival_cv"]["synthetic"]
    assert cv_y > 1.0 and cv_y < cv_s  # bursty still, though superposing streams smooths gaps
    assert rep["hour_of_day_max_abs_diff"] < 0.03
    assert rep["offered_load"]["synthetic"] == pytest.approx(rep["offered_load"]["source"], rel=0.1)
