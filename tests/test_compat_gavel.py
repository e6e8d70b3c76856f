"""``--compat gavel`` against Gavel's own simulator (its per-job results ship in datasets/peer,
measured by running Gavel unmodified; see its README.md): FIFO and, with Gavel's solver
(``optimum=ecos``, the default), the LP policies equal it job by job; without ECOS
(``optimum=central``) the LP policies are within one round for most jobs (docs/fidelity.md)."""

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


ALL_LP_RUNS = ["n2000_het36_max_min_fairness_perf", "n2000_het36_max_min_fairness",
               "n2000_het36_finish_time_fairness_perf", "n2000_het36_finish_time_fairness",
               "n2000_v100x48_max_min_fairness", "n2000_v100x36_max_min_fairness",
               "over1000_v100x36_max_min_fairness_perf", "over1000_v100x36_finish_time_fairness_perf",
               "light1000_het36_max_min_fairness_perf", "light1000_het36_max_min_fairness",
               "light1000_het36_finish_time_fairness_perf", "light1000_het36_finish_time_fairness"]


@pytest.mark.parametrize("run", ALL_LP_RUNS)
def test_lp_policies_with_ecos_equal_gavel_job_by_job(run):
    """``optimum=ecos`` (the default): Gavel's own solver on cvxpy's problem data. Every shipped
    LP run, on all three workloads (the overloaded one included), finishes every job at Gavel's
    time (to a millisecond) and drops the same jobs."""
    res = _run(run)
    assert res.config["policy_opts"] in ({}, None) or dict(res.config["policy_opts"]).get("optimum", "ecos") == "ecos"
    ours, theirs, _, od, td = _per_job(res, run)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-3)
    assert od == td and len(ours) + len(od) == len(_trace(run.split("_")[0]))


# optimum=central: (run, share of jobs within one round, |average JCT gap| in %) as measured
# (docs/fidelity.md); the LPs' optima are not unique and Gavel's ECOS picks its own interior point
LP_RUNS = [pytest.param(*p, marks=pytest.mark.slow) for p in (  # (~10 s each: central is plain-numpy Newton)
    ("n2000_v100x48_max_min_fairness", 0.99, 0.1),
    ("n2000_v100x36_max_min_fairness", 0.92, 0.4),
    ("n2000_het36_max_min_fairness", 0.97, 0.1),
    ("light1000_het36_max_min_fairness", 0.98, 0.1),
    ("over1000_v100x36_max_min_fairness_perf", 0.96, 0.3),
    ("n2000_het36_max_min_fairness_perf", 0.96, 0.4),
    ("light1000_het36_max_min_fairness_perf", 0.98, 0.3),
    ("light1000_het36_finish_time_fairness_perf", 0.91, 0.4),
)]


@pytest.mark.parametrize("run,share,gap", LP_RUNS)
def test_lp_policies_central_within_a_round_of_gavel(run, share, gap):
    res = _run(run, policy_opts={"optimum": "central"})
    ours, theirs, ids, od, td = _per_job(res, run)
    w = _trace(run.split("_")[0])
    sub = w.submit_s[np.searchsorted(w.job_id, ids)]
    assert (np.abs(ours - theirs) <= GAVEL_ROUND_S).mean() >= share
    assert abs((ours - sub).mean() / (theirs - sub).mean() - 1) * 100 <= gap
    assert len(od ^ td) <= 0.01 * len(w)


@pytest.mark.slow  # (two whole LP replays with the non-default optimum=central: ~8 s)
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
    with pytest.raises(fastblox.ConfigError, match="optimum='middle'.*ecos, central, vertex"):
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


def test_without_ecos_an_lp_policy_names_the_extra_and_the_alternative(monkeypatch):
    """optimum=ecos (the default) without the ecos package: a one-line error naming the extra and
    optimum=central, never a silent change of solver; FIFO needs no LP and still runs."""
    import sys

    monkeypatch.setitem(sys.modules, "ecos", None)  # `import ecos` raises ImportError
    w = _trace("light1000")
    with pytest.raises(fastblox.ConfigError, match=r'needs the ecos package.*fastblox\[gavel\].*optimum=central') as e:
        fastblox.simulate(w, compat="gavel", cluster="36:36:36", policy="max_min_fairness")
    assert "\n" not in str(e.value)
    assert fastblox.simulate(w, compat="gavel", cluster="36:36:36", policy="fifo").summary["num_finished"] > 0


