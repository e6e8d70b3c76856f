"""The native kernel against its plain-Python twin on the three policies the kernel computes
itself: Tiresias' discretized 2D-LAS (``tiresias``), its Gittins variant (``tiresias-gittins``)
and Themis' lease auction (``themis``), on the realism cases (GPU types, racks, rates,
checkpoints, node events, admission, tracked subsets) in both time models; plus the invariants
of these policies, checked on the reference's record of the run (equal to the kernel's job by
job and step by step).
"""

import math
import os
import tempfile

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import fastblox
from fastblox.reference.native import level, simulate_native_reference
from strategies import RealCase, real_case
from test_engine_reference_realism import _cfg, assert_invariants, assert_same, run_kernel, run_reference

QUEUED = ["tiresias", "tiresias-gittins"]


# --------------------------------------------------------------------------- examples
_PROMOTE = st.one_of(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0]), st.floats(0.25, 5.0))
_F = st.one_of(st.sampled_from([0.0, 0.5, 0.8, 0.95]), st.floats(0.0, 0.999))
_DELTA = st.one_of(st.sampled_from([3250.0, 300.0, 50.0]), st.floats(1.0, 5000.0))
#: a contended cluster: up to 20 jobs arriving at most 150 s apart
BUSY = {"max_jobs": 20, "max_gap": 150, "min_jobs": 3}


def _with_time_model(cfg: dict, tm) -> dict:
    if tm is not None:
        cfg["tm"] = tm
        if tm == "rounds" and cfg["ckpt"] > cfg["round_s"] - cfg["restart"]:
            cfg["ckpt"] = 50.0  # as _cfg: a job stopped every round must keep some progress
    return cfg


@st.composite
def _thresholds(draw, case: RealCase):
    """0 to 3 queue limits (GPU-seconds): fractions of the median job's GPU-seconds (so jobs
    cross them), now and then a round number or any float."""
    svc = np.median(case.work / case.ref_rate * case.gpus)
    frac = st.floats(0.02, 3.0).map(lambda f: float(f * svc))
    x = st.one_of(frac, frac, frac, st.sampled_from([60.0, 400.0, 3250.0, 7200.0]), st.floats(1.0, 6000.0))
    return sorted({v for v in draw(st.lists(x, max_size=3)) if v > 0})


@st.composite
def queue_example(draw, policy, tm=None, **case_kw):
    """A case and a run configuration (``_cfg``) for Tiresias or Gittins: thresholds, the
    promotion knob and (Gittins) a quantum and a service distribution (the workload's, or a
    list of samples written to a file)."""
    case = draw(real_case(**case_kw))
    cfg = _with_time_model(draw(_cfg([policy])), tm)
    thr = draw(_thresholds(case))
    promote = draw(_PROMOTE)
    if cfg["tm"] == "events" and promote > 0 and thr:
        # promotions are steps of their own in events mode: jobs whose runs keep no progress
        # (shorter than restart + checkpoint) could take turns forever. A job promoted to queue
        # 0 runs at least thresholds[0] / GPUs seconds (Tiresias: nothing outranks it there):
        # more than that, so every promotion buys progress; and no less than 30 s (jobs taking
        # turns every few seconds make runs of 10^5 steps).
        low = case.g_max * (cfg["ckpt"] + cfg["restart"] + 30.0)
        thr = sorted({x + max(0.0, low - thr[0]) for x in thr})
    cfg["opts"] = {"thresholds": tuple(thr), "promote": promote}
    if policy == "tiresias-gittins":
        cfg["opts"]["delta"] = draw(_DELTA)
        if draw(st.booleans()):
            cfg["samples"] = draw(st.lists(st.floats(0.5, 20000.0), min_size=1, max_size=30))
    return case, cfg


@st.composite
def themis_example(draw, tm=None, **case_kw):
    case = draw(real_case(**case_kw))
    cfg = _with_time_model(draw(_cfg(["themis"])), tm)
    cfg["opts"] = {"f": draw(_F)}
    return case, cfg


