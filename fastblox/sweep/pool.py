"""The worker processes of the ``local`` executor (and of ``serial`` with a point time limit).

Each worker is a ``spawn``-ed process with its own pipe. The driver hands it up to ``DEPTH``
points at a time; the worker says when it starts a point and sends each point's result when
its files are written. So the driver always knows which point each worker is running, which a
``ProcessPoolExecutor`` cannot tell (a dead worker breaks the whole pool there):

* **A worker that dies** (``kill -9``, out of memory, a crash in native code) costs only its
  own point: the driver starts a new worker, hands the points that worker had not started to
  others, and runs the dead worker's point once more. A point whose worker dies a second time is
  recorded as failed (type ``WorkerDied``); every other point runs.
* **A time limit per point** (``point_timeout``, seconds of wall time from the point's start in
  its worker, building its workload included): a point over it has its worker killed and is
  recorded as failed (type ``PointTimeout``), not retried.
* **Ctrl-C**: workers ignore SIGINT; the driver's ``KeyboardInterrupt`` kills every worker at
  once (a point cut short leaves at most a temporary file, removed by the next run) and
  propagates. Points finished before are in ``results``.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_any

from ..errors import FastbloxError
from .points import run_point

#: Points handed to a worker ahead of the one it runs (hides the round trip between points).
DEPTH = 2
#: Deaths of a point's worker while it runs it, before the point is recorded as failed.
MAX_DEATHS = 2
#: Workers that may die before they start any point, per worker slot, before the sweep stops.
MAX_START_DEATHS = 2


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when the driver dies (``kill -9`` of a sweep
    leaves no worker writing into the folder); elsewhere a worker ends at its next message."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(conn, out_dir: str) -> None:
    """A worker: warm the kernels, then run the points it is sent until it is sent None (or
    the driver is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's business
    _die_with_parent()
    from .. import engine

    engine._warm("native")
    try:
        conn.send(("ready", None))
        while (points := conn.recv()) is not None:
            for p in points:
                conn.send(("start", (p.id, time.monotonic())))
                conn.send(("done", run_point(p, out_dir)))
    except (EOFError, OSError):  # the driver is gone
        return


@dataclass
class _Worker:
    proc: object
    conn: object
    assigned: deque = field(default_factory=deque)  # points sent, in order; the first may be running
    running: str | None = None
    started: float = 0.0
    ready: bool = False


def _how_it_died(proc) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class _Pool:
    def __init__(self, todo, out_dir: str, workers: int, prog, results: list, point_timeout, notice):
        self.queue = deque(todo)
        self.out_dir, self.size, self.prog, self.results = out_dir, workers, prog, results
        self.timeout, self.notice = point_timeout, notice or (lambda msg: None)
        self.ctx = mp.get_context("spawn")  # polars and numba keep threads, which fork must not copy
        self.workers: list[_Worker] = []
        self.deaths: dict[str, int] = {}
        self.start_deaths = 0
        self.by_id = {p.id: p for p in todo}

    # ------------------------------------------------------------------ workers
    def _spawn(self) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child, self.out_dir), daemon=True)
        proc.start()
        child.close()
        self.workers.append(_Worker(proc, parent))

    def _feed(self) -> None:
        busy = sum(len(w.assigned) for w in self.workers)
        while len(self.workers) < self.size and len(self.queue) + busy > len(self.workers):
            self._spawn()
        for w in self.workers:
            while len(w.assigned) < DEPTH and self.queue:
                p = self.queue.popleft()
                w.assigned.append(p)
                try:
                    w.conn.send([p])
                except OSError:  # it has just died: its sentinel says so, and p goes back to the queue
                    break

    def _remove(self, w: _Worker) -> None:
        """Stop ``w`` and hand back the points it had not started."""
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join()
        w.conn.close()
        self.workers.remove(w)
        self.queue.extendleft(reversed([p for p in w.assigned if p.id != w.running]))

    def _record(self, pid: str, msg: str | None, typ: str | None) -> None:
        self.results.append((pid, msg, typ))
        self.prog.step(msg is not None)

    # ------------------------------------------------------------------ events
    def _drain(self, w: _Worker) -> bool:
        """Read every message ``w`` sent; False if its pipe is closed (the worker is gone)."""
        try:
            while w.conn.poll():
                kind, val = w.conn.recv()
                if kind == "ready":
                    w.ready = True
                elif kind == "start":
                    w.running, w.started = val
                else:
                    w.assigned.popleft()
                    w.running = None
                    self._record(*val)
        except (EOFError, OSError):
            return False
        return True

    def _died(self, w: _Worker) -> None:
        self._drain(w)
        w.proc.join()
        how = _how_it_died(w.proc)
        pid = w.running
        self._remove(w)
        if pid is None:  # between points: nothing to blame, its points are handed to others
            if w.ready:
                return
            self.start_deaths += 1
            if self.start_deaths > MAX_START_DEATHS * self.size:
                raise FastbloxError(f"local executor: worker processes keep dying before they run a point (the last {how})")
            return
        self.deaths[pid] = self.deaths.get(pid, 0) + 1
        if self.deaths[pid] < MAX_DEATHS:
            self.notice(f"point {pid}: its worker process died, {how}; running it again")
            self.queue.appendleft(self.by_id[pid])
            return
        self._record(pid, f"the worker process running this point died {self.deaths[pid]} times, the last one {how} "
                          "(out of memory, a crash in native code, or killed); not retried", "WorkerDied")

    def _time_out(self, now: float) -> None:
        for w in list(self.workers):
            self._drain(w)  # a point that has just finished is not timed out
            if w.running is not None and now - w.started > self.timeout:
                pid = w.running
                self._remove(w)
                self._record(pid, f"timed out: still running after {self.timeout:g} s (--point-timeout); "
                                  "its worker process was killed", "PointTimeout")

    def _wait_s(self) -> float | None:
        if self.timeout is None:
            return None
        starts = [w.started for w in self.workers if w.running is not None]
        if not starts:
            return self.timeout  # nothing running yet: look again when something may be
        return max(0.0, min(starts) + self.timeout - time.monotonic()) + 0.01

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        try:
            self._loop()
        finally:
            self._stop_all()

    def submit(self, todo, prog, results: list) -> None:
        """Run another batch on the same workers (a search's next round); returns when it is done.
        On an exception (Ctrl-C) the caller must call :meth:`close`."""
        self.queue.extend(todo)
        self.by_id.update((p.id, p) for p in todo)
        self.prog, self.results = prog, results
        self._loop()

    def close(self) -> None:
        self._stop_all()

    def _loop(self) -> None:
        while self.queue or any(w.assigned for w in self.workers):
            self._feed()
            ready = set(wait_any([w.conn for w in self.workers] + [w.proc.sentinel for w in self.workers],
                                 timeout=self._wait_s()))
            for w in list(self.workers):
                if (w.conn in ready or w.proc.sentinel in ready) and not (self._drain(w) and w.proc.is_alive()):
                    self._died(w)
            if self.timeout is not None:
                self._time_out(time.monotonic())

    def _stop_all(self) -> None:
        old = ignore_sigint()
        try:
            for w in self.workers:
                if not w.assigned:
                    try:
                        w.conn.send(None)
                    except OSError:
                        pass
            deadline = time.monotonic() + 1.0
            for w in self.workers:
                if w.assigned:
                    w.proc.kill()  # interrupted, or an error in the driver: stop at once
                w.proc.join(max(0.0, deadline - time.monotonic()))
                if w.proc.is_alive():
                    w.proc.kill()
                    w.proc.join()
                w.conn.close()
            self.workers.clear()
        finally:
            restore_sigint(old)


def ignore_sigint():
    """Ignore Ctrl-C (main thread only) while something must not be cut short; returns what
    :func:`restore_sigint` puts back (None: nothing changed)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def restore_sigint(old) -> None:
    if old is not None:
        signal.signal(signal.SIGINT, old)


def run_pool(todo: list, out_dir: str, workers: int, prog, results: list, point_timeout: float | None = None,
             notice=None) -> None:
    """Run ``todo`` on ``workers`` worker processes, appending ``(id, error or None, error type)``
    to ``results`` as points finish (so an interrupted run keeps what finished)."""
    _Pool(todo, out_dir, max(1, min(workers, len(todo))), prog, results, point_timeout, notice).run()


def worker_pool(out_dir: str, workers: int, point_timeout: float | None = None, notice=None) -> _Pool:
    """Worker processes kept across batches (a search's rounds, so that the workers start and load
    the kernels once): ``submit(todo, prog, results)`` runs a batch, ``close()`` stops them."""
    return _Pool([], out_dir, max(1, workers), None, [], point_timeout, notice)
