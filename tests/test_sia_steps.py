"""--compat sia's job steps: ``SiaJob.advance`` (compiled: ``kernels.sia.job_steps``, its lanes and
the run's chains of observations) against its plain-Python twin ``fastblox.reference.sia.advance``,
and the kernel's gradient statistics against ``Profile.grad_stats_at`` (the Pollux artifact's
profiles, for two GPU types)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastblox import compat_sia as cs
from fastblox.reference import sia as ref

APPS = ["cifar10", "deepspeech2", "bert", "ncf"]
TYPES = ["a", "b"]
PLACEMENTS = [(1,), (2,), (3,), (4,), (1, 1), (2, 2), (3, 1), (2, 1), (4, 2), (4, 4), (4, 4, 4, 4)]


def _state(job) -> tuple:
    """Everything a job's steps change (models as bytes)."""
    return (job.cluster, job.placement, job.atomic, job.accum, job.epoch, job.progress, job.rescale,
            job.attained_gpu, job.finish, job.grad, job.models, {t: list(s.items()) for t, s in job.seen.items()},
            {t: None if p is None else p.tobytes() for t, p in job.pp.items()}, job._batch_for)


def _replay(app: str, seed: int, steps) -> list:
    """The states of three alike jobs sharing a run's memo after each of 40 random moves (the
    same for either ``steps``: advance over an interval, a new placement on a type or none)."""
    rng = np.random.default_rng(seed)
    profs = cs.load_profiles([app], TYPES, None)
    memo = cs.RunMemo()
    jobs = [cs.SiaJob(f"{app}-{k}", app, 0.0, 2048, profs, TYPES, memo) for k in range(3)]
    out, now = [], 0.0
    for _ in range(40):
        job = jobs[int(rng.integers(len(jobs)))]
        move = rng.random()
        if move < 0.7:
            steps(job, now, float(rng.choice([0.5, 17.0, 60.0, 240.0])))
            now += 60.0
        elif move < 0.9:
            t = TYPES[int(rng.integers(2))] if rng.random() < 0.9 else None
            job.migrate(t, PLACEMENTS[int(rng.integers(len(PLACEMENTS)))] if t else (), now)
        else:
            job.reallocate(PLACEMENTS[int(rng.integers(len(PLACEMENTS)))] if job.cluster else (), now)
        out.append([_state(j) for j in jobs])
    return out


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(APPS), st.integers(0, 2**32 - 1))
def test_advance_is_its_twin(app, seed):
    assert _replay(app, seed, cs.SiaJob.advance) == _replay(app, seed, ref.advance)


def test_alike_jobs_follow_the_chains_in_the_kernel():
    """A job that runs what an alike job ran before takes its fits from the run's chains in
    ``job_steps`` (none computed again), and ends as its twin does."""
    profs = cs.load_profiles(["cifar10"], TYPES, None)
    memo = cs.RunMemo()
    first, second = (cs.SiaJob(f"cifar10-{k}", "cifar10", 0.0, 2048, profs, TYPES, memo) for k in range(2))
    alone = cs.SiaJob("cifar10-1", "cifar10", 0.0, 2048, profs, TYPES)
    for job, steps in ((first, cs.SiaJob.advance), (second, cs.SiaJob.advance), (alone, ref.advance)):
        job.migrate("a", (2,), 0.0)
        for k in range(20):
            steps(job, 60.0 * k, 60.0)
    assert second.models == first.models > 10 and len(memo.chain_pp) == first.models + 1
    assert _state(second) == _state(alone)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(APPS), st.data())
def test_grad_at_is_grad_stats_at(app, data):
    from fastblox import elastic
    from fastblox.kernels import sia as ks

    pr = elastic.profile(app)
    lo, hi = float(pr.batch_sizes[0]), float(pr.batch_sizes[-1])
    b = data.draw(st.one_of(st.sampled_from(pr.batch_sizes.tolist()), st.floats(lo / 2, hi * 2)))
    epoch = data.draw(st.integers(0, pr.max_epochs - 1))
    ok, sqr, var = ks.grad_at(pr.batch_sizes.astype(np.float64), np.ascontiguousarray(pr.grad_sqr),
                              np.ascontiguousarray(pr.grad_var), b, epoch)
    if lo <= b <= hi:
        assert ok and (sqr, var) == pr.grad_stats_at(b, epoch)
    else:
        assert not ok
        with pytest.raises(ValueError, match="outside the validated"):
            pr.grad_stats_at(b, epoch)


def test_chains_tell_observations_apart_by_every_field():
    """``kernels.sia.child_of`` and ``seen_in`` on chains written by ``RunMemo._new_chain``: a child
    matches its observation in nodes, GPUs, atomic batch, step and sync seconds, nothing else."""
    from fastblox.kernels import sia as ks

    memo = cs.RunMemo()
    obs = [((2, 4, 8), 0.1, 0.01), ((2, 4, 8), 0.1, 0.02), ((2, 4, 8), 0.2, 0.01), ((1, 4, 8), 0.1, 0.01),
           ((2, 2, 8), 0.1, 0.01), ((2, 4, 16), 0.1, 0.01)]
    chains = [memo._new_chain(0, key, step, sync, None) for key, step, sync in obs]
    deeper = memo._new_chain(chains[0], (1, 1, 4), 0.3, 0.03, None)
    for c, (key, step, sync) in zip(chains, obs):
        assert ks.child_of(memo.links, memo.times, 0, *key, step, sync) == c
        assert ks.child_of(memo.links, memo.times, c, *key, step, sync) == -1
        assert ks.seen_in(memo.links, c, *key) and not ks.seen_in(memo.links, 0, *key)
    assert ks.child_of(memo.links, memo.times, chains[0], 1, 1, 4, 0.3, 0.03) == deeper
    assert ks.child_of(memo.links, memo.times, 0, 1, 1, 4, 0.3, 0.03) == -1
    assert ks.seen_in(memo.links, deeper, 2, 4, 8) and ks.seen_in(memo.links, deeper, 1, 1, 4)
    assert not ks.seen_in(memo.links, deeper, 2, 4, 16)


def test_a_steady_step_is_taken_again_without_the_kernel(monkeypatch):
    """Intervals inside one epoch on one placement, once the batch settles, skip ``job_steps``
    (``SiaJob._steady``), and end as the twin's."""
    profs = cs.load_profiles(["bert"], TYPES, None)
    job, twin = (cs.SiaJob("bert-0", "bert", 0.0, 96, profs, TYPES) for _ in range(2))
    calls = []
    steps = cs.SiaJob._steps
    monkeypatch.setattr(cs.SiaJob, "_steps", lambda self, *a: calls.append(a) or steps(self, *a))
    for j, advance in ((job, cs.SiaJob.advance), (twin, ref.advance)):
        j.migrate("a", (4,), 0.0)
        for k in range(30):
            advance(j, 60.0 * k, 60.0)
    assert _state(job) == _state(twin) and job.epoch < 3
    assert len(calls) < 10  # (of the 28 intervals after the restart's delay)
