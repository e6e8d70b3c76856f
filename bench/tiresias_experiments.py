"""Why native 2D-LAS differs from Tiresias' simulator: change one rule of the replay at a time.

``fastblox/compat_tiresias.py`` replays Tiresias' ``run_sim.py`` exactly (``--compat tiresias``;
tests/test_fidelity.py checks it job by job). Each variant below changes one of its rules towards
what the native ``tiresias`` policy does and reports the average JCT it gives, so every
explanation in docs/fidelity.md is a measured effect, not a guess::

    python bench/tiresias_experiments.py [--write]

Variants (each a subclass of the replay that overrides one method):

* ``exact demotion check``: the next check of a running job at the instant its GPU-service reaches
  the limit, ``ceil((limit - executed x GPUs) / GPUs)``, instead of Tiresias'
  ``(limit - executed) // GPUs`` (seconds subtracted from GPU-seconds);
* ``several demotions per event``: a job that crossed two limits since the last event moves down
  two queues (Tiresias: one per event);
* ``waiting jobs by queue entry``: within a queue, waiting jobs in the order they entered it
  (arrival, demotion, promotion), as the native policy orders them; Tiresias moves every job that
  is pending after a pass behind the running ones in list order, so a job preempted from the head
  goes behind the jobs that were waiting;
* ``no re-partition``: the queue lists kept as they were before the pass (no running-first move);
* ``entry order + exact check``: the two together;
* ``running first in the walk``: each queue's running jobs walked before its waiting ones in
  every pass, as the native order keys them (Tiresias re-partitions after a pass, so a job demoted
  while running is walked behind the waiting jobs of its new queue, and may be preempted by them);
* ``every job by queue entry``: within a queue, running jobs first and waiting jobs after them,
  *each group* in the order its jobs entered the queue, before every walk (as the native keys:
  ``(2 x queue, entry)`` for running jobs, ``(2 x queue + 1, entry)`` for waiting ones). So when
  higher queues need GPUs, the running jobs that entered the queue last are the ones preempted;
  Tiresias keeps running jobs in list order, where a job that waited and then started is behind
  one demoted later while running;
* ``every job by queue entry + exact check``: that and the exact demotion check: the native rules;
* 2D-Gittins (a second table): ``textbook index``, the native index of the same YARN distribution
  in place of Tiresias' formula, that with the exact demotion check, and that on a continuous
  clock (below);
* the starvation knob (a third table, ``knob_table``): the native rules with the promotion at
  its instant, and those on a ``continuous clock`` (service, waiting time, completions and the
  demotion and promotion instants in real seconds; Tiresias counts whole seconds);
* ``preempt from the tail``: a waiting job that does not fit in the free GPUs preempts running
  jobs ranked after it from the lowest-ranked up until it fits (and is skipped when even all of
  them would not make room), as the native engine; Tiresias' counter walk instead keeps every
  running job that still fits as it walks and preempts those that do not.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fastblox import compat_tiresias as ct  # noqa: E402
from fastblox.fidelity import TIRESIAS_CLUSTERS, TIRESIAS_WORKLOADS, peer_summary  # noqa: E402
from fastblox.traces import read_trace  # noqa: E402


class ExactCheck(ct._Run):
    def _next_jump(self, t):
        last_q = len(self.queues) - 1
        jump = math.inf
        for j in self.runnable:
            if j.status == "RUNNING" and j.q < last_q:
                jump = min(jump, t + max(0, -(-(self.limits[j.q] - j.executed * j.gpus) // j.gpus)))
        return jump


class SeveralDemotions(ct._Run):
    def _account(self, t):
        super()._account(t)
        last_q = len(self.queues) - 1
        for j in self.runnable:
            while j.status == "RUNNING" and j.q < last_q and int(j.executed * j.gpus) >= self.limits[j.q]:
                self.queues[j.q].remove(j)
                j.q += 1
                self.queues[j.q].append(j)


class EntryOrder(ct._Run):
    def __init__(self, *a):
        super().__init__(*a)
        self.entered = {}

    def _arrivals(self, t):
        n0 = self.next_arr
        super()._arrivals(t)
        for j in self.jobs[n0:self.next_arr]:
            self.entered[j.i] = (t, j.i)

    def _account(self, t):
        before = {j.i: j.q for j in self.runnable}
        super()._account(t)
        for j in self.runnable:
            if j.q != before[j.i]:
                self.entered[j.i] = (t, j.i)

    def _schedule(self, t):
        super()._schedule(t)
        for q in self.queues:
            waiting = sorted((j for j in q if j.status == "PENDING"), key=lambda j: self.entered[j.i])
            q[:] = [j for j in q if j.status != "PENDING"] + waiting


class NoRepartition(ct._Run):
    def _schedule(self, t):
        kept = [list(q) for q in self.queues]
        super()._schedule(t)
        for q, k in zip(self.queues, kept):
            q[:] = k


class EntryOrderExactCheck(ExactCheck, EntryOrder):
    pass


class TailPreempt(ct._Run):
    def _schedule(self, t):
        order = [j for q in self.queues for j in q]
        pos = {id(j): k for k, j in enumerate(order)}
        running = [j for j in order if j.status == "RUNNING"]
        free = self.total - sum(j.gpus for j in running)
        keep = {id(j) for j in running}
        start, stop = [], []
        for k, p in enumerate(order):
            if p.status != "PENDING":
                continue
            if p.gpus > free:
                lower = [j for j in running if id(j) in keep and pos[id(j)] > k]
                if free + sum(j.gpus for j in lower) < p.gpus:
                    continue
                for j in reversed(lower):
                    if free >= p.gpus:
                        break
                    keep.discard(id(j))
                    stop.append(j)
                    free += j.gpus
            start.append(p)
            free -= p.gpus
        for j in stop:
            j.status = "PENDING"
            j.preempt += 1
        for j in start:
            j.status = "RUNNING"
            if j.start is None:
                j.start = t
        for q in self.queues:
            q[:] = [j for j in q if j.status != "PENDING"] + [j for j in q if j.status == "PENDING"]


class EntryAll(EntryOrder):
    def _schedule(self, t):
        for q in self.queues:
            q[:] = (sorted((j for j in q if j.status == "RUNNING"), key=lambda j: self.entered[j.i])
                    + sorted((j for j in q if j.status != "RUNNING"), key=lambda j: self.entered[j.i]))
        super()._schedule(t)


class EntryAllExactCheck(ExactCheck, EntryAll):
    pass


class RunningFirst(ct._Run):
    def _schedule(self, t):
        for q in self.queues:
            q[:] = [j for j in q if j.status == "RUNNING"] + [j for j in q if j.status != "RUNNING"]
        super()._schedule(t)


VARIANTS = {
    "Tiresias (as run_sim.py)": ct._Run,
    "exact demotion check": ExactCheck,
    "several demotions per event": SeveralDemotions,
    "waiting jobs by queue entry": EntryOrder,
    "no re-partition": NoRepartition,
    "entry order + exact check": EntryOrderExactCheck,
    "running first in the walk": RunningFirst,
    "preempt from the tail": TailPreempt,
    "every job by queue entry": EntryAll,
    "every job by queue entry + exact check": EntryAllExactCheck,
}


def replay(cls, w, gpus: int, knob: int = 0, table=None) -> list:
    """The jobs of ``w`` after the replay variant ``cls`` ran them on ``gpus`` GPUs (starvation
    knob ``knob``, Gittins table ``table``: None for 2D-LAS)."""
    jobs = ct.make_jobs(w.submit_s, w.num_gpus, w.duration_s)
    cls(jobs, gpus, list(ct.DEFAULT_LIMITS), knob, table).run()
    return jobs


def avg_jct(cls, w, gpus: int) -> float:
    return float(np.mean([j.end - j.submit for j in replay(cls, w, gpus)]))


def table() -> str:
    import fastblox

    summ = peer_summary()
    lines = ["| workload | cluster (load) | " + " | ".join(VARIANTS) + " | native `tiresias` |",
             "|---|---|" + "---|" * (len(VARIANTS) + 1)]
    for wl, (path, clusters) in TIRESIAS_WORKLOADS.items():
        w = read_trace(path)
        for cl in clusters:
            n, g = TIRESIAS_CLUSTERS[cl]
            base = avg_jct(ct._Run, w, n * g)
            assert abs(base - float(summ[f"{wl}_{cl}_dlas-gpu_yarn"]["avg_jct_s"])) < 1e-6  # the replay is exact
            cells = [f"{base:,.0f}"]
            for cls in list(VARIANTS.values())[1:]:
                v = avg_jct(cls, w, n * g)
                cells.append(f"{v:,.0f} ({100 * (v / base - 1):+.1f} %)")
            native = fastblox.simulate(w, cluster=f"1x{n * g}", policy="tiresias").summary["avg_jct_s"]
            cells.append(f"{native:,.0f} ({100 * (native / base - 1):+.1f} %)")
            load = fastblox.results.offered_load(w, n * g)
            lines.append(f"| {wl} | {cl} ({load:.2f}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class NativeGittinsIndex(ct._Run):
    """2D-Gittins with the textbook index of the same (YARN) distribution, as native
    ``tiresias-gittins`` computes it (``P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]``
    of the exact GPU-seconds attained), instead of Tiresias' (``S`` for ``S - a``, Python-2
    integer division and rounding, whole GPU-seconds)."""

    def __init__(self, *a):
        super().__init__(*a)
        from fastblox.policies import tiresias as nt

        self.xs, self.gv = nt.gittins_table(nt.read_service("tiresias-yarn"), nt.DEFAULT_DELTA)

    def _account(self, t):
        super()._account(t)
        for j in self.runnable:
            k = int(np.searchsorted(self.xs, j.executed * j.gpus, side="right"))
            j.rank = float(self.gv[k - 1] if k > 0 else self.gv[0])


class NativeGittinsIndexExactCheck(ExactCheck, NativeGittinsIndex):
    pass


GITTINS_VARIANTS = {
    "Tiresias (as run_sim.py)": ct._Run,
    "textbook index": NativeGittinsIndex,
    "textbook index + exact check": NativeGittinsIndexExactCheck,
}


def gittins_table_md() -> str:
    """2D-Gittins, both sides on Tiresias' YARN distribution (native: ``distribution=tiresias-yarn``):
    average JCT and the share of jobs finishing within 1 s of native, per variant."""
    import fastblox

    from fastblox.policies import tiresias as nt

    table = ct.gittins_table(nt.read_service("tiresias-yarn"))
    lines = ["| workload | cluster | " + " | ".join(GITTINS_VARIANTS) + " | native `tiresias-gittins` (YARN) |",
             "|---|---|" + "---|" * (len(GITTINS_VARIANTS) + 1)]
    for wl, (path, clusters) in TIRESIAS_WORKLOADS.items():
        w = read_trace(path)
        for cl in clusters:
            n, g = TIRESIAS_CLUSTERS[cl]
            nat = fastblox.simulate(w, cluster=f"1x{n * g}", policy="tiresias-gittins",
                                    policy_opts={"distribution": "tiresias-yarn"})
            ours = nat.jobs["finish_s"].to_numpy()
            cells = []
            for cls in GITTINS_VARIANTS.values():
                fin = finish_times(cls, w, n * g, 0, table)
                same = np.abs(fin - ours) <= 1.0
                cells.append(f"{np.mean(fin - w.submit_s):,.0f} ({100 * same.mean():.0f} % of jobs as native)")
            cells.append(f"{nat.summary['avg_jct_s']:,.0f}")
            lines.append(f"| {wl} | {cl} | " + " | ".join(cells) + " |")
    return ("2D-Gittins (`dlas-gpu-gittins`), both on Tiresias' YARN distribution: average JCT (s), and the "
            "share of jobs whose finish time is within 1 s of native's.\n\n" + "\n".join(lines))


class PromotionJumps:
    """Mixin: Tiresias' own promotion events (a waiting job's next check at the instant its pending
    time reaches ``int(executed x knob)``, ``_Run._next_jump``) on top of a variant's demotion
    events; :class:`ExactCheck` predicts demotions only, so without this a promotion waits for the
    next other event (the native engine wakes the job at that instant)."""

    def _next_jump(self, t):
        jump = super()._next_jump(t)
        for j in self.runnable:
            if j.status != "RUNNING" and self.knob > 0 and j.q > 0 and j.total and j.executed > 0:
                diff = int(j.executed * self.knob - j.last_pending)
                if diff > 0:
                    jump = min(jump, int(diff + t))
        return jump


class EntryAllExactCheckPromotion(PromotionJumps, EntryAllExactCheck):
    pass


class ContinuousClock(ct._Run):
    """The replay on a continuous clock: service, pending time, completions and the checks of
    demotion and promotion in real seconds, as the native engine keeps time. Tiresias counts whole
    seconds: ``int(t - last_check)`` at every event, completions at ``int(t + left)``, promotion
    against ``int(executed x knob)``, and its checks at whole-second instants; so a 4-GPU job
    crossing 3,250 GPU-s after 812.5 s is demoted at 813 s there, and at a knob the promotion
    instants (``knob x`` seconds run) drift by fractions that decide which job is preempted."""

    def _account(self, t):
        last_q = len(self.queues) - 1
        for j in list(self.runnable):
            dt = t - j.last_check
            j.last_check = t
            if j.status == "RUNNING":
                j.total += dt
                j.executed += dt
                if j.q < last_q and j.executed * j.gpus >= self.limits[j.q] - EPS_S:
                    self.queues[j.q].remove(j)
                    j.q += 1
                    self.queues[j.q].append(j)
            else:
                j.pending += dt
                if j.executed > 0:
                    j.last_pending += dt
                if self.knob > 0 and j.q > 0 and j.total > 0 and j.executed > 0 and \
                        j.last_pending >= j.executed * self.knob - EPS_S:
                    j.executed = 0
                    j.last_pending = 0
                    self.queues[j.q].remove(j)
                    j.q = 0
                    self.queues[0].append(j)
            if self.table is not None:
                j.rank = ct._gittins_index(self.table, int(j.executed * j.gpus))

    def _next_end(self, t):
        best, ending = math.inf, []
        for j in self.runnable:
            if j.status == "RUNNING":
                e = t + (j.duration - j.total)
                if e < best - EPS_S:
                    best, ending = e, [j]
                elif e <= best + EPS_S:
                    ending.append(j)
        return best, ending


class ContinuousChecks:
    """Mixin: the exact demotion check and the promotion at its instant, on the continuous clock
    (:class:`ExactCheck` and :class:`PromotionJumps` round them to whole seconds)."""

    def _next_jump(self, t):
        last_q = len(self.queues) - 1
        jump = math.inf
        for j in self.runnable:
            if j.status == "RUNNING":
                if j.q < last_q:
                    jump = min(jump, t + max(0.0, (self.limits[j.q] - j.executed * j.gpus) / j.gpus))
            elif self.knob > 0 and j.q > 0 and j.total and j.executed > 0:
                diff = j.executed * self.knob - j.last_pending
                if diff > 0:
                    jump = min(jump, t + diff)
        return jump


class EntryAllContinuous(ContinuousChecks, EntryAll, ContinuousClock):
    """The native rules (every job by queue entry, exact demotion, promotion at its instant) on a
    continuous clock."""


class NativeGittinsContinuous(ContinuousChecks, NativeGittinsIndex, ContinuousClock):
    """2D-Gittins with the textbook index and the exact demotion check on a continuous clock."""


GITTINS_VARIANTS["textbook index + exact check + continuous clock"] = NativeGittinsContinuous

#: seconds within which two instants of the continuous clock are one (float sums of seconds)
EPS_S = 1e-9


def knob_table() -> str:
    """The starvation knob's peer runs (``dlas-gpu-K``): the exact replay, the two native rules of the
    table above, those with promotion events at their instant, and those on a continuous clock
    (:class:`ContinuousClock`), each against native ``tiresias``
    with ``promote=K`` (average JCT and the share of jobs finishing within 1 s of native's)."""
    import fastblox

    summ = peer_summary()
    variants = {"Tiresias (as run_sim.py)": ct._Run, "every job by queue entry + exact check": EntryAllExactCheck,
                "+ promotion at its instant": EntryAllExactCheckPromotion,
                "+ continuous clock": EntryAllContinuous}
    lines = ["| workload | cluster | knob | " + " | ".join(variants) + " | native `tiresias` (`promote=K`) |",
             "|---|---|---|" + "---|" * (len(variants) + 1)]
    for wl, (path, clusters) in TIRESIAS_WORKLOADS.items():
        w = read_trace(path)
        for cl in clusters:
            n, g = TIRESIAS_CLUSTERS[cl]
            for knob in (2, 8):
                key = f"{wl}_{cl}_dlas-gpu-{knob}_yarn"
                if key not in summ:
                    continue
                nat = fastblox.simulate(w, cluster=f"1x{n * g}", policy="tiresias", policy_opts={"promote": knob})
                ours = nat.jobs["finish_s"].to_numpy()
                cells = []
                for cls in variants.values():
                    fin = finish_times(cls, w, n * g, knob)
                    if cls is ct._Run:  # (the replay is exact)
                        assert abs(np.mean(fin - w.submit_s) - float(summ[key]["avg_jct_s"])) < 1e-6
                    same = np.abs(fin - ours) <= 1.0
                    cells.append(f"{np.mean(fin - w.submit_s):,.0f} ({100 * same.mean():.0f} % of jobs as native)")
                cells.append(f"{nat.summary['avg_jct_s']:,.0f}")
                lines.append(f"| {wl} | {cl} | {knob} | " + " | ".join(cells) + " |")
    return ("The starvation knob (`dlas-gpu-K`, the peer runs that exist): average JCT (s), and the share of jobs "
            "whose finish time is within 1 s of native's.\n\n" + "\n".join(lines))


def finish_times(cls, w, gpus: int, knob: int = 0, table=None) -> np.ndarray:
    """Each job's finish time (s) in the replay variant ``cls`` (:func:`replay`)."""
    return np.array([j.end for j in replay(cls, w, gpus, knob, table)], dtype=np.float64)


def same_as_native(cls=EntryAllExactCheck) -> str:
    """Per job: the share of jobs whose finish time in variant ``cls`` equals native ``tiresias``'s
    (within 1 s), on every workload and cluster."""
    import fastblox

    cells = []
    for wl, (path, clusters) in TIRESIAS_WORKLOADS.items():
        w = read_trace(path)
        for cl in clusters:
            n, g = TIRESIAS_CLUSTERS[cl]
            ours = fastblox.simulate(w, cluster=f"1x{n * g}", policy="tiresias").jobs["finish_s"].to_numpy()
            same = np.abs(finish_times(cls, w, n * g) - ours) <= 1.0
            cells.append(f"{wl} {cl} {100 * same.mean():.1f} %")
    name = next(k for k, v in VARIANTS.items() if v is cls)
    return f"Jobs whose finish time with \"{name}\" equals native `tiresias`'s (within 1 s): " + "; ".join(cells) + "."


def by_size(wl: str = "over1500", cl: str = "n9g4") -> str:
    """Where the gap is: average JCT by GPU count and by queue reached (GPU-seconds of work against
    the limits), Tiresias' simulator (the exact replay) against native ``tiresias``."""
    import fastblox

    w = read_trace(TIRESIAS_WORKLOADS[wl][0])
    n, g = TIRESIAS_CLUSTERS[cl]
    jobs = replay(ct._Run, w, n * g)
    theirs = np.array([j.end - j.submit for j in jobs], dtype=np.float64)
    ours = fastblox.simulate(w, cluster=f"1x{n * g}", policy="tiresias").jobs["finish_s"].to_numpy() - w.submit_s
    work = w.num_gpus * w.duration_s
    groups = [(f"{k} GPU", w.num_gpus == k) for k in np.unique(w.num_gpus)]
    lims = [0, *ct.DEFAULT_LIMITS, np.inf]
    groups += [(f"queue {q} (work {lims[q]:,.0f}–{lims[q + 1]:,.0f} GPU-s)", (work >= lims[q]) & (work < lims[q + 1]))
               for q in range(len(lims) - 1)]
    lines = [f"{wl} on {cl}: average JCT (s) by group, Tiresias' simulator / native `tiresias`.", "",
             "| jobs | count | Tiresias | native |", "|---|---|---|---|"]
    for name, m in groups:
        lines.append(f"| {name} | {int(m.sum())} | {theirs[m].mean():,.0f} | {ours[m].mean():,.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    a = ap.parse_args(argv)
    text = (table() + "\n\n" + same_as_native() + "\n\n" + by_size() + "\n\n" + gittins_table_md() + "\n\n"
            + knob_table())
    print(text)
    if a.write:
        from _util import update_section

        stamp = f"Measured by `python bench/tiresias_experiments.py --write` ({time.strftime('%Y-%m-%d')}); average JCT in seconds, 2D-LAS K = 3."
        update_section(ROOT / "docs" / "fidelity.md", "tiresias-experiments", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
