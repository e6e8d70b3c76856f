"""Dynamic policy selection (fastblox.dynamic): equal to the plain run with one candidate,
look-aheads that never touch the real run, deterministic choices, the score's meaning, errors."""

from __future__ import annotations

import io

import numpy as np
import polars as pl
import pytest

import fastblox
from fastblox import parts
from fastblox.dynamic import lookahead_score, simulate_dynamic
from fastblox.engine import prepare_native
from fastblox.errors import ConfigError
from fastblox.kernels import enums
from fastblox.kernels import engine as kengine
from fastblox.sweep import load_config, run_sweep

# contended: 1-GPU jobs of ~17 h at 9 jobs/h on 48 GPUs; and Gavel's 1-8 GPU mix with restarts
BLOX_W = fastblox.blox_paper_workload(9, 500, 1)
BLOX_KW = {"cluster": "12x4"}
GAVEL_W = fastblox.gavel_like_workload(300, seed=2)
GAVEL_KW = {"cluster": "6x4", "restart_s": 30.0, "admission": "load:1.5"}


def _parquet(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


@pytest.mark.parametrize("time_model", ["events", "rounds"])
@pytest.mark.parametrize("policy", ["fifo", "las", "srtf"])
@pytest.mark.parametrize("case", ["blox", "gavel"])
def test_one_candidate_is_the_plain_run(case, policy, time_model):
    w, kw = (BLOX_W, BLOX_KW) if case == "blox" else (GAVEL_W, GAVEL_KW)
    plain = fastblox.simulate(w, policy=policy, time_model=time_model, **kw)
    dyn = simulate_dynamic(w, candidates=[policy], period_s=1800.0, horizon_s=5400.0, time_model=time_model, **kw)
    assert _parquet(dyn.jobs) == _parquet(plain.jobs)
    for k, v in plain.summary.items():
        if k not in ("sim_wall_s", "compile_s"):
            assert dyn.summary[k] == v or (v != v and dyn.summary[k] != dyn.summary[k]), k
    assert dyn.summary["num_switches"] == 0 and set(dyn.periods["policy"]) == {policy}
    # the state is built as simulate builds it: the same configuration but for the policy
    differ = {"policy", "preempt", "policy_opts", "dynamic"}
    assert {k: v for k, v in dyn.config.items() if k not in differ} == {
        k: v for k, v in plain.config.items() if k not in differ}
    assert dyn.summary["num_lookaheads"] > 10  # the look-aheads did run (and changed nothing)


def _snapshot(st) -> list:
    arrays = []
    for tup in (st.run, st.nodes, st.q, st.s, st.jobs):
        arrays += [np.array(a, copy=True) for a in tup]
    return arrays + [st.series.copy(), st.si.copy(), st.sf.copy(), st.ci.copy(), st.cf.copy()]


@pytest.mark.parametrize("lookahead", ["known", "trace"])
def test_lookahead_never_changes_the_real_state(lookahead):
    st = prepare_native(GAVEL_W, policy="fifo", time_model="rounds", record_series=True, **GAVEL_KW).state
    t = 40 * 3600.0
    assert st.drive(np.nextafter(t, -np.inf)) == kengine.PAUSED
    before = _snapshot(st)
    assert np.isin(st.run.status, [enums.WAITING, enums.OVERFLOW]).sum() > 5  # a queue to reorder
    scores = [lookahead_score(st, parts.POLICIES.get(p), t, 6 * 3600.0, lookahead) for p in ("fifo", "las", "srtf")]
    after = _snapshot(st)
    assert len(before) == len(after) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(before, after))
    assert len(set(scores)) == 3  # the candidates do differ here
    # the same look-ahead twice: the same score (nothing leaked into the state or between copies)
    again = [lookahead_score(st, parts.POLICIES.get(p), t, 6 * 3600.0, lookahead) for p in ("fifo", "las", "srtf")]
    assert again == scores