def run_checked(case: RealCase, cfg: dict):
    """Kernel and reference on one case: job by job, the summary, the general invariants
    (``check_case``), and step by step (the kernel's series: a step at each of the reference's
    times, with as many jobs stopped).

    Known kernel bug (``test_relaunch_in_a_queue_reached_by_rounding``): a job relaunched in a
    queue that its summed service falls a rounding error short of is, for the kernel, one queue
    up for an ulp or two, with a step of its own there. An example where that happened (the
    reference records it) and the engines disagree is discarded, and only such an example."""
    path = None
    if cfg.get("samples"):
        fd, path = tempfile.mkstemp(suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            fh.write("\n".join(repr(x) for x in cfg["samples"]))
        cfg = {**cfg, "opts": {**cfg["opts"], "distribution": path}}
    try:
        ref = run_reference(case, cfg)
        res = run_kernel(case, cfg)
    finally:
        if path:
            os.unlink(path)
    if res is None:
        assert ref["deadlock"], "the kernel reports jobs that can never run; the reference ran them all"
        return None, ref
    assert not ref["deadlock"], "the reference found jobs that can never run; the kernel ran them all"
    assert_same(res, ref, case)
    assert_same_steps(res, ref)
    assert_invariants(res, ref, case, cfg)
    return res, ref


def relaunched_short_of_its_queue(ref, cfg: dict) -> bool:
    """A launch in a queue above the one its service (summed in floating point) gives."""
    if cfg["policy"] not in QUEUED:
        return False
    from fastblox.policies.tiresias import DEFAULT_THRESHOLDS

    thr = [float(x) for x in cfg.get("opts", {}).get("thresholds", DEFAULT_THRESHOLDS)]
    return any(c.queue > level(thr, c.svc) for h in ref["history"] for c in h)


def assert_same_steps(res, ref):
    """The kernel's steps (its series) are the reference's: at the same times, with the same
    number of jobs stopped."""
    ser = res.series
    log = ref["step_log"]
    np.testing.assert_array_equal(ser["t_s"].to_numpy(), [t for t, _ in log], err_msg="step times")
    np.testing.assert_array_equal(ser["num_preemptions"].to_numpy(), [k for _, k in log], err_msg="jobs stopped")


# --------------------------------------------------------------------------- invariants
TOL = 1e-6  # sums the test adds in its own order (service, seconds run, seconds waited)


def _close(a, b):
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def assert_queue_invariants(ref, cfg: dict):
    """Tiresias and Gittins, on the reference's record of the run (its launches and queue log),
    recomputing service and waiting from the launches:

    * a job enters queue 0 when admitted; its queue goes down one queue at a time, at the
      instants its service (GPU-seconds since admission or its last promotion) reaches a
      threshold while it runs, and up only by a promotion, to queue 0;
    * a job launched with ``s`` GPU-seconds of service is launched in queue ``#thresholds <= s``
      (to rounding);
    * a promotion only with the knob ``P`` on, of a waiting job of a lower queue, when it has
      waited ``P`` × the seconds it ran since its last promotion (waits counted after it first
      ran since then): at that instant in ``events`` mode, at the first boundary from it in
      ``rounds`` mode; and every job that waits that long in a lower queue is promoted;
    * a job stopped for another (preempted) ranks after it: Tiresias, a job waiting when the
      step began only stops running jobs of strictly lower queues (never one of its own queue;
      a running job that lost its GPUs to a higher queue in the walk may take those of a job
      behind it in its own queue); Gittins, a lower queue, or the same queue and a lower
      Gittins index (ties: arrival order).
    """
    from fastblox.policies.tiresias import DEFAULT_THRESHOLDS

    thr = [float(x) for x in cfg.get("opts", {}).get("thresholds", DEFAULT_THRESHOLDS)]
    P = float(cfg["opts"]["promote"])
    events = cfg["tm"] == "events"
    R = cfg["round_s"]
    end = ref["end_t"]
    for i, (qlog, hist) in enumerate(zip(ref["queue_log"], ref["history"])):
        if not qlog:
            assert not hist, f"job {i} ran without being admitted"
            continue
        assert qlog[0][1:] == (0, "admit") and [w for _, _, w in qlog].count("admit") == 1
        q = 0
        for t1, q1, why in qlog[1:]:
            if why == "cross":
                assert q1 == q + 1 <= len(thr), f"job {i}: queue {q} -> {q1} by a crossing"
            else:
                assert why == "promote" and q > 0 and q1 == 0, f"job {i}: queue {q} -> {q1} by {why}"
                assert P > 0, "a promotion with the knob off"
            q = q1
        promos = [t for t, _, w in qlog if w == "promote"]
        # walk the launches, tracking service, seconds run and seconds waited since the last promotion
        svc = ran = waited = 0.0
        last_end = None  # end of the last launch since the last promotion (None: none yet)
        p_next = 0  # promotions consumed

        def due_after(stop_t):
            """When a job that stopped at ``stop_t`` in a lower queue is due for promotion."""
            return max(stop_t, stop_t + (P * ran - waited))

        for c in hist:
            # promotions before this launch (at or before its start)
            while p_next < len(promos) and promos[p_next] <= c.t:
                tp = promos[p_next]
                assert last_end is not None and last_end <= tp and ran > 0, f"job {i}: promoted at {tp} without having run"
                due = due_after(last_end)
                if events:
                    assert _close(tp, due), f"job {i}: promoted at {tp}, due at {due}"
                else:
                    assert tp % R == 0 and due - TOL <= tp < due + R + TOL, f"job {i}: promoted at {tp}, due at {due}"
                svc = ran = waited = 0.0
                last_end = None
                p_next += 1
            if last_end is not None:
                if P > 0 and c.queue > 0:  # not promoted before this launch: not due yet
                    due = due_after(last_end)
                    if events:
                        assert c.t <= due + TOL, f"job {i}: launched at {c.t} in queue {c.queue}, promotion due at {due}"
                    else:
                        assert c.t < due + R + TOL, f"job {i}: launched at {c.t} in queue {c.queue}, promotion due at {due}"
                if ran > 0:  # (a launch of no time since the promotion: not "after having run")
                    waited += c.t - last_end
            g = len(c.gpus)
            assert _close(c.svc, svc), f"job {i}: service at launch {c.svc}, launches say {svc}"
            lv = level(thr, c.svc)
            assert c.queue == lv or any(_close(c.svc, x) for x in thr), f"job {i}: queue {c.queue} with service {c.svc}"
            # its crossings while it ran: logged, at the instants the service reaches the thresholds
            cross = c.crossed
            assert all(t <= c.end for t, _ in cross) and all(t >= c.t or c.svc >= thr[k - 1] for t, k in cross)
            assert [k for _, k in cross] == list(range(c.queue + 1, c.queue + 1 + len(cross)))
            for t, k in cross:
                assert _close(c.svc + (t - c.t) * g, thr[k - 1]), f"job {i}: crossed into queue {k} at {t}"
            s_end = c.svc + c.el * g
            if c.queue + len(cross) < len(thr):
                nxt = thr[c.queue + len(cross)]
                assert s_end <= nxt * (1 + 1e-9) + TOL, f"job {i}: service {s_end} past {nxt} without crossing"
            svc += c.el * g
            ran += c.el
            last_end = c.end
        # promotions after the last launch, and one that was due but never came
        while p_next < len(promos):
            tp = promos[p_next]
            assert last_end is not None and ran > 0
            due = due_after(last_end)
            assert _close(tp, due) if events else (tp % R == 0 and due - TOL <= tp < due + R + TOL)
            p_next += 1
            svc = ran = waited = 0.0
            last_end = None
        if hist and hist[-1].why in ("preempt", "fail") and P > 0 and last_end is not None:
            q_now = [k for _, k, _ in qlog][-1]
            if q_now > 0 and ran > 0:
                assert due_after(last_end) >= end - (0 if events else R) - TOL, f"job {i}: promotion due but not done"
    for t, j, v, kj, kv in ref["preemptions"]:
        if cfg["policy"] == "tiresias":
            assert kv[1] == 0, "a victim runs"
            if kj[1] == 1:  # waiting when the step began (not a victim placed again)
                assert kv[0] > kj[0], f"t={t}: job {j} (queue {kj[0]}) preempted job {v} of queue {kv[0]}"
            assert (kj, j) < (kv, v)
        else:
            assert kj[0] <= kv[0] and (kj, j) < (kv, v), f"t={t}: job {j} {kj} preempted job {v} {kv}"


def assert_themis_invariants(ref, case: RealCase, cfg: dict):
    """A job stopped for another ranks after it: a bidder is never stopped for a job getting
    leftovers, and within each group the victim has the lower bid (leftovers: the better rho).

    With every job admitted at once (no load-based admission), the auction at each preemption
    is worked out again from the record of the launches (remaining work from the progress each
    launch kept): the keys the reference ordered the two jobs by are the rule's."""
    for t, j, v, kj, kv in ref["preemptions"]:
        assert kj[0] <= kv[0] and (kj, j) < (kv, v), f"t={t}: job {j} {kj} preempted job {v} {kv}"
        if cfg["theta"] == 0:
            keys = _themis_keys(ref, case, cfg, t)
            for i, k in ((j, kj), (v, kv)):
                part, key = keys[i]
                if part is None:
                    continue  # its rho within rounding of the cut: either side
                assert part == k[0], f"t={t}: job {i} bids {k[0] == 0}, the rule says {part == 0}"
                assert key == k[1] or abs(key - k[1]) <= TOL * abs(key), f"t={t}: job {i} key {k[1]}, the rule {key}"


def _themis_keys(ref, case: RealCase, cfg: dict, t):
    """Themis' ``(part, key)`` of every active job at the step at ``t``, from the launches."""
    L, restart, f = cfg["round_s"], cfg["restart"], cfg["opts"]["f"]
    rho, alone = {}, {}
    for i, hist in enumerate(ref["history"]):
        fin = ref["finish"][i]
        if case.submit[i] > t or 0 <= fin <= t:
            continue  # not arrived, or done before the step
        left, run_el, rate = case.work[i], None, 0.0
        for c in hist:
            if c.t >= t:
                break  # launched at this step (after the order) or later
            if c.end < t or (c.end == t and c.why == "fail"):
                left -= c.kept * c.rate  # (a node failure at t comes before the step)
            else:
                run_el, rate = t - c.t, c.rate  # running when the step began
        if run_el is not None:
            left -= max(0.0, run_el - restart) * rate
        alone[i] = case.work[i] / case.ref_rate[i]
        rho[i] = ((t + L - case.submit[i]) + left / case.ref_rate[i]) / alone[i]
    k = max(1, math.ceil((1.0 - f) * len(rho)))
    cut = sorted(rho.values(), reverse=True)[k - 1]
    keys = {}
    for i, r in rho.items():
        part = 0 if r >= cut else 1
        if abs(r - cut) <= TOL * abs(cut):
            part = None
        run_rho = r - L / alone[i]
        keys[i] = (part, -(r / run_rho) if run_rho > 0 else -math.inf) if r >= cut else (part, -r)
    return keys


def _events(ref, cfg):
    """What the example exercised (``--hypothesis-show-statistics``)."""
    event(f"{cfg['policy']} {cfg['tm']}")
    whys = [w for log in ref["queue_log"] for _, _, w in log]
    event(f"crossings: {min(whys.count('cross'), 3)}+, promotions: {min(whys.count('promote'), 3)}+")
    event(f"preemptions: {min(len(ref['preemptions']), 3)}+, failures: {min(sum(ref['n_fail']), 1)}+")
    if relaunched_short_of_its_queue(ref, cfg):
        event("relaunched in a queue its summed service falls short of (the fixed rounding case)")


# --------------------------------------------------------------------------- the comparisons
def check_queues(example):
    case, cfg = example
    res, ref = run_checked(case, cfg)
    if res is not None:
        assert_queue_invariants(ref, cfg)
        _events(ref, cfg)


def check_themis(example):
    case, cfg = example
    res, ref = run_checked(case, cfg)
    if res is not None:
        assert_themis_invariants(ref, case, cfg)
        _events(ref, cfg)


@given(queue_example("tiresias", "events"))
def test_tiresias_events_matches_reference(example):
    """Queues, crossings as steps, promotions, preemption and backfilling on heterogeneous
    clusters with racks, rates, restart costs, checkpoints, node events and admission."""
    check_queues(example)


@given(queue_example("tiresias", "rounds"))
def test_tiresias_rounds_matches_reference(example):
    """Crossings seen at the next boundary (at their own instant in the queue order),
    promotions at the first boundary from their due time."""
    check_queues(example)


@given(queue_example("tiresias-gittins"))
def test_gittins_matches_reference(example):
    """The same queues, the Gittins index of the service within a queue; both time models,
    the workload's distribution or a file of samples."""
    check_queues(example)


@given(queue_example("tiresias", **BUSY))
def test_tiresias_contended_matches_reference(example):
    """Many jobs arriving close together: long queues, many crossings, preemptions, promotions."""
    check_queues(example)


@given(queue_example("tiresias-gittins", **BUSY))
def test_gittins_contended_matches_reference(example):
    check_queues(example)


@given(themis_example())
def test_themis_matches_reference(example):
    """The lease auction recomputed at every step, in both time models (the lease: the round)."""
    check_themis(example)


@given(themis_example(**BUSY))
def test_themis_contended_matches_reference(example):
    check_themis(example)


@pytest.mark.parametrize("policy", ["tiresias", "tiresias-gittins", "themis"])
@pytest.mark.parametrize("tm", ["events", "rounds"])
def test_larger_workload_matches_reference(policy, tm):
    """A Gavel-like workload (jobs of hours to days) on 4 nodes of 4 GPUs with two outages, a
    restart cost and checkpoints: the policies' defaults (Tiresias' 3,250 / 7,200 GPU-s,
    Gittins on the workload's distribution, Themis' f = 0.8), Tiresias' knob at 2."""
    w = fastblox.gavel_like_workload(120, mean_interarrival_s=300, seed=11)
    n = len(w)
    case = RealCase(w.submit_s, w.num_gpus, w.duration_s, [4] * 4, [0] * 4, ("v100",), None,
                    np.full(n, -1), np.ones(n), np.zeros((0, 1, 17)), np.ones(1), np.zeros(0), np.zeros((0, 1, 17)),
                    [(20_000.0, "fail", 1), (50_000.0, "recover", 1), (100_000.0, "fail", 3), (100_500.0, "recover", 3)],
                    16)
    cfg = {"policy": policy, "placement": "first-fit", "theta": 0.0, "tm": tm, "round_s": 300.0, "restart": 20.0,
           "preempt": True, "ckpt": 200.0, "mnf": 1.0, "rf": 1.0,
           "opts": {"f": 0.8} if policy == "themis" else {"promote": 2.0}}
    res, ref = run_checked(case, cfg)
    assert res is not None and sum(ref["n_preempt"]) > 0 and sum(ref["n_fail"]) > 0
    if policy == "themis":
        assert_themis_invariants(ref, case, cfg)
    else:
        cfg["opts"].update(thresholds=(3250.0, 7200.0))
        assert_queue_invariants(ref, cfg)
        assert any(w == "promote" for log in ref["queue_log"] for _, _, w in log)


def _both(submit, gpus, work, node_gpus, policy, opts, **kw):
    """The kernel (through simulate) and the reference on a small hand-made case."""
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=work)
    res = fastblox.simulate(w, cluster=",".join(f"1x{g}" for g in node_gpus), policy=policy, policy_opts=opts,
                            **kw)
    rkw = {"thresholds": tuple(float(x) for x in str(opts["thresholds"]).split(";")),
           "promote": float(opts.get("promote", 0.0))}
    rkw.update({k: (float(v) if k == "round_s" else v) for k, v in kw.items()})
    ref = simulate_native_reference(submit, gpus, work, node_gpus, policy=policy, **rkw)
    return res, ref


