"""The native kernel against its plain-Python twin, and the invariants of every run."""

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastblox
from fastblox.reference.native import simulate_native_reference
from strategies import per_item, small_case

POLICIES = ["fifo", "las", "las-gpu", "srtf", "sjf"]
PLACEMENTS = ["first-fit", "consolidated", "blox", "yarn"]


def _run_both(case, policy, placement, theta, tm, restart, preempt, round_s=300.0, backfill=True):
    submit, gpus, dur, node_gpus = case
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    cluster = ",".join(f"1x{g}" for g in node_gpus)
    ref = simulate_native_reference(submit, gpus, dur, node_gpus, policy=policy, placement=placement, theta=theta,
                                    time_model=tm, round_s=round_s, restart_s=restart, preempt=preempt,
                                    backfill=backfill)
    opts = {} if backfill else {"backfill": False}
    try:
        res = fastblox.simulate(w, cluster=cluster, policy=policy, placement=placement,
                                admission=f"load:{theta}" if theta else "accept-all", time_model=tm, round_s=round_s,
                                restart_s=restart, preempt=preempt, policy_opts=opts)
    except fastblox.SimulationError:
        assert ref["deadlock"], "kernel reports a deadlock the reference does not see"
        return None, ref
    assert not ref["deadlock"]
    return res, ref


def _nan(x):
    a = np.asarray(x, dtype=np.float64)
    return np.where(a < 0, np.nan, a)


def _assert_same(res, ref):
    jobs = res.jobs
    np.testing.assert_array_equal(jobs["finish_s"].to_numpy(), _nan(ref["finish"]))
    np.testing.assert_array_equal(jobs["first_start_s"].to_numpy(), _nan(ref["first_start"]))
    np.testing.assert_array_equal(jobs["num_preemptions"].to_numpy(), np.asarray(ref["n_preempt"]))
    np.testing.assert_allclose(jobs["attained_s"].to_numpy(), np.asarray(ref["attained"]), rtol=0, atol=1e-6)
    assert res.summary["num_steps"] == ref["steps"]


def _assert_invariants(res, restart, gpus_total):
    j = res.jobs
    fin = j["finish_s"].to_numpy()
    sub = j["submit_s"].to_numpy()
    dur = j["duration_s"].to_numpy()
    start = j["first_start_s"].to_numpy()
    npre = j["num_preemptions"].to_numpy()
    att = j["attained_s"].to_numpy()
    assert np.isfinite(fin).all(), "every job finishes"  # all tracked by default
    assert (start >= sub).all() and (fin >= start).all()
    # a job needs its work plus one restart per launch; it holds GPUs no longer than that
    launches = npre + 1
    assert (fin - start >= dur - 1e-6).all()
    assert (att >= dur - 1e-6).all()
    assert (att <= dur + launches * restart + 1e-6).all(), "work is conserved"
    if restart == 0:
        np.testing.assert_allclose(att, dur, rtol=1e-9, atol=1e-6)
    assert res.summary["utilisation"] <= 1 + 1e-9


@pytest.mark.parametrize("tm", ["events", "rounds"])
@pytest.mark.parametrize("policy", POLICIES)
@per_item()
@given(case=small_case(), placement=st.sampled_from(PLACEMENTS), theta=st.sampled_from([0.0, 1.0, 1.5]),
       restart=st.sampled_from([0.0, 30.0]), preempt=st.booleans(), backfill=st.booleans())
def test_kernel_matches_reference(case, policy, placement, theta, tm, restart, preempt, backfill):
    """Every policy × time model is an item of its own (each draws the placements, ~10 examples
    per policy × placement × time model at the ``ci`` profile); ``fifo`` and ``sjf`` with and
    without backfilling."""
    backfill = backfill or policy not in ("fifo", "sjf")
    res, ref = _run_both(case, policy, placement, theta, tm, restart, preempt, backfill=backfill)
    if res is None:
        return
    _assert_same(res, ref)
    _assert_invariants(res, restart, sum(case[3]))