def test_choices_are_deterministic_and_follow_the_scores():
    kw = dict(period_s=3600.0, horizon_s=3 * 3600.0, time_model="rounds", **GAVEL_KW)
    a = simulate_dynamic(GAVEL_W, **kw)
    b = simulate_dynamic(GAVEL_W, **kw)
    assert a.periods.equals(b.periods) and _parquet(a.jobs) == _parquet(b.jobs)
    per = a.periods
    assert per["period"].to_list() == list(range(per.height))
    assert a.summary["policy_per_period"] == per["policy"].to_list()
    assert a.summary["num_periods"] == per.height
    assert len(set(per["policy"])) >= 2, "this workload should make the choice change"
    scores = per.select("score_fifo_s", "score_las_s", "score_srtf_s").to_numpy()
    names = ["fifo", "las", "srtf"]
    current = "fifo"
    for row, chosen, n_scored in zip(scores, per["policy"], per["num_jobs_scored"]):
        if n_scored == 0:
            assert np.isnan(row).all() and chosen == current
        else:
            best = row.min()
            tied = [names[i] for i in np.flatnonzero(row == best)]
            assert chosen == (current if current in tied else tied[0])
        current = chosen
    switches = sum(x != y for x, y in zip(per["policy"][1:], per["policy"][:-1])) + (per["policy"][0] != "fifo")
    assert a.summary["num_switches"] == switches == per["switched"].sum()
    shares = sum(a.summary[f"share_{n}"] for n in names)
    assert shares == pytest.approx(1.0)
    assert (per["start_s"].diff().drop_nulls() == 3600.0).all()


def test_score_is_the_mean_jct_when_the_horizon_covers_the_run():
    """From the first arrival, a look-ahead that sees every arrival and runs to the end scores
    exactly the mean JCT of the whole run; one that sees only the first arrival scores that
    job alone on an empty cluster."""
    w, kw = GAVEL_W, GAVEL_KW
    for policy in ("fifo", "srtf"):
        plain = fastblox.simulate(w, policy=policy, **kw)
        pol = parts.POLICIES.get(policy)
        st = prepare_native(w, policy=pol, **kw).state
        t0 = float(w.submit_s[0])
        horizon = 1e9
        assert lookahead_score(st, pol, t0, horizon, "trace") == pytest.approx(plain.summary["avg_jct_s"], rel=1e-12)
        first = w.submit_s == t0
        alone = w.duration_s[first] + kw["restart_s"]
        assert lookahead_score(st, pol, t0, horizon, "known") == pytest.approx(alone.mean(), rel=1e-12)


def test_unfinished_jobs_count_their_remaining_work():
    """A horizon too short for the known job to finish: (H - submit) + remaining = its run time."""
    w = fastblox.Workload.from_arrays(submit_s=[0.0, 10.0], num_gpus=[1, 1], duration_s=[1000.0, 50.0])
    pol = parts.POLICIES.get("fifo")
    st = prepare_native(w, policy=pol, cluster="1x1").state
    # at t = 0 only job 0 is known; after 100 s it has 900 s to go: 100 + 900 = 1000
    assert lookahead_score(st, pol, 0.0, 100.0, "known") == pytest.approx(1000.0)
    # the oracle of arrivals also counts job 1, waiting behind it: (100 - 10) + 50
    assert lookahead_score(st, pol, 0.0, 100.0, "trace") == pytest.approx((1000.0 + 140.0) / 2)
    srtf = parts.POLICIES.get("srtf")
    # SRTF preempts job 0 for job 1 at t = 10: job 1 done at 60 (JCT 50), job 0 has 950 - ... left
    got = lookahead_score(st, srtf, 0.0, 100.0, "trace")
    assert got == pytest.approx((50.0 + (100.0 + (1000.0 - 10.0 - 40.0))) / 2)