@pytest.mark.parametrize("tm", ["events", "rounds"])
def test_tiresias_hand_made_cases(tm):
    """test_policies' Tiresias cases, worked out by hand, on both engines."""
    # B waits behind A in queue 0 until A's service reaches 3,250 GPU-s (t = 3,250; rounds:
    # the boundary after), then B preempts A
    res, ref = _both([0.0, 100.0], [1, 1], [10_000.0, 100.0], [1], "tiresias", {"thresholds": "3250"},
                     time_model=tm, round_s=300)
    b, a = (3250.0, 10_100.0) if tm == "events" else (3300.0, 10_300.0)  # (rounds: A resumes at 3,600)
    for first, fin, pre in ((res.jobs["first_start_s"].to_list(), res.jobs["finish_s"].to_list(),
                             res.jobs["num_preemptions"].to_list()),
                            (ref["first_start"], ref["finish"], ref["n_preempt"])):
        assert first[1] == b and fin[1] == b + 100 and pre == [1, 0] and fin[0] == a
    # GPU-seconds: a 2-GPU job leaves queue 0 after 3,250 / 2 s
    res, ref = _both([0.0, 10.0], [2, 2], [5_000.0, 50.0], [2], "tiresias", {"thresholds": "3250"}, time_model=tm,
                     round_s=25)
    assert res.jobs["first_start_s"].to_list()[1] == ref["first_start"][1] == 1625.0


