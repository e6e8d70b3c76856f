"""``--compat gavel`` against Gavel's own simulator (its per-job results ship in datasets/peer,
measured by running Gavel unmodified; see its README.md): FIFO equals it job by job, the LP
policies within one round for most jobs (docs/fidelity.md says why not all)."""

import numpy as np
import pytest

import fastblox
from fastblox import compat_gavel as cg
from fastblox.fidelity import GAVEL_ROUND_S, GAVEL_SPECS, GAVEL_WORKLOADS, peer_finish
from fastblox.traces import read_trace

_TRACES = {}


def _trace(wl):
    if wl not in _TRACES:
        _TRACES[wl] = read_trace(GAVEL_WORKLOADS[wl], steps_per_s="builtin")
    return _TRACES[wl]


def _run(run, **kw):
    wl, cl, pol = run.split("_", 2)
    return fastblox.simulate(_trace(wl), compat="gavel", cluster=GAVEL_SPECS[cl], policy=pol, **kw)


def _per_job(res, run):
    """(our finish times, theirs) of the jobs both finished, and the two sets of dropped ids."""
    theirs = peer_finish(run)
    ids = res.jobs["job_id"].to_numpy()
    fin = res.jobs["finish_s"].to_numpy()
    both = np.array([i in theirs for i in ids]) & np.isfinite(fin)
    ours_dropped = set(ids[~np.isfinite(fin)].tolist())
    their_dropped = set(ids.tolist()) - set(theirs)
    return fin[both], np.array([theirs[i] for i in ids[both]]), ids[both], ours_dropped, their_dropped


@pytest.mark.parametrize("run", ["n2000_v100x36_fifo", "n2000_v100x48_fifo", "n2000_het36_fifo_perf",
                                 "light1000_het36_fifo_perf", "light1000_het36_fifo", "over1000_v100x36_fifo",
                                 "over1000_v100x36_fifo_perf"])
def test_fifo_equals_gavel_job_by_job(run):
    """FIFO has one allocation: every finish time equals Gavel's (to float rounding) and the same
    jobs are dropped, the overloaded workload (load 1.40) included; base ``fifo`` on the
    heterogeneous cluster too, with its ignored random draw."""
    res = _run(run)
    ours, theirs, _, od, td = _per_job(res, run)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert od == td and len(td) > 0
    assert res.summary["num_dropped"] == len(td) and sorted(res.summary["dropped_job_ids"]) == sorted(td)
    assert res.jobs.filter(res.jobs["dropped"])["finish_s"].is_nan().all()