def _cvxpy_problem(kind, thr, sf, cap, since=None, rem=None, iso=None):
    """Gavel's problem as its policies write it in cvxpy (policies/max_min_fairness.py,
    finish_time_fairness.py, policy.py's get_base_constraints)."""
    import cvxpy as cp

    m, n = thr.shape
    sfa = np.repeat(sf[:, None], n, axis=1)
    x = cp.Variable((m, n))
    base = [x >= 0, cp.sum(cp.multiply(sfa, x), axis=0) <= cap, cp.sum(x, axis=1) <= 1]
    if kind == "max_min":
        obj = cp.Maximize(cp.min(cp.sum(cp.multiply(cg._max_min_coef(thr, sf, cap), x), axis=1)))
    else:
        fr = [(since[i] + rem[i] * cp.inv_pos(cp.sum(cp.multiply(thr[i], x[i])))) / iso[i] for i in range(m)]
        obj = cp.Minimize(fr[0] if m == 1 else cp.maximum(*fr))
    return cp.Problem(obj, base), x


from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def _lp_case(draw):
    m, n = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    thr = rng.uniform(0.05, 60.0, (m, n))
    thr[rng.random((m, n)) < 0.25] = 0.0  # Gavel's zero throughputs (k80, ResNet-50 on several GPUs)
    thr[:, 0] = np.maximum(thr[:, 0], 0.5)
    if draw(st.booleans()):  # alike jobs (many optima)
        thr[:] = thr[0]
    sf = rng.choice([1.0, 2.0, 4.0, 8.0], m)
    cap = rng.choice([4.0, 12.0, 36.0], n)
    since, rem, iso = rng.uniform(0, 1e5, m), rng.integers(1, 10 ** 6, m).astype(float), rng.uniform(1, 1e6, m)
    return thr, sf, cap, since, rem, iso


@settings(max_examples=60, deadline=None)
@given(_lp_case(), st.sampled_from(["max_min", "ftf"]))
def test_ecos_problem_data_equals_cvxpys(case, kind):
    """fastblox writes exactly the data cvxpy gives ECOS for Gavel's problems (same variables,
    rows, values to the bit, sparsity) and so gets cvxpy's (Gavel's) allocation to the bit."""
    import cvxpy as cp

    from fastblox import gavel_ecos

    thr, sf, cap, since, rem, iso = case
    prob, x = _cvxpy_problem(kind, thr, sf, cap, since, rem, iso)
    want, _, _ = prob.get_problem_data(cp.ECOS)
    if kind == "max_min":
        got = gavel_ecos.max_min_data(cg._max_min_coef(thr, sf, cap), sf, cap)
    else:
        got = gavel_ecos.ftf_data(thr, sf, cap, since, rem, iso)
    g, G = got["G"], want["G"]
    assert g.shape == G.shape
    np.testing.assert_array_equal(g.indptr, G.indptr)
    np.testing.assert_array_equal(g.indices, G.indices)
    np.testing.assert_array_equal(g.data, G.data)
    np.testing.assert_array_equal(got["c"], want["c"])
    np.testing.assert_array_equal(got["h"], want["h"])
    assert got["dims"] == {"l": want["dims"].nonneg, "q": list(want["dims"].soc), "e": want["dims"].exp}
    assert want["A"] is None
    prob.solve(solver="ECOS")
    ours = (gavel_ecos.max_min(cg._max_min_coef(thr, sf, cap), sf, cap) if kind == "max_min"
            else gavel_ecos.ftf(thr, sf, cap, since, rem, iso))
    if x.value is None:
        assert ours is None
    else:
        np.testing.assert_array_equal(ours, x.value.clip(min=0.0).clip(max=1.0))


@pytest.mark.parametrize("kind", ["max_min", "ftf"])
def test_ecos_problem_data_equals_cvxpys_on_a_real_job_set(kind):
    """The same on a problem of the size the runs solve: 80 jobs of light1000 on 36:36:36, those
    Gavel has no K80 throughput for among them (Gavel's throughputs)."""
    import cvxpy as cp

    from fastblox import gavel_ecos

    w = _trace("light1000")
    all_thr = cg.job_throughputs(w, ["k80", "p100", "v100"])  # (Gavel's LPs: types in alphabetical order)
    zero = np.flatnonzero((all_thr == 0).any(axis=1))[:10]
    idx = np.sort(np.concatenate([zero, np.setdiff1d(np.arange(len(w)), zero)[:80 - len(zero)]]))
    thr = all_thr[idx]
    sf = w.num_gpus[idx].astype(np.float64)
    cap = np.array([36.0, 36.0, 36.0])
    since, rem = np.linspace(0, 5e4, 80), w.iterations[idx].astype(np.float64)
    iso = rem / thr.max(axis=1) * 3.0
    prob, x = _cvxpy_problem(kind, thr, sf, cap, since, rem, iso)
    want, _, _ = prob.get_problem_data(cp.ECOS)
    got = (gavel_ecos.max_min_data(cg._max_min_coef(thr, sf, cap), sf, cap) if kind == "max_min"
           else gavel_ecos.ftf_data(thr, sf, cap, since, rem, iso))
    assert (thr == 0).any() and got["G"].shape == want["G"].shape
    for k in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got["G"], k), getattr(want["G"], k))
    np.testing.assert_array_equal(got["c"], want["c"])
    np.testing.assert_array_equal(got["h"], want["h"])