@pytest.mark.parametrize("tm", ["events", "rounds"])
def test_tiresias_promotions_by_hand(tm):
    """One GPU, threshold 100 GPU-s, P = 1; A (1,000 s) from 0, B (1,000 s) from 50.

    events: A crosses at 100, B (queue 0) preempts it; A ran 100 s, so it is due at 200, when B
    crosses: A, promoted, preempts B; and so on every 100 s: A ends at 1,900 (9 preemptions), B
    at 2,000 (9). rounds of 60 s: every crossing and promotion waits for the next boundary, so
    every run lasts 120 s (A: 0-120, promoted at 240 = 120 + 120, ...): A ends at 1,960, B at
    2,020 (the GPU idles from 1,960 to the boundary at 1,980), 8 preemptions each."""
    res, ref = _both([0.0, 50.0], [1, 1], [1000.0, 1000.0], [1], "tiresias", {"thresholds": "100", "promote": 1},
                     time_model=tm, round_s=60)
    fin, pre, promo = ([1900.0, 2000.0], [9, 9], [200.0, 400.0]) if tm == "events" else \
        ([1960.0, 2020.0], [8, 8], [240.0, 480.0])
    assert res.jobs["finish_s"].to_list() == ref["finish"] == fin
    assert res.jobs["num_preemptions"].to_list() == ref["n_preempt"] == pre
    assert [t for t, _, w in ref["queue_log"][0] if w == "promote"][:2] == promo