@given(case=small_case(integral=False), policy=st.sampled_from(POLICIES), tm=st.sampled_from(["events", "rounds"]))
def test_kernel_matches_reference_fractional_times(case, policy, tm):
    res, ref = _run_both(case, policy, "first-fit", 0.0, tm, 0.0, True, round_s=60.0)
    _assert_same(res, ref)
    _assert_invariants(res, 0.0, sum(case[3]))


@given(case=small_case())
def test_user_policy_equals_builtin(case):
    """A numpy user policy computing LAS's key gives exactly the built-in LAS."""
    submit, gpus, dur, node_gpus = case
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    cluster = ",".join(f"1x{g}" for g in node_gpus)
    a = fastblox.simulate(w, cluster=cluster, policy="las", time_model="rounds")
    b = fastblox.simulate(w, cluster=cluster, policy=lambda jobs, now: jobs.attained_s, time_model="rounds")
    assert a.jobs.equals(b.jobs)


@given(case=small_case())
def test_user_policy_matches_reference(case):
    submit, gpus, dur, node_gpus = case
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    cluster = ",".join(f"1x{g}" for g in node_gpus)
    res = fastblox.simulate(w, cluster=cluster, policy=lambda jobs, now: -jobs.num_gpus * 1e7 + jobs.submit_s)
    ref = simulate_native_reference(submit, gpus, dur, node_gpus, key_fn=lambda j, t: -j.gpus * 1e7 + j.submit)
    _assert_same(res, ref)


def test_njit_user_policy():
    numba = pytest.importorskip("numba")

    @numba.njit
    def biggest_first(jobs, now):
        return -jobs.num_gpus * 1e7 + jobs.submit_s

    w = fastblox.gavel_like_workload(300, seed=3)
    res = fastblox.simulate(w, cluster="8x4", policy=biggest_first)
    ref = simulate_native_reference(w.submit_s, w.num_gpus, w.duration_s, [4] * 8,
                                    key_fn=lambda j, t: -j.gpus * 1e7 + j.submit)
    _assert_same(res, ref)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("tm", ["events", pytest.param("rounds", marks=pytest.mark.slow)])
def test_larger_workload_matches_reference(policy, tm):
    """400 jobs against the reference (its rounds are slow in plain Python: slow set; rounds on
    small cases are in the quick set's hypothesis tests)."""
    w = fastblox.gavel_like_workload(400, mean_interarrival_s=300, seed=11)
    res = fastblox.simulate(w, cluster="4x4", policy=policy, time_model=tm, restart_s=20.0)
    ref = simulate_native_reference(w.submit_s, w.num_gpus, w.duration_s, [4] * 4, policy=policy, time_model=tm,
                                    restart_s=20.0, preempt=fastblox.POLICIES.get(policy).preemptive)
    _assert_same(res, ref)
    _assert_invariants(res, 20.0, 16)


def test_deterministic_bytes(tmp_path):
    w = fastblox.gavel_like_workload(500, seed=5)
    outs = []
    for k in range(2):
        res = fastblox.simulate(w, cluster="4x8", policy="las", time_model="events")
        res.write(tmp_path / str(k))
        outs.append((tmp_path / str(k) / "jobs.parquet").read_bytes())
    assert outs[0] == outs[1]


def test_makespan_and_utilisation_span_the_run_not_time_zero():
    """A trace whose first job arrives late: the makespan and the utilisation count from the first
    submission (1,000 s), not from t = 0 (the bundled workloads start at 0 and cannot tell)."""
    w = fastblox.Workload.from_arrays(submit_s=np.array([1000.0, 1500.0]), num_gpus=np.array([1, 1]),
                                      duration_s=np.array([100.0, 200.0]))
    s = fastblox.simulate(w, cluster="1x2").summary
    assert (s["makespan_s"], s["end_s"], s["avg_jct_s"]) == (700.0, 1700.0, 150.0)
    assert s["utilisation"] == 300.0 / (2 * 700.0)


