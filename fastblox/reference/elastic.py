"""Plain-Python twin of :mod:`fastblox.elastic` and :class:`fastblox.compat_pollux.Jobs`: one job at
a time, scalar arithmetic, written after the Pollux simulator's ``Job.step`` /
``Job.update_local_bsz`` / ``Application.get_grad_stats`` (not their code). The tests compare the
array code to it."""

from __future__ import annotations

import math

from .. import elastic

EPS = 1e-8


def batch_config(batch_size: int, num_replicas: int, init_bsz: int, max_bsz: int, max_local: int,
                 always: bool = False) -> tuple:
    """(atomic batch, accumulation steps) of a fixed global batch on ``num_replicas`` GPUs."""
    local = math.ceil(batch_size / num_replicas - EPS)
    accum = math.ceil(local / max_local - EPS) - 1
    if num_replicas == 1 and (always or batch_size > init_bsz):
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - EPS)
    return min(atomic, int(max_bsz / (num_replicas * (accum + 1)))), accum


def grad_stats(prof, batch_size: float, epoch: int) -> tuple:
    """(sqr, var) between the validated batch sizes around ``batch_size``."""
    sizes = [int(b) for b in prof.batch_sizes]
    lo = max(i for i, b in enumerate(sizes) if b <= batch_size)
    hi = min(i for i, b in enumerate(sizes) if b >= batch_size)
    out = []
    for table in (prof.grad_sqr, prof.grad_var):
        a, b = float(table[lo, epoch]), float(table[hi, epoch])
        if lo == hi:
            out.append(a)
        else:
            out.append(((batch_size - sizes[lo]) * b + (sizes[hi] - batch_size) * a) / (sizes[hi] - sizes[lo]))
    return tuple(out)


class Job:
    """One elastic job with a fixed global batch size."""

    def __init__(self, app: str, batch_size: int):
        self.prof = elastic.profile(app)
        self.batch_size = batch_size
        self.epoch, self.progress, self.rescale = 0, 0.0, 0.0
        self.placement, self.finish, self.attained_gpu = (), None, 0.0
        self.atomic = self.accum = 0

    def reallocate(self, placement: tuple) -> None:
        p = self.prof
        self.placement = tuple(placement)
        if placement:
            self.atomic, self.accum = batch_config(self.batch_size, sum(placement), p.init_batch_size,
                                                   p.max_batch_size, p.max_local_bsz)
            self.rescale = elastic.RESTART_S

    def step(self, t0: float, seconds: float) -> None:
        if not self.placement or self.finish is not None:
            return
        r = sum(self.placement)
        now = t0
        delay = min(self.rescale, seconds)
        now += delay
        self.attained_gpu += delay * r
        self.rescale -= delay
        seconds -= delay
        p = self.prof
        while seconds > 0 and self.finish is None:
            batch = r * self.atomic * (self.accum + 1)
            step, sync = p.step_time(self.placement, self.atomic)
            total = step + (step - sync) * self.accum
            sqr, var = grad_stats(p, batch, self.epoch)
            gain = (var + sqr) / (var / (batch / p.init_batch_size) + sqr)
            goodput = gain / total
            nxt = 0.0 if self.epoch + 1 == 0 else min(float(p.progress[b, self.epoch]) for b in range(len(p.batch_sizes)))
            if self.progress + goodput * seconds < nxt:
                self.progress += goodput * seconds
                self.attained_gpu += seconds * r
                seconds = 0
            else:
                self.epoch += 1
                delta = round(float((nxt - self.progress) / goodput))
                if self.epoch > p.max_epochs - 1:
                    self.finish = now + delta
                self.progress = nxt
                self.attained_gpu += delta * r
                now += delta
                seconds -= delta
