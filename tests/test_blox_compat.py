"""--blox-compat: the numba kernel against the plain-Python Blox reference, and Blox's own numbers."""

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastblox
from fastblox.cli import main
from fastblox.generators import blox_arrivals, blox_durations
from fastblox.reference.blox import simulate_blox_reference
from strategies import small_case


def test_generator_matches_blox_code():
    """The generator equals Blox's own functions (copied here as the test's oracle)."""
    rng = random.Random(1)
    durs = []
    for _ in range(50):
        if rng.random() >= 0.8:
            durs.append(60 * (10 ** rng.uniform(3, 4)))
        else:
            durs.append(60 * (10 ** rng.uniform(1.5, 3)))
    rng = random.Random(1)
    arr, prev = [], 0
    for _ in range(50):
        prev = prev + math.ceil((-math.log(1.0 - rng.random()) / 6) * 60 * 60)
        arr.append(prev)
        rng.randint(0, 8)
    assert blox_durations(50).tolist() == durs
    assert blox_arrivals(50, 6).tolist() == arr
    # job i uses duration i mod 20,000
    assert blox_durations(20_003)[20_000:].tolist() == blox_durations(3).tolist()


def test_blox_published_value():
    """LAS, accept-all, load 6, tracked 0..199: Blox reports 65,493.125 s / 451.625 s / 2,133 rounds."""
    res = fastblox.simulate_blox_workload(6, track=(0, 199), policy="las", blox_compat=True)
    assert res.summary["avg_jct_s"] == 65493.125
    assert res.summary["avg_responsiveness_s"] == 451.625
    assert res.summary["num_rounds"] == 2133
    assert res.summary["num_tracked"] == 200


def test_blox_published_value_cli(tmp_path, capsys):
    rc = main(["run", "--workload", "blox", "--load", "6", "--policy", "las", "--blox-compat", "--track", "0:199",
               "--out", str(tmp_path), "--blox-json"])
    assert rc == 0
    stem = tmp_path / "blox_0_199_Las_AcceptAll_load_6.0_"
    stats = json.loads((tmp_path / (stem.name + "job_stats.json")).read_text())
    resp = json.loads((tmp_path / (stem.name + "responsivness.json")).read_text())
    custom = json.loads((tmp_path / (stem.name + "custom_metrics.json")).read_text())
    assert len(stats) == 200 and len(custom) == 2133
    assert sum(f - a for a, f in stats.values()) / len(stats) == 65493.125
    assert sum(f - a for a, f in resp.values()) / len(resp) == 451.625
    assert list(custom)[:2] == ["0", "300"] and custom["0"] == {"num_preemptions": 0}
    for suffix in ("cluster_stats.json", "run_time_stats.json"):
        assert json.loads((tmp_path / (stem.name + suffix)).read_text())
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    for k in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "num_tracked", "makespan_s", "num_preemptions", "sim_wall_s", "num_rounds"):
        assert k in summary
    assert summary["num_rounds"] == 2133


POLS = ["fifo", "las", "srtf", "tiresias", "optimus"]
REF_POL = {"fifo": "fifo", "las": "las", "srtf": "srtf", "tiresias": "las", "optimus": "srtf"}


def _compare(w, node_gpus, policy, theta, track):
    cluster = ",".join(f"1x{g}" for g in node_gpus)
    res = fastblox.simulate(w, cluster=cluster, policy=policy, blox_compat=True,
                            admission=f"load:{theta}" if theta else "accept-all", track=track)
    ref = simulate_blox_reference(w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, node_gpus,
                                  policy=REF_POL[policy], admission=theta or None, track=track)
    b = res.blox_files()
    assert b["job_stats"] == {str(k): v for k, v in ref.job_stats.items()}
    assert list(b["job_stats"]) == [str(k) for k in ref.job_stats]  # Blox's completion order
    assert b["responsiveness"] == {str(k): v for k, v in ref.responsiveness.items()}
    assert list(b["custom_metrics"].values()) == [{"num_preemptions": v} for v in ref.preemptions_per_round.values()]
    assert res.summary["num_rounds"] == len(ref.preemptions_per_round)
    fin = res.jobs["finish_s"].to_numpy()
    for j, f in ref.finish.items():
        assert fin[j] == f
    npre = res.jobs["num_preemptions"].to_numpy()
    for j, k in ref.num_preemptions.items():
        assert npre[j] == k
    return res, ref