def test_write_and_the_sweep_point(tmp_path):
    res = simulate_dynamic(GAVEL_W, period_s=7200.0, time_model="rounds", **GAVEL_KW)  # 6 h look-ahead
    paths = res.write(tmp_path / "run")
    assert (tmp_path / "run" / "periods.parquet") in paths
    assert pl.read_parquet(tmp_path / "run" / "periods.parquet").equals(res.periods)
    assert res.config["policy"] == "dynamic" and res.config["dynamic"]["candidates"] == ["fifo", "las", "srtf"]

    cfg = {"base": {"workload": "gavel", "num_jobs": 300, "seed": 2, "time_model": "rounds", "period_s": 7200,
                    **{k: v for k, v in GAVEL_KW.items()}},
           "grid": {"policy": ["srtf", "dynamic"]}}
    out = run_sweep(cfg, tmp_path / "sweep", executor="threads", workers=2, progress=False)
    assert out.ok
    s = out.summary
    dyn = s.filter(pl.col("policy") == "dynamic").row(0, named=True)
    plain = s.filter(pl.col("policy") == "srtf").row(0, named=True)
    assert dyn["avg_jct_s"] == res.summary["avg_jct_s"] and dyn["num_switches"] == res.summary["num_switches"]
    assert dyn["candidates"] == "fifo,las,srtf" and dyn["period_s"] == 7200.0 and dyn["horizon_s"] == 21600.0
    assert plain["candidates"] is None and plain["period_s"] is None  # ignored by other policies
    periods = pl.read_parquet(tmp_path / "sweep" / "points" / f"{dyn['point_id']}.periods.parquet")
    assert periods.equals(res.periods)
    # serial gives the same bytes
    run_sweep(cfg, tmp_path / "serial", executor="serial", progress=False)
    for name in (f"{dyn['point_id']}.parquet", f"{dyn['point_id']}.periods.parquet"):
        assert (tmp_path / "serial" / "points" / name).read_bytes() == (tmp_path / "sweep" / "points" / name).read_bytes()


@pytest.mark.parametrize("kw, msg", [
    ({"candidates": ["fifo", "lass"]}, "candidate 'lass': unknown policy 'lass'; choose one of"),
    ({"candidates": []}, "at least one candidate"),
    ({"candidates": ["las", "LAS"]}, "'las' given twice"),
    ({"candidates": 3}, "candidates must be a list"),
    ({"period_s": 0}, "period_s must be a positive number of seconds, got 0"),
    ({"period_s": -5.0}, "period_s must be a positive"),
    ({"period_s": float("nan")}, "period_s must be a positive"),
    ({"period_s": True}, "period_s must be a positive"),
    ({"horizon_s": float("inf")}, "horizon_s must be a positive"),
    ({"lookahead": "psychic"}, "lookahead must be one of known, trace"),
    ({"blox_compat": True}, "compat engine cannot pause"),
    ({"policy": "las"}, "unexpected keyword 'policy' (the candidates are the policies)"),
    ({"clusterr": "8x4"}, "unexpected keyword 'clusterr' (not a keyword of fastblox.simulate)"),
    ({"cluster": "8by4"}, "--cluster: cannot read"),
])
def test_bad_input(kw, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        simulate_dynamic(BLOX_W, **kw)


def test_candidates_that_cannot_take_over_a_paused_run_are_refused():
    planner = parts.Policy("toy-planner", enums.POL_CUSTOM, True, True, "a planner", kind=enums.KIND_PLAN,
                           planner=lambda ctx, opts: None)
    with pytest.raises(ConfigError, match="'toy-planner' is a planner"):
        simulate_dynamic(BLOX_W, candidates=["fifo", planner])
    if "gavel" in parts.POLICIES:
        with pytest.raises(ConfigError, match="'gavel' is a planner"):
            simulate_dynamic(BLOX_W, candidates=["fifo", "gavel"])
    if "tiresias" in parts.POLICIES:
        with pytest.raises(ConfigError, match="'tiresias' moves jobs between queues"):
            simulate_dynamic(BLOX_W, candidates=["tiresias", "srtf"])
        # the public switch refuses it as well, and the paused run is left as it was
        st = fastblox.prepare_native(BLOX_W, policy="las").state
        st.drive(3600.0)
        before = st.ci.copy()
        with pytest.raises(ConfigError, match="set_policy: 'tiresias' moves jobs between queues"):
            st.set_policy(parts.POLICIES.get("tiresias"))
        assert (st.ci == before).all() and st.policy.name == "las"


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10-18 s on an empty cache)
def test_other_orderings_and_user_policies_can_be_candidates():
    """SJF, LAS-GPU, Themis and a Python policy: one candidate is still the plain run."""
    def fewest_gpus(jobs, now):
        return jobs.num_gpus * 1e9 + jobs.submit_s

    for cand in ("sjf", "las-gpu", "themis", fewest_gpus):  # themis: rounds by default, here too
        plain = fastblox.simulate(GAVEL_W, policy=cand, **GAVEL_KW)
        dyn = simulate_dynamic(GAVEL_W, candidates=[cand], period_s=7200.0, **GAVEL_KW)
        assert _parquet(dyn.jobs) == _parquet(plain.jobs)
    mixed = simulate_dynamic(GAVEL_W, candidates=["fifo", fewest_gpus, "sjf"], period_s=7200.0, **GAVEL_KW)
    assert set(mixed.periods["policy"]) <= {"fifo", "fewest_gpus", "sjf"} and mixed.summary["num_periods"] > 10