def test_preemption_happens_and_costs():
    """A short job arriving on a full cluster preempts under LAS, and the restart cost shows."""
    w = fastblox.Workload.from_arrays(submit_s=[0, 10], num_gpus=[4, 4], duration_s=[1000, 100])
    res = fastblox.simulate(w, cluster="1x4", policy="srtf", restart_s=5.0)
    j = res.jobs
    assert j["num_preemptions"].to_list() == [1, 0]
    # job 1 runs 10..115 (5 s restart + 100 s), job 0 resumes at 115 with 1000 - 5 of work... minus
    # its first 10 s (5 s restart, 5 s work): 995 left, plus 5 s restart again
    assert j["finish_s"].to_list() == [115 + 5 + 995, 115]
    fifo = fastblox.simulate(w, cluster="1x4", policy="fifo")
    assert fifo.jobs["num_preemptions"].to_list() == [0, 0]
    assert fifo.jobs["finish_s"].to_list() == [1000, 1100]


@pytest.mark.parametrize("tm", ["events", "rounds"])
@pytest.mark.parametrize("policy", ["fifo", "las"])
def test_unplaceable_job_is_reported_not_looped(tm, policy):
    """Blox's exact-sum fit never places a 3-GPU gang on 2-GPU nodes: an error, never a hang."""
    w = fastblox.Workload.from_arrays(submit_s=[0, 200], num_gpus=[1, 3], duration_s=[100, 100])
    with pytest.raises(fastblox.SimulationError, match="never be placed"):
        fastblox.simulate(w, cluster="2x2", policy=policy, placement="blox", time_model=tm)
    ref = simulate_native_reference(w.submit_s, w.num_gpus, w.duration_s, [2, 2], policy=policy, placement="blox",
                                    time_model=tm)
    assert ref["deadlock"]


def test_gang_waits_for_whole_gang():
    w = fastblox.Workload.from_arrays(submit_s=[0, 1, 2], num_gpus=[3, 2, 1], duration_s=[100, 50, 10])
    res = fastblox.simulate(w, cluster="1x4", policy="fifo")
    # job 1 (2 GPUs) cannot start while job 0 holds 3 of 4; job 2 (1 GPU) backfills
    assert res.jobs["first_start_s"].to_list() == [0, 100, 2]


def test_consolidated_waits_first_fit_spreads():
    w = fastblox.Workload.from_arrays(submit_s=[0, 0, 1], num_gpus=[2, 2, 4], duration_s=[100, 100, 10])
    cons = fastblox.simulate(w, cluster="2x4", policy="fifo", placement="consolidated")
    ff = fastblox.simulate(w, cluster="2x4", policy="fifo", placement="first-fit")
    # best fit packs both 2-GPU jobs on node 0, so the 4-GPU job gets node 1 at once
    assert cons.jobs["first_start_s"].to_list() == [0, 0, 1]
    assert ff.jobs["first_start_s"].to_list() == [0, 0, 1]
    w2 = fastblox.Workload.from_arrays(submit_s=[0, 0, 1], num_gpus=[3, 3, 2], duration_s=[100, 100, 10])
    cons2 = fastblox.simulate(w2, cluster="2x4", policy="fifo", placement="consolidated")
    ff2 = fastblox.simulate(w2, cluster="2x4", policy="fifo", placement="first-fit")
    assert cons2.jobs["first_start_s"].to_list()[2] == 100  # one free GPU on each node: it must wait
    assert ff2.jobs["first_start_s"].to_list()[2] == 1  # first-fit spread job 1, leaving 2 GPUs on node 1


def test_read_only_and_narrow_inputs_reuse_the_compiled_kernel():
    """A workload whose arrays are read-only or of narrower dtypes (a memory map, Ray, a user's own
    dataclass) runs on the kernel already compiled: no new specialisation, same result."""
    from fastblox.kernels import engine as kengine

    w = fastblox.Workload.from_arrays(submit_s=[0.0, 5.0, 9.0], num_gpus=[1, 4, 2], duration_s=[30.0, 20.0, 10.0])
    base = fastblox.simulate(w, cluster="2x4", policy="las")
    n_sigs = len(kengine._advance.signatures)
    ro = fastblox.Workload(w.job_id, w.submit_s.copy(), w.num_gpus.astype(np.int32), w.duration_s.copy(),
                           w.iterations, w.iter_time_s)
    for a in (ro.submit_s, ro.num_gpus, ro.duration_s):
        a.flags.writeable = False
    res = fastblox.simulate(ro, cluster="2x4", policy="las")
    assert len(kengine._advance.signatures) == n_sigs
    assert res.jobs.equals(base.jobs)