def test_themis_by_hand():
    """The case of ``test_themis_bidders_are_the_worst_rho_as_documented`` as docs/semantics.md
    states the rule (rho at the end of the lease without GPUs): at 900 job 2's rho is (900 + 300
    - 850 + 100) / 100 = 4.5, job 1's (900 + 300 + 1000) / 1000 = 2.2; one bids (ceil(0.5 × 2)):
    job 2, which runs 900-1000; job 1 starts at the next boundary, 1,200."""
    sub, g, work = [0.0, 0.0, 850.0], [1, 1, 1], [900.0, 1000.0, 100.0]
    w = fastblox.Workload.from_arrays(submit_s=sub, num_gpus=g, duration_s=work)
    res = fastblox.simulate(w, cluster="1x1", policy="themis", policy_opts={"f": 0.5}, preempt=False,
                            time_model="rounds", round_s=300)
    ref = simulate_native_reference(sub, g, work, [1], policy="themis", themis_f=0.5, preempt=False,
                                    time_model="rounds", round_s=300.0)
    assert res.jobs["first_start_s"].to_list() == ref["first_start"] == [0.0, 1200.0, 900.0]


# --------------------------------------------------------------------------- a kernel bug found by these tests (fixed)
def test_relaunch_in_a_queue_reached_by_rounding():
    """Tiresias, events, threshold 1,000 GPU-s, one node of 7 GPUs, all jobs at t = 0.

    Job 1 (6 GPUs) runs from 90 and crosses 1,000 GPU-s at 90 + 1000 / 6 = 256.66666666666663,
    where job 2 (queue 0) preempts it: it keeps queue 1, but its service 6 × (256.66666666666663
    - 90) = 999.9999999999998 is just short of 1,000. It is relaunched at 400.5238095238095 (job 3
    done; job 2, queue 1, entered it later, waits). Nothing happens until job 1 ends at
    400.8571428571429: six steps. The kernel adds a seventh at 400.5238095238096 (one ulp later:
    400.5238095238095 + (1000 - 999.9999999999998) / 6), at which nothing happens."""
    g, work = [3, 6, 7, 6], [90.0, 167.0, 143.0, 1.0]
    w = fastblox.Workload.from_arrays(submit_s=[0.0] * 4, num_gpus=g, duration_s=work)
    ref = simulate_native_reference([0.0] * 4, g, work, [7], policy="tiresias", thresholds=(1000.0,))
    steps = [0.0, 90.0, 256.66666666666663, 399.5238095238095, 400.5238095238095, 400.8571428571429]
    assert [t for t, _ in ref["step_log"]] == steps
    assert ref["history"][1][1].queue == 1 and ref["history"][1][1].svc < 1000.0
    res = fastblox.simulate(w, cluster="1x7", policy="tiresias", policy_opts={"thresholds": "1000"},
                            record_series=True)
    assert res.jobs["finish_s"].to_list() == ref["finish"]  # the same run...
    assert res.series["t_s"].to_list() == steps  # ...in the same steps