@pytest.mark.parametrize("cfg, key", [
    ({"base": {"policy": "dynamic", "blox_compat": True}}, "[base] policy"),
    ({"base": {"policy": "dynamic", "candidates": ["fifo", "nope"]}}, "[base] candidates"),
    ({"base": {"policy": "dynamic", "candidates": "fifo"}, "grid": {"period_s": [3600, -1]}}, "[grid] period_s"),
    ({"base": {"policy": "dynamic", "horizon_s": "1h"}}, "[base] horizon_s"),
    ({"base": {"policy": "dynamic", "lookahead": "future"}}, "[base] lookahead"),
    ({"base": {"policy": "dynamic"}, "grid": {"cases": [{"candidates": []}]}}, "[grid] cases[0] candidates"),
])
def test_bad_dynamic_sweep_config(cfg, key):
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    assert key in str(e.value)


def test_dynamic_sweep_keys_and_ids():
    c = load_config({"base": {"workload": "gavel", "num_jobs": 50, "period_s": 1800},
                     "grid": {"policy": ["fifo", "dynamic"], "candidates": [["las", "srtf"], "srtf"]}})
    # the candidates only matter to the dynamic points: fifo is one point, dynamic two
    assert sorted((p.params["policy"], p.params["candidates"]) for p in c.points) == [
        ("dynamic", "las,srtf"), ("dynamic", "srtf"), ("fifo", None)]
    fifo = next(p for p in c.points if p.params["policy"] == "fifo")
    plain = load_config({"base": {"workload": "gavel", "num_jobs": 50}}).points[0]
    assert fifo.id == plain.id  # the dynamic keys do not enter the id of other points


@pytest.mark.parametrize("policy", ["tiresias", "las", "fifo"])
def test_prepared_run_driven_in_pieces_equals_simulate(policy):
    """``prepare_native`` builds the run ``simulate`` would (same config); driven in pieces (paused
    every 6 hours, one piece forked with ``copy()`` and thrown away) it gives the same jobs."""
    kw = dict(GAVEL_KW, record_series=True)
    plain = fastblox.simulate(GAVEL_W, policy=policy, **kw)
    run = fastblox.prepare_native(GAVEL_W, policy=policy, **kw)
    st = run.state
    t = float(GAVEL_W.submit_s[0])
    pauses = 0
    while (code := st.drive(t)) == kengine.PAUSED:
        if pauses == 3:
            st.copy().drive()  # a look-ahead to the end, on a fork
        t += 6 * 3600.0
        pauses += 1
    assert code == kengine.FINISHED and pauses > 3
    res = run.result(sim_s=0.0)
    assert res.config == plain.config
    assert res.jobs.equals(plain.jobs)
    assert res.series.equals(plain.series)
