"""Cluster changes over time: nodes that fail, recover, are removed or added (Blox's "cluster
management" part).

A cluster-events file is a CSV with a header and the columns ``time_s,event,node``:

* ``fail`` / ``remove``: the node goes out of service at ``time_s``; every job holding a GPU on
  it is killed (its progress since its last checkpoint is lost, see ``checkpoint_s``), freed
  everywhere, and waits to be scheduled again. ``remove`` is a ``fail`` that is meant to last.
* ``recover`` / ``add``: the node comes (back) into service with every GPU free. A node whose
  first event is ``add`` starts the run out of service (it joins the cluster later).

``node`` is the 0-based node index of the cluster (nodes numbered as ``--cluster`` lists them).
Rows may be in any order; events at the same time apply in file order. Every problem is an error
naming the file, row and column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cluster import Cluster
from .errors import ConfigError
from .kernels import enums

DOWN = ("fail", "remove")
UP = ("recover", "add")


@dataclass(frozen=True, eq=False)
class ClusterEvents:
    """Node events sorted by time (stable). ``start_down`` marks nodes out of service at t = 0."""

    t_s: np.ndarray
    node: np.ndarray
    event: tuple  # names, one per event
    start_down: np.ndarray
    source: str = "events"

    @property
    def kind(self) -> np.ndarray:
        return np.array([enums.EV_FAIL if e in DOWN else enums.EV_RECOVER for e in self.event], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.t_s.shape[0])

    def counts(self) -> dict:
        return {e: int(sum(1 for x in self.event if x == e)) for e in DOWN + UP if e in self.event}

    @classmethod
    def from_records(cls, records, cluster: Cluster, source: str = "events", rows=None) -> "ClusterEvents":
        """From ``(time_s, event, node)`` triples; ``rows`` (line numbers) make errors point at a file."""
        where = (lambda i: f"{source}: row {rows[i]}") if rows is not None else (lambda i: f"{source}: event {i}")
        ts, evs, nds = [], [], []
        for i, rec in enumerate(records):
            try:
                t, e, nd = rec
            except (TypeError, ValueError):
                raise ConfigError(f"{where(i)}: expected (time_s, event, node), got {rec!r}") from None
            try:
                t = float(t)
            except (TypeError, ValueError):
                raise ConfigError(f"{where(i)}, column 'time_s': expected seconds, got {t!r}") from None
            if not np.isfinite(t) or t < 0:
                raise ConfigError(f"{where(i)}, column 'time_s': must be a finite time >= 0, got {t!r}")
            e = str(e).strip().lower()
            if e not in DOWN + UP:
                raise ConfigError(f"{where(i)}, column 'event': unknown event {e!r}; use one of {', '.join(DOWN + UP)}")
            try:
                nd_i = int(str(nd).strip())
            except ValueError:
                raise ConfigError(f"{where(i)}, column 'node': expected a node index, got {nd!r}") from None
            if not 0 <= nd_i < cluster.num_nodes:
                raise ConfigError(f"{where(i)}, column 'node': node {nd_i} does not exist (the cluster "
                                  f"{cluster.spec!r} has nodes 0..{cluster.num_nodes - 1})")
            ts.append(t)
            evs.append(e)
            nds.append(nd_i)
        order = np.argsort(np.asarray(ts, dtype=np.float64), kind="stable")
        t_s = np.asarray(ts, dtype=np.float64)[order]
        node = np.asarray(nds, dtype=np.int64)[order]
        event = tuple(evs[i] for i in order)
        # replay the states to catch events that make no sense (a node failing while down)
        start_down = np.zeros(cluster.num_nodes, dtype=bool)
        seen = np.zeros(cluster.num_nodes, dtype=bool)
        up = np.ones(cluster.num_nodes, dtype=bool)
        for k, i in enumerate(order):
            nd_i, e = node[k], event[k]
            if not seen[nd_i]:
                seen[nd_i] = True
                if e == "add":
                    start_down[nd_i] = True
                    up[nd_i] = False
            if e in DOWN and not up[nd_i]:
                raise ConfigError(f"{where(i)}: node {nd_i} cannot {e} at {t_s[k]:g} s: it is already out of service")
            if e in UP and up[nd_i]:
                raise ConfigError(f"{where(i)}: node {nd_i} cannot {e} at {t_s[k]:g} s: it is already in service")
            up[nd_i] = e in UP
        return cls(t_s, node, event, start_down, source)

    @classmethod
    def read(cls, path, cluster: Cluster) -> "ClusterEvents":
        """Read a ``time_s,event,node`` CSV file (see the module docstring)."""
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"--cluster-events: no file {str(p)!r}")
        with open(p, newline="") as f:
            rows = [r for r in csv.reader(f)]
        numbered = [(k, r) for k, r in enumerate(rows, start=1) if any(c.strip() for c in r)]
        if not numbered:
            raise ConfigError(f"{p}: empty cluster-events file; expected a header 'time_s,event,node'")
        head = [h.strip().lower() for h in numbered[0][1]]
        missing = [c for c in ("time_s", "event", "node") if c not in head]
        if missing:
            raise ConfigError(f"{p}: row {numbered[0][0]}: the header lacks column(s) {missing}; expected 'time_s,event,node'")
        ix = [head.index(c) for c in ("time_s", "event", "node")]
        recs, lines = [], []
        for k, r in numbered[1:]:
            if len(r) < len(head):
                raise ConfigError(f"{p}: row {k}: expected {len(head)} fields, got {len(r)}")
            recs.append(tuple(r[i] for i in ix))
            lines.append(k)
        return cls.from_records(recs, cluster, source=str(p), rows=lines)

    @classmethod
    def random_failures(cls, cluster: Cluster, mtbf_s: float, repair_s: float, horizon_s: float,
                        seed: int = 0) -> "ClusterEvents":
        """Independent node failures: each node fails after an exponential time of mean
        ``mtbf_s`` in service and recovers ``repair_s`` later, until ``horizon_s`` (seeded)."""
        if not (mtbf_s > 0 and np.isfinite(mtbf_s)):
            raise ConfigError(f"--failures: the mean time between failures must be positive, got {mtbf_s!r}")
        if not (repair_s >= 0 and np.isfinite(repair_s)):
            raise ConfigError(f"--failures: the repair time must be >= 0, got {repair_s!r}")
        rng = np.random.default_rng(seed)
        recs = []
        for nd in range(cluster.num_nodes):
            t = 0.0
            while True:
                t += rng.exponential(mtbf_s)
                if t >= horizon_s:
                    break
                recs.append((t, "fail", nd))
                t += repair_s
                recs.append((t, "recover", nd))
        return cls.from_records(recs, cluster, source=f"random failures (MTBF {mtbf_s:g} s, repair {repair_s:g} s, seed {seed})")
