"""A run in slices: the kernels return to Python every ~0.15 s of wall time, and between slices
Python watches for Ctrl-C, the run's limits and shows progress.

* :func:`check_limits` validates the run limits (``max_sim_time``, ``max_jobs``, ``max_wall``) into
  a :class:`RunLimits`; ``ENDLESS_STREAM_FACTOR`` bounds an endless arrival stream by default.
* :class:`Slicer` sizes the slices (a budget of kernel passes, adapted so that a slice takes
  ``SLICE_S``), checks the wall limit and the interrupt flag, and feeds the progress line.
* :func:`sigint_deferred` turns Ctrl-C into a flag the slicer reads (a nogil kernel cannot be
  interrupted, and an exception raised while it runs comes back as a ``SystemError``); the slicer
  then raises :class:`RunInterrupted` (a ``KeyboardInterrupt``).
* :class:`ProgressLine` is the one updating line on stderr (a TTY, or ``--progress``).

Slicing never changes a result: a slice ends before a scheduling time is committed, and the next
call recomputes it from the same state.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass


# ------------------------------------------------------------------ run limits (one block: the run spec)
#: an endless arrival stream (``--workload blox`` without ``--num-jobs``) is cut, unless
#: ``max_jobs`` says otherwise, after this many times the jobs up to the last tracked one
ENDLESS_STREAM_FACTOR = 16


@dataclass(frozen=True)
class RunLimits:
    """Limits that end a run early, marked incomplete (``None``: no limit). ``max_sim_time``:
    simulated seconds (steps after it are not taken); ``max_jobs``: arrivals (the run stops at
    the ``max_jobs``-th arrival's time; for an endless stream, the jobs generated); ``max_wall``:
    wall-clock seconds of simulation."""

    max_sim_time: float | None = None
    max_jobs: int | None = None
    max_wall: float | None = None


NO_LIMITS = RunLimits()


def stream_bound(track_last: int) -> int:
    """The default number of jobs of an endless stream whose tracked range ends at ``track_last``."""
    return ENDLESS_STREAM_FACTOR * (int(track_last) + 1)


def stop_time(limits: RunLimits, submit_s) -> tuple[float, str | None]:
    """The simulated time ``limits`` end a run of jobs arriving at ``submit_s`` (sorted) at:
    steps after it are not taken; and the limit that sets it (``inf, None``: none does)."""
    t, by = math.inf, None
    if limits.max_sim_time is not None:
        t, by = limits.max_sim_time, "max_sim_time"
    if limits.max_jobs is not None and limits.max_jobs < len(submit_s) and float(submit_s[limits.max_jobs - 1]) < t:
        t, by = float(submit_s[limits.max_jobs - 1]), "max_jobs"
    return t, by


def stop_message(stopped_by: str | None, limits: RunLimits, t_s: float, tracked_left: int, num_tracked: int) -> str | None:
    """The sentence that says why a run stopped early (None: it did not)."""
    if stopped_by is None:
        return None
    what = {
        "max_sim_time": lambda: f"the --max-sim-time limit of {limits.max_sim_time:g} simulated seconds",
        "max_jobs": lambda: f"the arrival of job number {limits.max_jobs} (--max-jobs)",
        "max_wall": lambda: f"the --max-wall limit of {limits.max_wall:g} seconds of wall time",
    }.get(stopped_by, lambda: stopped_by)()
    return (f"stopped at {what}, at simulated time {t_s:,.0f} s, with {tracked_left} of the {num_tracked} tracked "
            "jobs unfinished; the statistics cover the jobs that finished")


#: why a run stopped early, as ``summary["stopped_by"]``
STOP_REASONS = ("max_sim_time", "max_jobs", "max_wall", "endless_stream")


def mark(summary: dict, stopped_by: str | None, reason: str | None = None) -> dict:
    """Mark a summary complete (``stopped_by`` None) or incomplete: ``complete``, ``stopped_by``
    (one of ``STOP_REASONS``) and ``stop_reason`` (a sentence)."""
    summary["complete"] = stopped_by is None
    if stopped_by is not None:
        summary["stopped_by"] = stopped_by
        summary["stop_reason"] = reason or stopped_by
    return summary


# ------------------------------------------------------------------ interrupts
class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run between two slices; the message says where."""

    def __init__(self, t_s: float, finished: int, total: int):
        self.t_s, self.finished, self.total = t_s, finished, total
        super().__init__(f"interrupted at simulated time {t_s:,.0f} s ({finished} of {total} jobs finished)")


_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def sigint_deferred():
    """While inside, Ctrl-C (SIGINT) only sets a flag that the slicer reads between slices; the
    previous handler is restored on exit. Outside the main thread it does nothing (signals are
    delivered to the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _INTERRUPTED.clear()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: _INTERRUPTED.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted() -> bool:
    return _INTERRUPTED.is_set()


# ------------------------------------------------------------------ progress
#: a callable ``(t_s, finished, running, waiting, jobs_per_s, wall_s)`` the slicer calls between
#: slices (None: no progress). The CLI sets a :class:`ProgressLine`; the library stays quiet.
PROGRESS = None
PROGRESS_AFTER_S = 2.0


class ProgressLine:
    """One updating line on ``stream`` (``\\r`` on a TTY; full lines at most once a second
    otherwise), shown once a run has lasted ``PROGRESS_AFTER_S``."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.shown = False
        self.last = 0.0

    def __call__(self, t_s, finished, running, waiting, jobs_per_s, wall_s) -> None:
        if wall_s < PROGRESS_AFTER_S or (not self.tty and wall_s - self.last < 1.0):
            return
        self.last = wall_s
        line = (f"fastblox: simulated {t_s / 3600:,.1f} h | {finished:,} jobs finished, {running:,} running, "
                f"{waiting:,} waiting | {jobs_per_s:,.0f} jobs/s | {wall_s:,.0f} s")
        self.stream.write(("\r\033[K" + line) if self.tty else line + "\n")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """End the line (a TTY): what is printed next starts on a line of its own."""
        if self.shown and self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.shown = False


# ------------------------------------------------------------------ slicing
SLICE_S = 0.15  # wall seconds a slice aims at
FIRST_BUDGET = 256  # kernel passes of the first slice
GROWTH = 2.0  # a slice has at most this many times the passes of the one before: a pass costs more
# as the queues grow (a LAS step sorts every active job), so a budget sized on cheap passes must
# not jump far ahead of them
MAX_BUDGET = 1 << 40


class Slicer:
    """Between slices of one run: sizes the next slice, raises :class:`RunInterrupted` on Ctrl-C,
    says when the wall limit is reached and updates the progress line. ``progress(state)`` gives
    ``(t_s, finished, running, waiting, total)`` of the run."""

    def __init__(self, max_wall: float | None = None, slice_s: float = SLICE_S, budget: int = FIRST_BUDGET):
        self.max_wall = max_wall
        self.slice_s = slice_s
        self.budget = budget
        self.start = self.mark = time.perf_counter()
        self.stopped_by = None
        self.n_slices = 0

    def due(self) -> bool:
        """A slice's worth of wall time has passed (for runs that return to Python every step)."""
        return time.perf_counter() - self.mark >= self.slice_s

    def between(self, progress) -> bool:
        """Called after each slice; True: stop the run now (the wall limit)."""
        now = time.perf_counter()
        took = now - self.mark
        self.n_slices += 1
        # the next slice: scaled to take slice_s, growing at most GROWTH times a slice
        scale = GROWTH if took <= 0 else min(GROWTH, self.slice_s / took)
        self.budget = int(min(MAX_BUDGET, max(1, self.budget * scale)))
        if interrupted():
            t_s, finished, _, _, total = progress()
            raise RunInterrupted(t_s, finished, total)
        wall = now - self.start
        if PROGRESS is not None:
            t_s, finished, running, waiting, _ = progress()
            PROGRESS(t_s, finished, running, waiting, finished / wall if wall > 0 else 0.0, wall)
        self.mark = time.perf_counter()
        if self.max_wall is not None and wall >= self.max_wall:
            self.stopped_by = "max_wall"
            return True
        return False