def test_per_job_fields_live_in_one_record_per_job_and_copies_keep_the_layout():
    """Every per-job field of Jobs/Run/Queues but ``RECORD_OUTSIDE`` is a strided view into one
    64-byte-aligned record per job; fields do not overlap; a copy (look-ahead) owns its records,
    keeps the layout and so the compiled kernel (no second specialisation)."""
    from fastblox import parts
    from fastblox.dynamic import lookahead_score
    from fastblox.engine import prepare_native
    from fastblox.kernels import engine as kengine
    from fastblox.kernels.state import RECORD_BYTES, RECORD_LAYOUT, RECORD_OUTSIDE, Jobs, Run

    w = fastblox.Workload.from_arrays(submit_s=[0.0, 1.0, 2.0, 3.0, 4.0], num_gpus=[2, 1, 4, 1, 2],
                                      duration_s=[50.0, 40.0, 30.0, 20.0, 10.0])
    st = prepare_native(w, cluster="1x4", policy="las").state
    per_job = {("jobs", f) for f in Jobs._fields} | {("run", f) for f in Run._fields if f != "alloc"} | {
        ("q", f) for f in ("wkey", "wrank", "rpos", "ro_ver")}
    assert {(g, f) for _, g, f, _ in RECORD_LAYOUT} == per_job - {("run", f) for f in RECORD_OUTSIDE}

    def fields(s):
        return {(g, f): getattr({"jobs": s.jobs, "run": s.run, "q": s.q}[g], f) for _, g, f, _ in RECORD_LAYOUT}

    def check_layout(s):
        assert s.rec.ctypes.data % 64 == 0 and s.rec.shape == (len(w) + 1, RECORD_BYTES)
        for (g, f), v in fields(s).items():
            assert np.shares_memory(v, s.rec) and v.strides == (RECORD_BYTES,), (g, f)
        for f in RECORD_OUTSIDE:
            a = getattr(s.run, f)
            assert a.flags.c_contiguous and not np.shares_memory(a, s.rec), f

    check_layout(st)
    # no two fields overlap: write a distinct value into each, read every one back
    cp = st.copy()
    check_layout(cp)
    assert not np.shares_memory(cp.rec, st.rec)
    vals = fields(cp)
    for i, v in enumerate(vals.values()):
        v[:] = i + 1 if v.dtype != np.bool_ else bool(i % 2)
    for i, v in enumerate(vals.values()):
        assert (v == (i + 1 if v.dtype != np.bool_ else bool(i % 2))).all()
    # the original is untouched and still runs to the plain result; copies do not compile anything new
    n_sigs = len(kengine._advance.signatures)
    assert st.drive(5.0) == kengine.PAUSED
    lookahead_score(st, parts.POLICIES.get("fifo"), st.now, 100.0, "known")
    assert st.drive() == kengine.FINISHED
    assert len(kengine._advance.signatures) == n_sigs
    plain = fastblox.simulate(w, cluster="1x4", policy="las")
    assert np.array_equal(st.run.finish, plain.jobs["finish_s"].to_numpy())


def test_prefetch_is_a_hint_that_reaches_the_machine_code():
    """``prefetch`` does nothing in Python, compiles to a prefetch instruction in a kernel (on
    x86-64, where the engine's completions use it) and changes no result."""
    import platform

    import numba

    from fastblox.kernels._prefetch import prefetch

    a = np.arange(10.0)
    assert prefetch(a, 3) is None and a[3] == 3.0

    @numba.njit
    def total(a, idx, hint):
        s = 0.0
        for i in range(idx.shape[0]):
            if hint and i + 1 < idx.shape[0]:
                prefetch(a, idx[i + 1])
            s += a[idx[i]]
        return s

    idx = np.array([7, 2, 9, 0, 4])
    assert total(a, idx, True) == total(a, idx, False) == a[idx].sum()
    if platform.machine() in ("x86_64", "AMD64"):
        asm = "\n".join(total.inspect_asm().values())
        assert "prefetch" in asm
    with pytest.raises(numba.core.errors.TypingError):
        numba.njit(lambda a: prefetch(a, 1.5))(a)  # an index must be an integer