# (run, share of jobs within one round, |average JCT gap| in %) as measured (docs/fidelity.md);
# the LPs' optima are not unique and Gavel's ECOS picks its own interior point (see there)
LP_RUNS = [
    ("n2000_v100x48_max_min_fairness", 0.99, 0.1),
    ("n2000_v100x36_max_min_fairness", 0.92, 0.4),
    ("n2000_het36_max_min_fairness", 0.97, 0.1),
    ("light1000_het36_max_min_fairness", 0.98, 0.1),
    ("over1000_v100x36_max_min_fairness_perf", 0.96, 0.3),
    pytest.param("n2000_het36_max_min_fairness_perf", 0.96, 0.4, marks=pytest.mark.slow),
    pytest.param("light1000_het36_max_min_fairness_perf", 0.98, 0.3, marks=pytest.mark.slow),
    pytest.param("light1000_het36_finish_time_fairness_perf", 0.91, 0.4, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("run,share,gap", LP_RUNS)
def test_lp_policies_within_a_round_of_gavel(run, share, gap):
    res = _run(run)
    ours, theirs, ids, od, td = _per_job(res, run)
    w = _trace(run.split("_")[0])
    sub = w.submit_s[np.searchsorted(w.job_id, ids)]
    assert (np.abs(ours - theirs) <= GAVEL_ROUND_S).mean() >= share
    assert abs((ours - sub).mean() / (theirs - sub).mean() - 1) * 100 <= gap
    assert len(od ^ td) <= 0.01 * len(w)


def test_central_optimum_is_closer_to_gavel_than_a_vertex():
    """Where the max-min LP has many optima, HiGHS' vertex (``optimum=vertex``) is much further
    from Gavel (whose ECOS returns an interior point) than the central optimum."""
    run = "light1000_het36_max_min_fairness"
    shares = {}
    for opt in ("central", "vertex"):
        ours, theirs, *_ = _per_job(_run(run, policy_opts={"optimum": opt}), run)
        shares[opt] = (np.abs(ours - theirs) <= GAVEL_ROUND_S).mean()
    assert shares["central"] > 0.95 and shares["vertex"] < 0.75, shares


def test_deterministic_byte_identical_jobs_table(tmp_path):
    a = _run("light1000_het36_max_min_fairness")
    b = _run("light1000_het36_max_min_fairness")
    a.write(tmp_path / "a")
    b.write(tmp_path / "b")
    assert (tmp_path / "a" / "jobs.parquet").read_bytes() == (tmp_path / "b" / "jobs.parquet").read_bytes()


def test_gavel_cluster_syntax_and_fastblox_syntax_agree():
    w = _trace("light1000")
    a = fastblox.simulate(w, compat="gavel", cluster="36:36:36", policy="fifo_perf")
    b = fastblox.simulate(w, compat="gavel", cluster="v100:36x1,p100:36x1,k80:36x1", policy="fifo_perf")
    np.testing.assert_array_equal(a.jobs["finish_s"].to_numpy(), b.jobs["finish_s"].to_numpy())
    assert a.config["cluster"] == "v100:36x1,p100:36x1,k80:36x1"
    assert cg.cluster_from_gavel("36:0:0") == "v100:36x1" and cg.cluster_from_gavel("0:4:2") == "p100:4x1,k80:2x1"


def test_bad_names_get_one_line_errors_listing_the_choices():
    w = _trace("light1000")
    with pytest.raises(fastblox.ConfigError, match=r"unknown policy 'max_min'.*Gavel's \(--compat gavel\): fifo, "
                       "fifo_perf, max_min_fairness, max_min_fairness_perf, finish_time_fairness") as e:
        fastblox.simulate(w, compat="gavel", cluster="36:0:0", policy="max_min")
    assert "\n" not in str(e.value)
    with pytest.raises(fastblox.ConfigError, match="Gavel's own policies: fifo, fifo_perf, max_min_fairness"):
        fastblox.simulate(w, compat="gavel", cluster="36:0:0", policy="gavel")
    with pytest.raises(fastblox.ConfigError, match="only with --compat gavel"):
        fastblox.simulate(w, cluster="36:0:0", policy="max_min_fairness")
    with pytest.raises(fastblox.ConfigError, match="--cluster: .*has no GPU"):
        fastblox.simulate(w, compat="gavel", cluster="0:0:0", policy="fifo")
    with pytest.raises(fastblox.ConfigError, match="--cluster: --compat gavel needs Gavel's GPU types"):
        fastblox.simulate(w, compat="gavel", cluster="a100:36x1", policy="fifo")
    with pytest.raises(fastblox.ConfigError, match="--policy-opt: .*no policy option 'sede'.*seed, reset_s, optimum"):
        fastblox.simulate(w, compat="gavel", cluster="36:0:0", policy="fifo", policy_opts={"sede": 1})
    with pytest.raises(fastblox.ConfigError, match="optimum='middle'.*central, vertex"):
        fastblox.simulate(w, compat="gavel", cluster="36:0:0", policy="fifo", policy_opts={"optimum": "middle"})
    with pytest.raises(fastblox.ConfigError, match="--restart-s: --compat gavel replays"):
        fastblox.simulate(w, compat="gavel", cluster="36:0:0", policy="fifo", restart_s=5)
    with pytest.raises(fastblox.ConfigError, match="needs a Gavel trace"):
        fastblox.simulate(fastblox.gavel_like_workload(10), compat="gavel", cluster="36:0:0", policy="fifo")


def test_cli_runs_compat_gavel(tmp_path, capsys):
    from fastblox.cli import main

    code = main(["run", "--trace", str(GAVEL_WORKLOADS["over1000"]), "--compat", "gavel", "--cluster", "36:0:0",
                 "--policy", "fifo", "--out", str(tmp_path)])
    assert code == 0
    assert "dropped    23 jobs dropped" in capsys.readouterr().out
    import json

    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["summary"]["num_dropped"] == 23 and s["summary"]["num_finished"] == 977
    assert s["config"]["compat"] == "gavel" and s["config"]["cluster"] == "v100:36x1"


def test_drop_rule_on_a_tiny_case():
    """A 4-GPU job whose last round has fewer steps left than GPUs fails 5 micro-tasks and is
    dropped; with steps left >= GPUs it finishes in the middle of its last round."""
    thr = np.array([[10.0]])  # 3,600 steps a round
    for steps, dropped in ((3600 + 3, True), (3600 + 4, False)):
        out = cg.simulate([0.0], [steps], [4], thr, {"v100": 4}, "max_min_fairness_perf")
        assert out["dropped"][0] == dropped
        if not dropped:
            assert out["finish_s"][0] == pytest.approx(360.0 + 4 / 10.0)
        else:
            assert out["finish_s"][0] == -1 and out["rounds"][0] == 1