@given(case=small_case(max_jobs=30), policy=st.sampled_from(POLS), theta=st.sampled_from([0.0, 1.0, 1.2, 1.5]))
def test_compat_kernel_matches_reference(case, policy, theta):
    submit, gpus, dur, node_gpus = case
    g = node_gpus[0]
    # Blox's exact-sum fit can place an n-GPU job on an empty cluster only if n <= node size or a
    # multiple of it; other sizes can starve forever (tested on its own below)
    gpus = np.where((gpus <= g) | (gpus % g == 0), gpus, 1)
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    _compare(w, node_gpus, policy, theta, (0, len(w) - 1))


def test_compat_exact_sum_deadlock_is_reported():
    """A 3-GPU job on 2-GPU nodes never fits Blox's exact-sum walk: a clear error, not a hang."""
    w = fastblox.Workload.from_arrays(submit_s=[0, 10], num_gpus=[1, 3], duration_s=[100, 100])
    with pytest.raises(fastblox.SimulationError, match="exact-sum"):
        fastblox.simulate(w, cluster="2x2", policy="fifo", blox_compat=True)
    res = fastblox.simulate(w, cluster="2x2", policy="fifo", blox_compat=True, placement="first-fit")
    assert res.summary["num_finished"] == 2
    with pytest.raises(RuntimeError):
        simulate_blox_reference(w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, [2, 2], policy="fifo",
                                max_rounds=2000)


@pytest.mark.parametrize("policy", POLS)
@pytest.mark.parametrize("theta", [0.0, 1.2])
def test_compat_paper_workload_matches_reference(policy, theta):
    """A contended slice of the paper workload (load 9 on a 16-GPU cluster) with a tracked range."""
    w = fastblox.blox_paper_workload(9, 400)
    _compare(w, [4] * 4, policy, theta, (50, 120))


def test_load_based_admission_caps_active_set():
    """1-GPU jobs at 1.2x on 128 GPUs: the active set never exceeds 154 (Blox's overshoot by one)."""
    res = fastblox.simulate_blox_workload(9, track=(0, 600), policy="fifo", blox_compat=True,
                                          admission="load:1.2", record_series=True)
    total = res.series["queued_jobs"].to_numpy() + res.series["running_jobs"].to_numpy()
    assert total.max() <= 154
    assert total.max() >= 150


def test_starvation_guard_promotes_after_1000_hours():
    """A big job starved by a stream of small ones gets priority 1 after 3,600,000 s of waiting."""
    n = 40_000
    submit = np.concatenate([[0.0, 1.0], 2.0 + 150.0 * np.arange(n)])
    gpus = np.concatenate([[1, 2], np.ones(n, dtype=np.int64)])
    dur = np.concatenate([[310.0, 600.0], np.full(n, 290.0)])
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    # SRTF: every 290 s newcomer beats the 600 s 2-GPU job for the 2-GPU cluster's GPUs
    res = fastblox.simulate(w, cluster="1x2", policy="srtf", blox_compat=True, track=(1, 1))
    start = res.jobs["first_start_s"].to_numpy()[1]
    assert 3_600_000 <= start <= 3_600_000 + 2 * 300


def test_compat_rejects_what_blox_does_not_have():
    w = fastblox.blox_paper_workload(6, 100)
    with pytest.raises(fastblox.ConfigError, match="events"):
        fastblox.simulate(w, policy="las", blox_compat=True, time_model="events")
    with pytest.raises(fastblox.ConfigError, match="Blox has"):
        fastblox.simulate(w, policy="sjf", blox_compat=True)
    with pytest.raises(fastblox.ConfigError, match="restart"):
        fastblox.simulate(w, policy="las", blox_compat=True, restart_s=10)