@given(st.integers(0, 300), st.data())
def test_records_filled_and_read_back_match_plain_numpy(n, data):
    """``fill_records`` / ``gather_records`` (a compiled pass a record at a time) against plain
    numpy assignment through the strided field views (the reference): same bytes in every record,
    scalars broadcast, the one-longer ``alloc_off`` filled to its end, narrow or read-only inputs."""
    from fastblox.kernels.state import RECORD_LAYOUT, fill_records, gather_records, new_records, record_fields

    keys = [(g, f) for _, g, f, _ in RECORD_LAYOUT]
    chosen = data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    values = {}
    for g, f in chosen:
        dt = next(np.dtype(d) for _, g2, f2, d in RECORD_LAYOUT if (g2, f2) == (g, f))
        m = n + 1 if f == "alloc_off" else n
        if data.draw(st.booleans()):
            values[(g, f)] = dt.type(data.draw(st.integers(-5, 5))) if dt != np.bool_ else True
        elif dt == np.bool_:
            values[(g, f)] = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool)
        elif dt.kind == "f":
            values[(g, f)] = np.array(data.draw(st.lists(st.floats(allow_nan=False), min_size=m, max_size=m)))
        else:  # int32 input for an int64 field: widened on the way in
            values[(g, f)] = np.array(data.draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=m, max_size=m)),
                                      dtype=np.int32)
        if isinstance(values[(g, f)], np.ndarray) and data.draw(st.booleans()):
            values[(g, f)].flags.writeable = False  # a memory-mapped or shared workload column
    got, ref = new_records(n), new_records(n)
    fill_records(got, values)
    views = record_fields(ref)
    for (g, f), v in values.items():
        views[g][f][:] = v
    assert np.array_equal(got, ref)
    back = gather_records(got, keys)
    for (g, f), a in zip(keys, back):
        want = views[g][f][:n]
        assert a.dtype == want.dtype and a.flags.c_contiguous and np.array_equal(a, want), (g, f)


@functools.cache
def _resort():
    """``walk.resort`` callable from Python (a helper: callable from kernels only), compiled once
    per process, not once per example."""
    import numba

    from fastblox.kernels import walk

    return numba.njit(lambda *a: walk.resort(*a))


@given(st.integers(1, 120), st.integers(1, 6), st.data())
def test_resort_gives_the_sorted_order_step_after_step_even_from_a_stale_last_order(n, steps, data):
    """``walk.resort`` (the order of a policy whose keys come each step: kept jobs merged with the
    re-keyed ones) against Python's sort by (priority, key, job), over steps where jobs come and
    go, some keys change (ties included) and some do not; now and then the last order's saved
    keys are scribbled over (a ``q.ro`` written by another path), which must not change the
    result."""
    resort = _resort()
    prio = np.zeros(n, dtype=np.int64)
    key_of = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 7.0]), min_size=n, max_size=n)))
    prev, pos, fresh = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    order = np.zeros(n, dtype=np.int64)
    last_key, last_prio = np.zeros(n), np.zeros(n, dtype=np.int64)
    n_prev = 0
    rekeyed = st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from([0.0, 1.0, 2.5, 7.0, -3.0]), st.integers(0, 2)),
                       max_size=n)  # (job, new key, new priority): one draw per step
    for _ in range(steps):
        active = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))).astype(np.int64)
        for j, key, pr in data.draw(rekeyed):
            key_of[j], prio[j] = key, pr
        if data.draw(st.booleans()) and n_prev:  # a stale record of the last order
            last_key[: n_prev] = data.draw(st.sampled_from([0.0, 1.0, 7.0]))
        keys = key_of[active].copy()
        na = len(active)
        n_prev = resort(keys, prio, active, na, order, prev, n_prev, pos, fresh, last_key, last_prio)
        want = sorted(active.tolist(), key=lambda j: (prio[j], key_of[j], j))
        assert order[:na].tolist() == want
        assert prev[:na].tolist() == want and n_prev == na
        np.testing.assert_array_equal(last_key[:na], key_of[want])
